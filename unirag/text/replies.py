"""Readers of model replies, one per reply shape, below every module that asks a model.

Every reader accepts whatever a small or reasoning model sends: reasoning
blocks (``<think>``), fences, prose around the payload, replies cut at
``max_tokens``. A reader returns None (or its documented fallback) for a
reply it cannot read; the caller counts that and falls back, never crashes.
"""

from __future__ import annotations

import re

_THINK_TAG = re.compile(r"<\s*(/?)\s*think(?:ing)?\s*>", re.IGNORECASE)


def strip_think(text: str) -> str:
    """Remove ``<think>`` blocks; keep the reasoning only if the answer is inside it.

    A ``</think>`` with no opening tag (the template opened it) drops everything
    before it; an opening tag never closed (cut by ``max_tokens``) is removed and
    the rest parsed anyway, since the answer may follow the reasoning.
    """
    outside: list[str] = []
    inside: list[str] = []
    pos = 0
    open_at: int | None = None
    for match in _THINK_TAG.finditer(text):
        if match.group(1):  # closing tag
            if open_at is None:
                outside.clear()
                inside.append(text[pos : match.start()])
            else:
                inside.append(text[open_at : match.start()])
                open_at = None
            pos = match.end()
        elif open_at is None:
            outside.append(text[pos : match.start()])
            open_at = match.end()
    if open_at is not None:
        outside.append(text[open_at:])
    else:
        outside.append(text[pos:])
    body = "".join(outside)
    if not body.strip() and inside:
        return "\n".join(inside)
    return body
