"""affinetes' exact-match decision for Trace answers (``scoring="affinetes"``).

Restated from AffineFoundation/affinetes ``environments/trace/trace_task.py`` (``clean_llm_prediction`` and
``compare_outputs``), not copied. Cleaning, in order:

1. every ``<think>...</think>`` span is removed (case-sensitive, shortest span from each opening tag, left to
   right; an opening tag that never closes stays), then every ``<thinking>...</thinking>`` span the same way;
2. if a ``</think>`` is still there, only the text after the last one is kept (stripped); then the same for
   ``</thinking>``;
3. the *first* fenced block replaces the text: after the opening ```` ``` ````, a run of ASCII letters (the
   language tag) and at most one newline are skipped; the block runs to the next ```` ``` ````, minus one newline
   right before it. No closing fence: no block;
4. surrounding whitespace is stripped.

The answer matches when the cleaned answer and the expected stdout are equal after removing *all* whitespace
(anything ``str.split()`` splits on) and lowercasing both.

Where this project's own ``exact`` scoring (:mod:`llm_gym.envs.trace.scoring`) differs, and why: it keeps spaces
inside lines, line breaks and letter case significant (``x = 1`` and ``X=1`` print different things, and
``__DBG__`` values such as ``'a b'`` versus ``'ab'`` are what the task is about), takes the *last* fenced block
(models often quote the program first and answer last), accepts an unclosed final fence (an answer cut off at the
token limit), and matches ``<think>`` tags in any case. So ``exact`` implies ``affinetes`` except for fence and
think-tag handling: an answer whose first fence quotes the program passes ``exact`` and fails ``affinetes``.
"""

from __future__ import annotations

_FENCE = "```"


def _drop_spans(text: str, opening: str, closing: str) -> str:
    """Remove each ``opening ... closing`` span (shortest, left to right); an unclosed opening tag stays."""
    out, position = [], 0
    while True:
        start = text.find(opening, position)
        if start < 0:
            break
        end = text.find(closing, start + len(opening))
        if end < 0:
            break
        out.append(text[position:start])
        position = end + len(closing)
    out.append(text[position:])
    return "".join(out)


def _first_fenced_block(text: str) -> str | None:
    opening = text.find(_FENCE)
    if opening < 0:
        return None
    start = opening + len(_FENCE)
    while start < len(text) and text[start].isascii() and text[start].isalpha():
        start += 1
    if text.startswith("\n", start):
        start += 1
    closing = text.find(_FENCE, start)
    if closing < 0:
        return None
    end = closing - 1 if closing > start and text[closing - 1] == "\n" else closing
    return text[start:end]


def clean_prediction(text: str) -> str:
    """Steps 1-4 of the module docstring."""
    for tag in ("think", "thinking"):
        text = _drop_spans(text, f"<{tag}>", f"</{tag}>")
    for closing in ("</think>", "</thinking>"):
        if closing in text:
            text = text.rsplit(closing, 1)[-1].strip()
    block = _first_fenced_block(text)
    return (text if block is None else block).strip()


def _squash(text: str) -> str:
    return "".join(text.split()).lower()


def matches(answer: object, expected_stdout: str) -> bool:
    """affinetes' verdict on a raw model answer against a program's stdout."""
    return _squash(clean_prediction(answer if isinstance(answer, str) else str(answer))) == _squash(expected_stdout)
