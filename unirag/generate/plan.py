"""The last model call of a generation, prepared but not yet sent.

Why generation is split this way: every mode ends in one call whose reply is
the answer (direct generation's only call, map-reduce's reduce, adaptive
filtering's merge). Everything before it (packing, the map or filter calls)
is the same whoever asks; the last call is where callers differ: a plain
query completes it, a streamed one hands its text over as it is generated, an
async one awaits it on an event loop. So a mode returns an :class:`AnswerPlan`
and the caller makes the call its own way, then :meth:`AnswerPlan.finish`
reads the answer out of the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from unirag.llm.base import ChatModel, ChatRequest

_ANSWER_LINE = re.compile(r"^\s*(?:final\s+)?answer\s*[:：]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def extract_answer(text: str) -> str:
    """The text after the last "Answer:" line when there is one, else all of it."""
    matches = _ANSWER_LINE.findall(text)
    return matches[-1].strip() if matches else text.strip()


@dataclass(frozen=True)
class AnswerPlan:
    """``request`` is the final call; ``None`` when the answer needs no call (``fixed_answer``,
    e.g. the no-data answer when no point survived a map step)."""

    request: ChatRequest | None
    fixed_answer: str = ""

    def finish(self, raw: str) -> tuple[str, str]:
        """(answer, raw model output) from the final reply's text."""
        if self.request is None:
            return self.fixed_answer, ""
        return extract_answer(raw), raw

    def complete(self, chat: ChatModel) -> tuple[str, str]:
        """Make the final call in one piece (no streaming) and read the answer."""
        if self.request is None:
            return self.finish("")
        return self.finish(chat.complete(self.request).text)
