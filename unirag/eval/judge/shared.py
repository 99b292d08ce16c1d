"""What every judge task shares: stable keys, JSONL rows, token clipping, the chat check.

Judging is resumable: the eval runner appends every finished judgment to a
JSONL file and, on a rerun, skips the requests whose key is already there.
A key names what was asked (question, methods, order, replicate), not what
was answered, so it is known before the call; the response cache then makes
a rerun of an unfinished request free as well.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from unirag.errors import ConfigError
from unirag.eval.jsonl import end_cut_line
from unirag.generate.direct import MARGIN
from unirag.llm.base import ChatModel
from unirag.text.tokenizer import Tokenizer

#: Marks an answer cut to the judge's token budget (both answers of a pair are cut alike).
CLIP_MARK = " [...]"
#: Fewer tokens than this per answer cannot be judged meaningfully.
MIN_ANSWER_TOKENS = 32


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


K = TypeVar("K", bound=Keyed)


def make_key(kind: str, *parts: object) -> str:
    """A readable, unambiguous key: the compact JSON list ``[kind, *parts]``."""
    return json.dumps([kind, *parts], ensure_ascii=False, separators=(",", ":"))


def pending(requests: Sequence[K], done: Collection[str]) -> list[K]:
    """The requests whose key is not in ``done``, in their order."""
    return [r for r in requests if r.key not in done]


def require_chat(chat: ChatModel | None, what: str) -> ChatModel:
    """The chat model, or a one-line error: judging without a model would record only blanks."""
    if chat is None:
        raise ConfigError(f"{what} needs a chat model; configure chat (the embedded one works offline)")
    return chat


def clip(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """``text`` cut to ``max_tokens`` tokens, marked when cut so the judge knows it was."""
    cut = tokenizer.truncate(text, max_tokens)
    return cut if cut == text else cut.rstrip() + CLIP_MARK


def answer_budget(overhead: int, n_answers: int, window: int, reply_tokens: int, requested: int) -> int:
    """Tokens per answer: ``requested``, capped so that the prompt (``overhead`` tokens without
    the answers), ``n_answers`` answers and the reply fit in the context ``window``."""
    room = (window - reply_tokens - overhead - MARGIN) // max(1, n_answers)
    if room < MIN_ANSWER_TOKENS:
        raise ConfigError(
            f"the judge prompt leaves {room} tokens per answer in a {window}-token context window; "
            "raise chat.context_window or lower the judge's reply tokens"
        )
    return min(requested, room)


# -- rows --------------------------------------------------------------------------------------


def to_row(record: Any) -> dict[str, Any]:
    """A judge record as a JSON-ready dict: ``kind`` and ``key`` first, then its fields."""
    if not is_dataclass(record) or isinstance(record, type):
        raise TypeError(f"not a judge record: {record!r}")
    return {"kind": record.kind, "key": record.key, **asdict(record)}


def row_fields(cls: type, row: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``row`` that are fields of ``cls`` (``kind``, ``key`` and unknown ones dropped)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in row.items() if k in names}


def append_rows(path: Path, records: Iterable[Any]) -> int:
    """Append records as JSONL rows (one write and flush per call); how many were written."""
    lines = [json.dumps(to_row(r), ensure_ascii=False) + "\n" for r in records]
    if lines:
        path.parent.mkdir(parents=True, exist_ok=True)
        end_cut_line(path)
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(lines))
            handle.flush()
    return len(lines)


def done_keys(rows: Iterable[dict[str, Any] | Keyed], kind: str | None = None) -> set[str]:
    """Keys of finished judgments (rows or records), optionally of one ``kind`` only."""
    out: set[str] = set()
    for row in rows:
        if isinstance(row, dict):
            if kind is None or row.get("kind") == kind:
                key = row.get("key")
                if isinstance(key, str):
                    out.add(key)
        elif kind is None or getattr(row, "kind", None) == kind:
            out.add(row.key)
    return out
