"""Noticing when a small local model stops answering and starts rambling.

SmolLM2-135M, the offline default, often answers in a line and then goes on:
it opens a new chat turn (``Question: ...``), writes context blocks of its own
that mimic the prompt's (``[5] (chunk: kabir)`` — the format of
:func:`unirag.generate.direct.format_context` and of the map-reduce points), or
repeats the same sentence until ``max_tokens``. Everything after that point is
noise that costs minutes on a CPU, and worse, is shown as the answer.

:class:`DegenerationGuard` reads a reply as it is generated and says where it
went wrong; the embedded backend then stops the model and keeps the text
before that point. What it looks for:

* **stop strings**: a chat-turn marker as text (``<|im_start|>``) or a line
  that starts a new prompt turn (``Question:``, ``Context:``, ``User:``). The
  model finished its answer and began another conversation: a normal end
  (finish reason ``stop``).
* **invented context**: a line that starts like a context block header,
  ``[N] (kind: source)``. Our prompts never ask the model to write one, so it is
  making up sources (finish reason ``invented_context``).
* **repetition**: the same line three times, the same run of
  :data:`NGRAM_WORDS` words three times, or one short unit repeated
  :data:`UNIT_REPEATS` times without spaces (``!!!!!…``). The kept text ends
  where the second copy starts (finish reason ``repetition``).

The checks are plain text rules: the model is tiny and its failure modes are
these. They only ever shorten a reply. Repetition is not checked in JSON mode,
where records legitimately share long runs of words (``"type": "person",``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from unirag.llm.base import INVENTED_CONTEXT, REPETITION

__all__ = ["INVENTED_CONTEXT", "REPETITION", "Degeneration", "DegenerationGuard", "find_degeneration"]

#: Chat-template markers: seen as text, the model is writing a new turn itself.
TURN_MARKERS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")
#: Line openings that begin a new prompt turn (our prompts' own labels and generic ones).
TURN_LINES = ("Question:", "Context:", "User:", "Human:", "Assistant:")
#: A run of this many words seen three times is a loop, not an answer (8: long enough that
#: an answer quoting the question's phrase twice or a list's shared words do not trip it).
NGRAM_WORDS = 8
#: How many times a unit without spaces must repeat back to back (``!!!!`` or ``abab``).
UNIT_REPEATS = 20

# A context block header at the start of a line: "[3] (chunk: Kabir)", "[2] (entity: X)".
_HEADER = re.compile(r"^[ \t]*\[\d+\][ \t]*\([\w -]+:[^)\n]*\)", re.MULTILINE)
_TURN_LINE = re.compile(r"^[ \t]*(?:" + "|".join(re.escape(s) for s in TURN_LINES) + ")", re.MULTILINE)
_UNIT_RUN = re.compile(r"(\S{1,12}?)\1{%d,}" % (UNIT_REPEATS - 1))
_WORDS = re.compile(r"\S+")


@dataclass(frozen=True)
class Degeneration:
    """Where a reply went wrong: keep ``text[:keep]``; ``reason`` is the finish reason."""

    reason: str
    keep: int


def find_degeneration(text: str, repetition: bool = True) -> Degeneration | None:
    """The earliest point where ``text`` stops being an answer, or None.

    ``repetition=False`` looks for stop strings and invented context only (JSON replies).
    """
    found: list[Degeneration] = []
    for marker in TURN_MARKERS:
        at = text.find(marker)
        if at >= 0:
            found.append(Degeneration("stop", at))
    if (match := _TURN_LINE.search(text)) is not None and match.start() > 0:
        found.append(Degeneration("stop", match.start()))  # at 0 the reply itself is odd, not a new turn
    if (match := _HEADER.search(text)) is not None:
        found.append(Degeneration(INVENTED_CONTEXT, match.start()))
    if repetition:
        for at in (_repeated_line(text), _repeated_ngram(text), _repeated_unit(text)):
            if at is not None:
                found.append(Degeneration(REPETITION, at))
    return min(found, key=lambda d: d.keep) if found else None


def _repeated_line(text: str) -> int | None:
    """Start of the second copy of a line that appears three times (lines with a word in them)."""
    seen: dict[str, list[int]] = {}
    offset = 0
    for line in text.splitlines(keepends=True):
        key = line.strip()
        if re.search(r"\w\w", key):
            starts = seen.setdefault(key, [])
            starts.append(offset)
            if len(starts) == 3:
                return starts[1]
        offset += len(line)
    return None


def _repeated_ngram(text: str) -> int | None:
    """Start of the second copy of the first run of :data:`NGRAM_WORDS` words seen three times."""
    words = [(m.group(), m.start()) for m in _WORDS.finditer(text)]
    seen: dict[tuple[str, ...], list[int]] = {}
    best: int | None = None
    for i in range(len(words) - NGRAM_WORDS + 1):
        key = tuple(w for w, _ in words[i:i + NGRAM_WORDS])
        starts = seen.setdefault(key, [])
        # Overlapping copies ("a a a a ...") count once per NGRAM_WORDS words.
        if starts and i - starts[-1] < NGRAM_WORDS:
            continue
        starts.append(i)
        if len(starts) >= 3:
            second = words[starts[1]][1]
            best = second if best is None else min(best, second)
    return best


def _repeated_unit(text: str) -> int | None:
    """End of the first copy of a short unit repeated :data:`UNIT_REPEATS` times back to back."""
    match = _UNIT_RUN.search(text)
    return match.start() + len(match.group(1)) if match else None


def _could_become_marker(tail: str) -> bool:
    """Whether the unfinished last line of a reply may still turn into something cut above
    (so a stream holds it back instead of showing text it would then take away)."""
    line = tail.lstrip(" \t")
    if not line:
        return False
    if line[0] == "[":  # a context header begins "[N] ("
        return re.fullmatch(r"\[\d*(?:\][ \t]*(?:\([^)\n]*)?)?", line) is not None
    return any(label.startswith(line) for label in TURN_LINES) or any(
        marker.startswith(line[line.rfind("<"):]) for marker in TURN_MARKERS if "<" in line)


class DegenerationGuard:
    """Reads a streamed reply chunk by chunk; says what may be shown and when to stop.

    ``feed`` returns the text that is safe to show now and, once the reply went
    wrong, the :class:`Degeneration` (after which the caller stops the model).
    Text that may still become a marker (an unfinished ``[3] (chu`` line) is held
    back until it is clear. Repetition is found at its third copy, when the second
    may already have been shown: :attr:`text` (the kept reply) is then shorter than
    what was streamed.
    """

    def __init__(self, repetition: bool = True) -> None:
        self._repetition = repetition
        self._raw = ""
        self._shown = 0
        self.stopped: Degeneration | None = None

    @property
    def text(self) -> str:
        """The reply as kept: all of it, or what came before the degenerate part."""
        if self.stopped is None:
            return self._raw
        return self._raw[: self.stopped.keep].rstrip()

    def feed(self, chunk: str) -> tuple[str, Degeneration | None]:
        if self.stopped is not None:
            return "", self.stopped
        self._raw += chunk
        found = find_degeneration(self._raw, self._repetition)
        if found is not None:
            self.stopped = found
            return self._show(len(self.text)), found
        line_start = self._raw.rfind("\n") + 1
        safe = line_start if _could_become_marker(self._raw[line_start:]) else len(self._raw)
        return self._show(safe), None

    def flush(self) -> str:
        """What was held back, at the end of a reply that never went wrong."""
        return self._show(len(self.text))

    def _show(self, end: int) -> str:
        if end <= self._shown:
            return ""
        part, self._shown = self._raw[self._shown:end], end
        return part
