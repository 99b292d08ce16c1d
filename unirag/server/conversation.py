"""A chat request's messages as a question and its history, for both chat APIs.

The OpenAI-compatible and Ollama-compatible routes get the same list of
``{"role", "content"}`` messages: the last user message is the question and the
messages before it are the history :meth:`unirag.api.UniRAG.aquery` makes the
question self-contained with (:mod:`unirag.generate.standalone`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from unirag.generate.standalone import message_text
from unirag.server.errors import ApiError


def question_and_history(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(the last user message's text, the messages before it). Refused (400) when the last
    user message is missing or empty, or a message after it is not the assistant's reply
    to it (a conversation ends with the question the client wants answered)."""
    for position in range(len(messages) - 1, -1, -1):
        if messages[position].get("role") != "user":
            continue
        text = message_text(messages[position].get("content"))
        if text:
            return text, [dict(message) for message in messages[:position]]
        break
    raise ApiError(400, "no question: the last user message is missing or empty")
