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
    """The earliest point where ``text`` (a whole reply) stops being an answer, or None.

    ``repetition=False`` looks for stop strings and invented context only (JSON replies).
    """
    scanner = _Scanner(repetition)
    return scanner.feed(text) or scanner.close()


class _Scanner:
    """The checks of :func:`find_degeneration`, run on a growing reply: each chunk is read
    once (a reply of 512 tokens is checked 512 times; re-reading it whole each time
    cost seconds of CPU that the model, on the same two cores, needed)."""

    def __init__(self, repetition: bool) -> None:
        self.text = ""
        self._repetition = repetition
        self._marker_from = 0  # markers were looked for before this offset
        self._line_start = 0  # start of the first line not yet counted
        self._lines: dict[str, list[int]] = {}
        self._word_end = 0  # words were split up to this offset
        self._words: list[tuple[str, int]] = []
        self._ngrams: dict[tuple[str, ...], list[int]] = {}
        self._next_ngram = 0  # index of the first word whose n-gram is not yet counted

    def feed(self, chunk: str) -> Degeneration | None:
        self.text += chunk
        return self._scan(len(chunk), final=False)

    def close(self) -> Degeneration | None:
        """Count the last line and word too (the reply ended without a newline)."""
        return self._scan(0, final=True)

    def _scan(self, new: int, final: bool) -> Degeneration | None:
        text = self.text
        found: list[Degeneration] = []
        since = max(0, self._marker_from - max(map(len, TURN_MARKERS)))
        for marker in TURN_MARKERS:
            if (at := text.find(marker, since)) >= 0:
                found.append(Degeneration("stop", at))
        line = text.rfind("\n", 0, self._marker_from) + 1  # the line the new text continues
        if (match := _TURN_LINE.search(text, line)) is not None and match.start() > 0:
            found.append(Degeneration("stop", match.start()))  # at 0 the reply itself is odd, not a new turn
        if (match := _HEADER.search(text, line)) is not None:
            found.append(Degeneration(INVENTED_CONTEXT, match.start()))
        self._marker_from = len(text)
        if self._repetition:
            for at in (self._repeated_line(final), self._repeated_ngram(final), self._repeated_unit(new)):
                if at is not None:
                    found.append(Degeneration(REPETITION, at))
        return min(found, key=lambda d: d.keep) if found else None

    def _repeated_line(self, final: bool) -> int | None:
        """Start of the second copy of a line that appears three times (lines with a word in them)."""
        best: int | None = None
        text = self.text
        while self._line_start < len(text):
            end = text.find("\n", self._line_start)
            if end < 0:
                if not final:
                    break
                end = len(text)
            key = text[self._line_start:end].strip()
            if re.search(r"\w\w", key):
                starts = self._lines.setdefault(key, [])
                starts.append(self._line_start)
                if len(starts) == 3:
                    best = starts[1] if best is None else min(best, starts[1])
            self._line_start = end + 1
        return best

    def _repeated_ngram(self, final: bool) -> int | None:
        """Start of the second copy of a run of :data:`NGRAM_WORDS` words seen three times."""
        text = self.text
        end = len(text) if final else max(text.rfind(" "), text.rfind("\n"), text.rfind("\t")) + 1
        if end > self._word_end:
            self._words += [(m.group(), m.start()) for m in _WORDS.finditer(text, self._word_end, end)]
            self._word_end = end
        words, best = self._words, None
        while self._next_ngram + NGRAM_WORDS <= len(words):
            i = self._next_ngram
            self._next_ngram += 1
            starts = self._ngrams.setdefault(tuple(w for w, _ in words[i:i + NGRAM_WORDS]), [])
            if starts and i - starts[-1] < NGRAM_WORDS:  # overlapping copies ("a a a a") count once
                continue
            starts.append(i)
            if len(starts) >= 3:
                second = words[starts[1]][1]
                best = second if best is None else min(best, second)
        return best

    def _repeated_unit(self, new: int) -> int | None:
        """End of the first copy of a short unit repeated :data:`UNIT_REPEATS` times back to back.
        Only a run that reaches its count with the new text is new: it ends in the last
        ``new`` characters and is at most 12 x :data:`UNIT_REPEATS` long."""
        since = max(0, len(self.text) - new - 12 * (UNIT_REPEATS + 1)) if new else 0
        match = _UNIT_RUN.search(self.text, since)
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
        self._scanner = _Scanner(repetition)
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
        found = self._scanner.feed(chunk)
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
