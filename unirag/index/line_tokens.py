"""Token counts of context lines, kept across builds by the digest of each line.

GraphRAG fits every report's context to a token limit, so it counts the
tokens of each entity and relationship line it may quote. A parent community
with sub-communities needs the counts of all its members' lines, and on an
update the parents of what changed span most of the graph: counting their
lines again costs as much as in the full build (about 20 us a line; 143,000
lines on 2Wiki). A line's count is a function of its text and the tokenizer
alone, so an update looks it up by the line's 64-bit digest and counts only
lines it has not seen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from unirag.workspace import atomic_path


def _digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class LineTokens:
    """Token counts by line digest for one tokenizer; :meth:`counter` counts only unseen lines."""

    def __init__(self, tokenizer: str, known: dict[int, int] | None = None) -> None:
        self.tokenizer = tokenizer
        self.known: dict[int, int] = dict(known or {})

    def counter(self, count_tokens: Callable[[str], int]) -> Callable[[str], int]:
        """``count_tokens`` answered from the kept counts where the line was counted before."""
        known = self.known

        def count(text: str) -> int:
            key = _digest(text)
            value = known.get(key)
            if value is None:
                value = known[key] = count_tokens(text)
            return value

        return count


def save_line_tokens(path: Path, memo: LineTokens) -> None:
    """Write the counts (one file, atomically)."""
    digests = np.fromiter(memo.known.keys(), dtype=np.uint64, count=len(memo.known))
    counts = np.fromiter(memo.known.values(), dtype=np.int64, count=len(memo.known))
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, tokenizer=np.array(memo.tokenizer), digests=digests, counts=counts)


def load_line_tokens(path: Path, tokenizer: str) -> LineTokens:
    """The kept counts of ``tokenizer``; none when the file is missing, unreadable or another tokenizer's."""
    try:
        with np.load(path) as data:
            stored, digests, counts = str(data["tokenizer"]), data["digests"], data["counts"]
    except (OSError, ValueError, KeyError):
        return LineTokens(tokenizer)
    if stored != tokenizer or len(digests) != len(counts):
        return LineTokens(tokenizer)
    return LineTokens(tokenizer, dict(zip(digests.tolist(), counts.tolist())))
