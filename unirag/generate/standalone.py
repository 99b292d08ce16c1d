"""A multi-turn chat's last question made self-contained, before retrieval reads it.

Why: retrieval embeds and matches one question; "And where does it live?" finds
nothing about the animal the previous turn named. The rule (docs/chat-clients.md):

* no earlier turns: the question as asked (``rule = "none"``);
* a real chat endpoint configured (``chat.resolved_provider == "openai"``, see
  :func:`unirag.operators.question.real_chat`): the ``standalone_question`` prompt
  rewrites the question with the last :data:`HISTORY_MESSAGES` messages, charged to
  the query's ledger under the stage ``query.rewrite`` (``rule = "llm"``); an empty
  reply keeps the question as asked;
* otherwise (the embedded offline model, which cannot do this reliably): a
  deterministic fallback. A question is *referential* when it has at most
  :data:`SHORT_WORDS` words or holds one of :data:`REFERRING_WORDS`; a referential
  question gets the last :data:`FALLBACK_QUESTIONS` earlier user questions (each cut
  to :data:`FALLBACK_CHARS` characters) put before it, oldest first, separated by a
  space (``rule = "previous"``); any other question stays as asked (``rule = "as_asked"``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from unirag.operators.context import QueryState
from unirag.operators.question import real_chat

#: Earlier messages (user and assistant) the rewrite prompt sees, the latest ones.
HISTORY_MESSAGES = 6
#: Characters of each earlier message the rewrite prompt sees (long answers are cut).
MESSAGE_CHARS = 600
#: Tokens the rewritten question may take.
REWRITE_TOKENS = 120
#: Offline fallback: a question of at most this many words is referential.
SHORT_WORDS = 3
#: Offline fallback: earlier user questions put before a referential one.
FALLBACK_QUESTIONS = 2
#: Offline fallback: characters kept of each earlier question.
FALLBACK_CHARS = 300
#: Offline fallback: words that point back into the conversation.
REFERRING_WORDS = frozenset({
    "it", "its", "it's", "itself", "they", "them", "their", "theirs", "themselves", "he", "him", "his",
    "she", "her", "hers", "this", "that", "these", "those", "there", "then", "former", "latter", "same",
    "one", "ones", "else", "also", "too", "instead",
})
_WORD = re.compile(r"[\w']+", re.UNICODE)


def message_text(content: Any) -> str:
    """A chat message's text: a string, or the text parts of a multi-part content, joined."""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, Sequence):
        return " ".join(str(part.get("text", "")) for part in content
                        if isinstance(part, Mapping) and part.get("type") == "text").strip()
    return ""


def turns(history: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of the earlier user and assistant messages that have text (system
    messages and tool calls say nothing about what the user asked)."""
    return [(str(message.get("role")), text) for message in history
            if message.get("role") in ("user", "assistant") and (text := message_text(message.get("content")))]


def is_referential(question: str) -> bool:
    """Whether a question leans on the conversation (the offline fallback's test)."""
    words = [word.lower() for word in _WORD.findall(question)]
    return len(words) <= SHORT_WORDS or any(word in REFERRING_WORDS for word in words)


def fallback_question(question: str, earlier: list[tuple[str, str]]) -> tuple[str, str]:
    """(question, rule) by the offline rule (module docstring)."""
    previous = [text[:FALLBACK_CHARS] for role, text in earlier if role == "user"][-FALLBACK_QUESTIONS:]
    if not previous or not is_referential(question):
        return question, "as_asked"
    return " ".join([*previous, question]), "previous"


def _one_line(reply: str) -> str:
    """The rewritten question out of a reply: its first non-empty line, quotes and a
    ``Question:`` label taken off."""
    line = next((line.strip() for line in reply.splitlines() if line.strip()), "")
    line = re.sub(r"^(?:rewritten|standalone)?\s*question\s*:\s*", "", line, flags=re.IGNORECASE)
    return line.strip().strip('"“”').strip()


def standalone_question(state: QueryState, history: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """(the question retrieval should read, the rule that made it) for ``state.question``
    after the earlier ``history`` messages (rules in the module docstring)."""
    earlier = turns(history)
    question = state.question
    if not earlier:
        return question, "none"
    if not real_chat(state.resources.settings):
        return fallback_question(question, earlier)
    shown = "\n".join(f"{role.capitalize()}: {' '.join(text[:MESSAGE_CHARS].split())}"
                      for role, text in earlier[-HISTORY_MESSAGES:])
    request = state.request(state.prompt("standalone_question"), "query.rewrite", max_tokens=REWRITE_TOKENS,
                            history=shown, question=question)
    rewritten = _one_line(state.models.chat.complete(request).text)
    return (rewritten, "llm") if rewritten else (question, "as_asked")
