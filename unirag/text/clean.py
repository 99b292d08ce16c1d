"""Text that UTF-8 cannot encode, made storable at the corpus boundary.

Why: JSON allows an escaped lone surrogate (``"\\ud800"``), common in scraped data, and
Python decodes it to a code point that UTF-8 cannot encode. A document holding one
cannot be hashed into its id, stored in SQLite, printed or sent to a model, so one bad
record used to fail a whole index run. Every document is cleaned where it enters the
corpus (the loaders, and documents handed over in memory): each such code point
becomes U+FFFD, the Unicode replacement character, and the count is reported once.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from unirag.text.types import Document

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def replace_unencodable(text: str) -> tuple[str, int]:
    """``text`` with each lone surrogate replaced by U+FFFD, and how many were.

    A valid pair of surrogate halves (an emoji escaped as two) is joined into its
    character, not replaced. The search costs no copy of a clean text, so a large
    document without the problem is returned as it is.
    """
    if _SURROGATE.search(text) is None:
        return text, 0
    joined = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return joined, joined.count(REPLACEMENT) - text.count(REPLACEMENT)


def clean_document(doc: Document) -> tuple[Document, int]:
    """``doc`` with its title, text and string meta values made encodable, and the count
    of code points replaced (the document itself when there were none)."""
    title, in_title = replace_unencodable(doc.title)
    text, in_text = replace_unencodable(doc.text)
    meta: dict[str, Any] = {}
    in_meta = 0
    for key, value in doc.meta.items():
        if isinstance(value, str):
            value, n = replace_unencodable(value)
            in_meta += n
        meta[key] = value
    found = in_title + in_text + in_meta
    if not found:
        return doc, 0
    return replace(doc, title=title, text=text, meta=meta), found


@dataclass
class ReplacedCharacters:
    """Counts of replaced code points per source over one run, said in one line at its end
    (a scraped dump may hold thousands: one warning per document would drown the rest)."""

    by_source: Counter[str] = field(default_factory=Counter)

    def clean(self, doc: Document, source: str | None = None) -> Document:
        """``doc`` made encodable, counting what was replaced under ``source`` (its own by default)."""
        cleaned, found = clean_document(doc)
        if found:
            self.by_source[source if source is not None else (doc.source or "(given documents)")] += found
        return cleaned

    def summary(self) -> str | None:
        """The one warning line for the run, or None when nothing was replaced."""
        if not self.by_source:
            return None
        total = sum(self.by_source.values())
        shown = [f"{source} ({n})" for source, n in self.by_source.most_common(3)]
        if len(self.by_source) > 3:
            shown.append(f"and {len(self.by_source) - 3} more files")
        return (f"replaced {total} invalid character{'s' * (total != 1)} (lone surrogates, which UTF-8 "
                f"cannot store) with U+FFFD in {', '.join(shown)}")
