"""Short rules of every game, as OpenSpiel implements them (seat numbers, action names, how it scores).

These go into the env's ``instructions`` (the system prompt). They describe OpenSpiel's variant where it differs from
the table game (e.g. chess player 0 is Black, Leduc cards are numbered).
"""

from __future__ import annotations

RULES: dict[str, str] = {
    "goofspiel": (
        "Every player holds the cards 1..N. Each round a point card is revealed; all players bid one of their cards "
        "at the same time. The highest bid wins the point card's value (a tie discards it); bid cards are used up. "
        "After N rounds the player with the most points wins (+1), the others lose. Your hand, the other hands and the "
        "point cards so far are shown; you choose your bid without seeing the others' bids this round."
    ),
    "liars_dice": (
        "Each player rolls dice secretly. Players take turns bidding 'quantity-face' (e.g. 2-5 = at least two dice "
        "showing 5 among ALL players' dice); every bid must be higher than the last (more dice, or the same quantity "
        "with a higher face). Instead of bidding you may call 'Liar': if the last bid is true the caller loses, "
        "otherwise the bidder loses. A face of 6 is wild (counts as any face). You see only your own dice."
    ),
    "leduc_poker": (
        "A deck of pairs of J, Q, K (cards 0-1 = J, 2-3 = Q, 4-5 = K; one more rank per extra player). Each player "
        "antes 1 chip and gets one private card. Round 1: betting (Fold, Call/Check, Raise; raise 2 chips, at most two "
        "raises). A public card is revealed, then round 2 (raise 4 chips). At showdown a pair with the public card "
        "wins, otherwise the higher private card. Your return is the chips you win or lose."
    ),
    "gin_rummy": (
        "Two-player gin rummy with a 52-card deck and 10-card hands. Each turn draw (the upcard or from the stock), "
        "then discard. Form melds (3+ cards of a rank, or 3+ suited cards in sequence); unmatched cards are deadwood "
        "(face cards 10, ace 1). You may knock when your deadwood is at most the knock card value; gin (no deadwood) "
        "earns a bonus. Your return is the points you score (negative if the opponent scores)."
    ),
    "othello": (
        "8x8 board. Place a disc so that it brackets a straight line of the opponent's discs between it and one of "
        "yours; the bracketed discs flip to your colour. If you cannot move you must pass. When neither player can "
        "move, the player with more discs wins. Player 0 is Black (x) and moves first."
    ),
    "backgammon": (
        "Move all 15 of your checkers around the board and bear them off before the opponent. Each turn you roll two "
        "dice and move checkers by those numbers (doubles: four moves); a single checker on a point can be hit and "
        "sent to the bar, and must re-enter before you move anything else. Player 0 is x, player 1 is o. Each action "
        "is a whole turn's move (both dice). Win +1 (more for gammons when the variant scores them)."
    ),
    "hex": (
        "Players alternately place a stone on an empty cell of a rhombus of hexagons (cells a1, b1, ...; letters are "
        "columns, numbers are rows). Player 0 (x) wins by connecting the top row to the bottom row; player 1 (o) wins "
        "by connecting the left column to the right column. There are no draws."
    ),
    "clobber": (
        "The board starts full of alternating o and x stones. On your turn move one of your stones onto an orthogonally "
        "adjacent cell holding an opponent's stone, capturing it (actions like b4c4 = from b4 to c4). The player who "
        "cannot move loses. Player 0 plays o, player 1 plays x."
    ),
    "hearts": (
        "Four players, 13 cards each. First pass three cards (left, right, across or none, rotating). Then 13 tricks: "
        "follow the led suit if you can; the highest card of the led suit wins the trick and leads next. Each heart "
        "taken costs 1 point and the queen of spades 13; taking all of them ('shooting the moon') costs the others "
        "instead. Hearts cannot be led until broken. Fewer penalty points is better; your return grows as you take "
        "fewer points. Cards are written rank+suit (e.g. QS, TH = ten of hearts)."
    ),
    "euchre": (
        "Four players in two partnerships (North-South vs East-West), 24 cards (9 to A). After the deal players bid to "
        "name trump (ordering up the upcard, or naming a suit in round 2), or pass. The jack of trump is the highest "
        "card, then the other jack of the same colour. Follow suit if you can; the makers must take at least 3 of 5 "
        "tricks. Team points go to both partners (zero-sum between the teams)."
    ),
    "dots_and_boxes": (
        "Players take turns drawing one line between two adjacent dots (actions name a horizontal 'h' or vertical 'v' "
        "line by row and column). Completing the fourth side of a box scores it and gives you another move. When all "
        "lines are drawn, the player with more boxes wins. Player 0 is P1, player 1 is P2."
    ),
    "go": (
        "Players alternately place a stone of their colour on an empty intersection (or pass). A group with no empty "
        "adjacent point is captured. Suicide and repeating a position are illegal. The game ends after two passes; "
        "area scoring (stones + surrounded territory) plus komi for White decides the winner. Player 0 is Black (X) "
        "and moves first; player 1 is White (O)."
    ),
    "chess": (
        "Standard chess (or Chess960 when the variant says so). The state is shown as a board (uppercase = White, "
        "lowercase = Black, White at the bottom) and as FEN. Moves are in standard algebraic notation (e.g. e4, Nf3, "
        "O-O, exd5, e8=Q). In OpenSpiel player 0 is Black and player 1 is White; White moves first. Checkmate wins, "
        "stalemate and the draw rules give 0."
    ),
    "checkers": (
        "Draughts on the board shown: player 0 plays o (moving up the board), player 1 plays + (moving down). Pieces "
        "move diagonally forward onto empty dark squares; jumps over an adjacent enemy piece capture it and are "
        "compulsory, and multi-jumps continue with the same piece. A piece reaching the far row becomes a king (moves "
        "backward too). A player with no legal move loses."
    ),
    "quoridor": (
        "Each player has a pawn and a stock of walls. On your turn either move your pawn one cell (jumping an adjacent "
        "pawn when allowed) or place a wall (two cells long, 'v' vertical or 'h' horizontal at the named corner) that "
        "blocks movement; a wall may never cut a pawn off from its goal. The first pawn to reach the row opposite its "
        "start wins."
    ),
    "blackjack": (
        "You play against the dealer. Cards count their value, face cards 10, an ace 1 or 11. You see your cards and "
        "the dealer's face-up card. Hit to take a card or Stand to stop; going over 21 busts (you lose). Then the "
        "dealer draws to 17 or more. Closer to 21 than the dealer wins (+1), a tie pushes (0), less loses (-1)."
    ),
    "phantom_ttt": (
        "Tic-tac-toe in which you cannot see the opponent's marks. You see only your own marks and any opponent mark "
        "you discovered: choosing a cell the opponent already holds reveals it and you must choose again. Three in a "
        "row wins. Player 0 is x, player 1 is o; cells are (row,column)."
    ),
    "2048": (
        "A 4x4 grid of tiles. Each move (Up, Right, Down, Left) slides all tiles; two equal tiles that collide merge "
        "into one with their sum, which you score. After every move a new 2 (or 4) appears on a random empty cell. "
        "The game ends when you cannot move or you reach the target tile. Your return is the sum of merged tiles."
    ),
    "solitaire": (
        "Klondike solitaire: build the four foundations up by suit from A to K. Tableau piles build down in alternating "
        "colours; only a K may fill an empty pile; the waste shows drawn cards. Face-down cards (##) are hidden until "
        "uncovered. Actions move a card ('target <- source') or reveal/draw. You score points for useful moves, most "
        "for cards on the foundations; the game stops after a fixed number of moves."
    ),
    "bridge": (
        "Contract bridge: four players in partnerships North-South (players 0 and 2) vs East-West (players 1 and 3), "
        "13 cards each. The auction: bid a number of tricks above six and a strain (C, D, H, S, NT), Pass, Dbl or "
        "RDbl; three passes end it. Then the cards are played in 13 tricks (follow suit; the declarer also plays the "
        "dummy's cards), or, in the bidding-only variants, a double-dummy solver computes the tricks. The contract is "
        "scored with duplicate bridge scoring; your return is your side's score."
    ),
    "amazons": (
        "Each player has four amazons (queens). A move has three parts, each its own action: pick one of your amazons "
        "('From'), move it like a chess queen to an empty cell ('To'), then shoot an arrow from its new cell like a "
        "queen ('Shoot'); the arrow's cell (#) is blocked for good. The player who cannot move loses. Player 0 is X."
    ),
    "oware": (
        "Two rows of houses with seeds; player 0 owns the bottom row (A-F, sown left to right), player 1 the top row. "
        "Choose one of your non-empty houses: its seeds are sown one per house counter-clockwise. If the last seed "
        "lands in an opponent house making 2 or 3 seeds, you capture them (and preceding houses of 2 or 3). You must "
        "leave the opponent a move if you can. More than half the seeds wins."
    ),
    "tic_tac_toe": (
        "3x3 board; player 0 is x and moves first, player 1 is o. Place your mark in an empty cell (row,column); three "
        "in a row, column or diagonal wins, a full board is a draw."
    ),
    "connect_four": (
        "7 columns, 6 rows. Player 0 is x and moves first, player 1 is o. Choose a column; your disc drops to the "
        "lowest empty cell. Four in a row horizontally, vertically or diagonally wins; a full board is a draw."
    ),
    "kuhn_poker": (
        "A deck of 3 cards J < Q < K (one more card per extra player). Each player antes 1 chip and gets one card. In "
        "turn, players Pass (check/fold) or Bet (1 chip, or call a bet). If everyone passes, or after bets are called, "
        "the highest card among those still in wins the pot. Your return is the chips won or lost."
    ),
    "breakthrough": (
        "Each player starts with two full rows of pieces. Player 0 plays b (Black, at the top, moving down) and player "
        "1 plays w (White, at the bottom, moving up). A piece moves one cell straight or diagonally forward onto an "
        "empty cell, or diagonally forward onto an enemy piece to capture it. Reaching the far row, or capturing all "
        "enemy pieces, wins. Actions are from-to, e.g. a7a6."
    ),
}

ANSWER_FORMAT = (
    "Each turn you receive the current state as your seat sees it and the legal actions as `id -> name`. "
    "Answer with exactly one legal action: its id (preferred) or its name."
)
