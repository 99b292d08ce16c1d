"""Sentence helpers for extractive text (fallback and zero-LLM summaries)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unirag.text.tokenizer import Tokenizer

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LINE_OR_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_LABEL_WORDS = 16  # ``Label: text`` with a label this short: the label is a segment of its own
# A file name standing alone (``apollo.html``): what a loader leaves as a title or an extractor
# as an entity when a document has no title of its own; never prose.
_FILE_NAME = re.compile(r"(?<!\S)[\w~-][\w.~-]*\.(?:html?|xhtml|pdf|txt|md|markdown|rst|docx?|csv|tsv|jsonl?|xml)"
                        r"(?=[\s,;:)]|$)", re.IGNORECASE)
_TITLE_WORDS = 16  # a first line this short, with no sentence end, is a title line


def sentences_of(text: str) -> list[str]:
    """A text's lines and sentences, each stripped: a regex split (a sentence ends at ``.!?``
    and whitespace; a line break ends one too). LinearRAG's sentence nodes and the segments of
    :func:`text_segments` use it, so the same sentence is the same string for both."""
    return [part.strip() for part in _LINE_OR_SENTENCE_END.split(text) if part and part.strip()]


def text_segments(text: str) -> list[str]:
    """What a sentence-mean vector is made of: each line's sentences, a sentence's short leading
    ``Label:`` (an entity's or a relationship's name, a summary's member) apart, and the parts of
    a ``;``-separated list (a community's member names) apart.

    Splitting labels and lists off is what lets the parts be shared: ``Bob: Bob met Cy.`` and
    ``Bob met Cy: Bob met Cy.`` both cite the sentence ``Bob met Cy.``, ``Bob`` is the entity's
    name, which its name vector embedded already, and ``Ada; Bob`` names two of them."""
    segments: list[str] = []
    for sentence in sentences_of(text):
        for part in sentence.split("; "):
            label, colon, rest = part.partition(": ")
            if colon and label.strip() and len(label.split()) <= _LABEL_WORDS:
                segments.append(label.strip())
                part = rest
            if part.strip():
                segments.append(part.strip())
    return segments


def first_sentence(text: str) -> str:
    """The text up to its first sentence end (all of it when there is none)."""
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def _lead_sentence(text: str) -> str:
    """A member's lead sentence, whole, without what would repeat or litter a summary: a title
    line (the body names its subject again: ``Apollo 11\\nApollo 11 was ...``), a ``Name:``
    label the description repeats (``Apollo 11: Apollo 11 was ...``), file names."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if len(lines) > 1 and len(lines[0].split()) <= _TITLE_WORDS and not _SENTENCE_END.search(lines[0] + " "):
        lines = lines[1:]
    body = _FILE_NAME.sub(" ", " ".join(" ".join(lines).split()))
    body = " ".join(body.split()).strip(" ,;:")
    return first_sentence(_without_repeated_label(body))


def _without_repeated_label(text: str) -> str:
    """``Label: Label and more`` -> ``Label and more``, as often as it applies (a summary's
    title is its opening words, so ``title: summary`` says them twice)."""
    changed = True
    while changed:
        changed = False
        for match in re.finditer(r": ", text):
            label, rest = text[:match.start()], text[match.end():]
            if label.strip() and rest.casefold().startswith(label.strip().casefold()):
                text, changed = rest, True
                break
    return text


def _words(sentence: str) -> list[str]:
    """The sentence's words, lower-cased; a short ``Name:`` label is left out
    (``Moon: Apollo 11 was ...`` says what ``Apollo 11 was ...`` says)."""
    label, colon, rest = sentence.partition(": ")
    said = rest if colon and len(label.split()) <= 8 else sentence
    return re.findall(r"\w+", said.casefold())


def _grams(words: list[str]) -> list[tuple[str, ...]]:
    """Word 4-grams (the whole sentence as one when it is shorter)."""
    return [tuple(words[i:i + 4]) for i in range(len(words) - 3)] or ([tuple(words)] if words else [])


NOVELTY = 0.5  # a sentence whose 4-grams are mostly said already (before, or twice in itself) adds little


def extractive_summary(texts: Sequence[str], max_tokens: int, tokenizer: Tokenizer) -> str:
    """The members' lead sentences, each once and whole, as many as fit ``max_tokens``.

    A sentence is left out when fewer than half of its word 4-grams are new (said by no
    sentence kept before, nor twice within it), so a community of a passage and its entities
    does not read its subject's opening line three times (the passage's, then each entity
    description's copy of it). Only a first sentence longer than the whole budget is cut."""
    kept: list[str] = []
    said: set[tuple[str, ...]] = set()
    used = 0
    for text in texts:
        sentence = _lead_sentence(text)
        grams = _grams(_words(sentence))
        if not grams:
            continue
        counts = Counter(grams)
        novel = sum(1 for gram in grams if gram not in said and counts[gram] == 1)
        if novel < NOVELTY * len(grams):
            continue
        cost = tokenizer.count(sentence) + (1 if kept else 0)
        if used + cost > max_tokens:
            if not kept:
                kept.append(tokenizer.truncate(sentence, max_tokens))
            break
        said.update(grams)
        kept.append(sentence)
        used += cost
    return " ".join(kept)
