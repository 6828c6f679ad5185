"""Character tokens for text observations: one token per character of the shared ``TEXT_CHARSET``.

Ids 0..2 are special: ``PAD`` fills batches of unequal length (it sits after the query token, so causal attention
never lets it reach a position that is read), ``UNK`` stands for a character outside the charset, and ``QUERY`` is
appended to every observation: the model's output at the query position is what the policy and value heads read.
Encoding goes through a 256-entry lookup table, so a 2,000-character grid costs one ``np.frombuffer`` and one
gather, not a Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from llm_gym.envs.spaces import TEXT_CHARSET

PAD, UNK, QUERY = 0, 1, 2
SPECIALS = ("<pad>", "<unk>", "<query>")


class CharTokenizer:
    """Maps text to token ids over ``charset`` (default: the project's ``TEXT_CHARSET``) plus the special ids.

    Args:
        charset: the characters observations may hold; each gets its own id after the specials.
    """

    def __init__(self, charset: str = TEXT_CHARSET) -> None:
        if len(set(charset)) != len(charset):
            raise ValueError("the charset lists a character twice")
        if any(ord(c) > 255 for c in charset):
            raise ValueError("the character tokenizer covers single-byte characters only")
        self.charset = charset
        self.vocab_size = len(SPECIALS) + len(charset)
        self._lut = np.full(256, UNK, dtype=np.uint8)
        for i, char in enumerate(charset):
            self._lut[ord(char)] = len(SPECIALS) + i
        self._chars = np.array(list(SPECIALS) + list(charset), dtype=object)

    def encode(self, text: str) -> np.ndarray:
        """Token ids of ``text`` (uint8, no query token): single-byte characters outside the charset become ``UNK``,
        wider ones ``?`` (observations are ASCII by contract, so neither happens in the project's envs)."""
        return self._lut[np.frombuffer(text.encode("latin-1", errors="replace"), dtype=np.uint8)]

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text of ``ids``; specials are written as ``<pad>``, ``<unk>``, ``<query>``."""
        return "".join(self._chars[np.asarray(ids, dtype=np.intp)])

    def encode_batch(
        self, texts: Sequence[str], context: int, out: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode ``texts`` into a (B, context) uint8 array, each followed by ``QUERY`` and right-padded with ``PAD``.

        A text longer than ``context - 1`` keeps its *last* characters (text observations end with what matters
        now: the latest move, the legal actions). Returns ``(tokens, query_index)``; ``query_index[i]`` is where
        text i's query token sits. ``out`` may be given to fill a preallocated buffer row block.
        """
        tokens = out if out is not None else np.empty((len(texts), context), dtype=np.uint8)
        tokens.fill(PAD)
        query = np.empty(len(texts), dtype=np.int64)
        keep = context - 1
        for row, text in enumerate(texts):
            ids = self.encode(text)
            if len(ids) > keep:
                ids = ids[len(ids) - keep :]
            tokens[row, : len(ids)] = ids
            tokens[row, len(ids)] = QUERY
            query[row] = len(ids)
        return tokens, query
