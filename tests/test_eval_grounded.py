"""Grounded evidence recall (issue 33): a gold passage counts only if its text is in the context."""

from __future__ import annotations

import pytest

from unirag.eval.metrics import (
    context_index,
    grounded_recall,
    passage_grounded,
    passage_sentences,
    sentence_coverage,
)

CURIE = ("Marie Curie was a physicist and chemist who conducted pioneering research on radioactivity. "
         "She was the first woman to win a Nobel Prize. "
         "She was born in Warsaw, then part of the Russian Empire. "
         "Her husband Pierre Curie shared her first prize.")
WARSAW = "Warsaw is the capital and largest city of Poland. It stands on the River Vistula in east-central Poland."
OTHER = "Lyon is the third largest city of France and sits where the Rhone meets the Saone."


def test_passage_fully_in_context_is_grounded() -> None:
    context = f"{OTHER}\n{CURIE}\n{WARSAW}"
    assert grounded_recall(context, [CURIE, WARSAW]) == 1.0


def test_case_whitespace_and_punctuation_do_not_matter() -> None:
    altered = CURIE.upper().replace(" ", "  \n").replace(",", "")
    assert passage_grounded(CURIE, altered)


def test_only_the_title_via_an_entity_item_is_not_grounded() -> None:
    """An entity extracted from the passage brings its name and a description, not the passage."""
    entity = "Marie Curie: Polish-French physicist, pioneer of radioactivity research, Nobel laureate."
    assert grounded_recall(entity, [CURIE]) == 0.0
    assert grounded_recall("Marie Curie", [CURIE]) == 0.0


def test_half_of_the_sentences_grounds_a_passage_fewer_do_not() -> None:
    sentences = passage_sentences(CURIE)
    assert len(sentences) == 4
    halves = CURIE.split(". ")
    assert passage_grounded(CURIE, f"{OTHER} {halves[0]}. {halves[2]}.")  # 2 of 4: at least half
    assert not passage_grounded(CURIE, f"{OTHER} {halves[1]}.")  # 1 of 4


def test_a_sentence_split_across_chunk_boundaries_still_counts() -> None:
    """A chunker cut the passage mid-sentence; both chunks are in the context, apart and in
    the other order: the cut sentence's halves are still found."""
    cut = CURIE.index("the first woman")
    first, second = CURIE[:cut], CURIE[cut:]
    context = f"{second}\n{OTHER}\n{first}"
    assert CURIE not in context
    assert grounded_recall(context, [CURIE]) == 1.0
    # only the first chunk: the first sentence whole and a fragment of the second, 1.3 of 4
    assert grounded_recall(first, [CURIE]) == 0.0


def test_a_paraphrase_is_not_present_a_seam_fragment_of_a_long_sentence_may_be_missing() -> None:
    sentence = passage_sentences(WARSAW)[0]
    paraphrase = "Poland's capital, Warsaw, is also its largest city."
    assert sentence_coverage(sentence, *context_index(paraphrase)) < 0.8
    long = passage_sentences(CURIE)[0]  # 13 words; its last 2 fell into a chunk not in the context
    assert sentence_coverage(long, *context_index(" ".join(long[:-2]))) == pytest.approx(11 / 13)
    assert sentence_coverage(long, *context_index(" ".join(long[:-3]))) < 0.8


def test_short_sentences_are_ignored_and_a_stub_passage_is_one_unit() -> None:
    passage = "Born 1867. Marie Curie was a physicist and chemist from Warsaw. Died 1934."
    assert len(passage_sentences(passage)) == 1  # the two 2-word sentences do not count
    assert passage_grounded(passage, "Marie Curie was a physicist and chemist from Warsaw.")
    assert passage_sentences("Warsaw.") == [["warsaw"]]
    assert passage_grounded("Warsaw.", "the city of warsaw")
    assert not passage_grounded("Warsaw.", "the city of Paris")


@pytest.mark.parametrize("gold", [[], [""], ["   "]])
def test_no_gold_text_is_none_not_zero(gold: list[str]) -> None:
    assert grounded_recall("anything at all here", gold) is None


def test_duplicate_gold_passages_count_once_and_empty_context_scores_zero() -> None:
    assert grounded_recall(CURIE, [CURIE, CURIE, WARSAW]) == 0.5
    assert grounded_recall("", [CURIE]) == 0.0
