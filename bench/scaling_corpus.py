"""A corpus of N passages for the scaling benchmark, real ones first, then synthetic ones.

Why synthetic passages at all: the 2Wiki corpus has 6,119 passages, and the question
is how each index stage behaves at 10x that. Repeating passages would not do: ingest
drops duplicates by content id, and even with a changed id the graph would only gain
the same entities again, so merge, Leiden and every hierarchy would see the 6k graph.

How a synthetic passage is made (deterministic, no randomness beyond seeded
permutations): generation g = 1, 2, ... walks the real passages in a permutation
seeded by g. Passage j of generation g is the sentences of real passage A = perm[j]
except its last one, then the first sentence of the next one, B = perm[j + 1] (so
entities of two unrelated passages co-occur and the generation's graph is wired
differently from the real one). Every capitalised word whose lower-case form never
occurs in the real corpus (a name: "Teutberga", "Lotharingia", not "The" or "She") gets
the generation's suffix ("Teutbergaar", "Lotharingiaar" in generation 1, "...en" in 2),
title included, so each generation brings its own entities and the graph grows about
linearly with N instead of repeating. Sentence length, passage length and the number
of names per passage stay those of the real corpus.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
NAME_WORD = re.compile(r"\b[A-Z][a-z]+\b")
LOWER_WORD = re.compile(r"\b[a-z]+\b")
SUFFIXES = ("ar", "en", "ov", "is", "um", "et", "ia", "os", "an", "ir", "ul", "ek")


def generation_suffix(generation: int) -> str:
    """A short syllable (two for generations past the list) that keeps a name a name."""
    first, rest = divmod(generation - 1, len(SUFFIXES))
    return SUFFIXES[rest] if first == 0 else SUFFIXES[(first - 1) % len(SUFFIXES)] + SUFFIXES[rest]


def _sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text.strip()) if s]


def _renamer(common_words: set[str], suffix: str) -> Callable[[str], str]:
    def rename(text: str) -> str:
        return NAME_WORD.sub(lambda m: m.group(0) if m.group(0).lower() in common_words else m.group(0) + suffix,
                             text)

    return rename


def synthetic_passage(a: dict[str, str], b: dict[str, str], rename: Callable[[str], str]) -> dict[str, str]:
    """A's sentences but its last, then B's first, names renamed (see the module docstring)."""
    own = _sentences(a["text"])
    borrowed = _sentences(b["text"])[:1]
    kept = own[:-1] if len(own) > 1 else own
    return {"title": rename(a["title"]), "text": rename(" ".join(kept + borrowed))}


def build_corpus(real: list[dict[str, str]], n: int) -> list[dict[str, str]]:
    """The first ``n`` real passages, or all of them and ``n - len(real)`` synthetic ones."""
    if n <= len(real):
        return real[:n]
    common = {w for p in real for w in LOWER_WORD.findall(p["text"])}
    out = list(real)
    generation = 0
    while len(out) < n:
        generation += 1
        order = np.random.default_rng(generation).permutation(len(real))
        rename = _renamer(common, generation_suffix(generation))
        for j in range(min(len(real), n - len(out))):
            out.append(synthetic_passage(real[order[j]], real[order[(j + 1) % len(real)]], rename))
    return out
