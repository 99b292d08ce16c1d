"""The extraction parser against real SmolLM2-135M replies and hand-made bad ones.

Goldens live in ``tests/golden/extraction/``: ``NAME.txt`` is a reply verbatim,
``NAME.json`` says which chunks its passage labels stand for and what the
parser must make of it. ``smollm2_*`` were captured from the embedded model
(``capture.py``); ``hand_*`` are the shapes small models are known to produce.
The expectations were written by reading the replies, not by running the parser.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from unirag.graph.parse import (
    MAX_NAME_LENGTH,
    ParseResult,
    clean_name,
    parse_extraction,
)
from unirag.graph.types import ChunkExtraction, RelationMention

GOLDEN = Path(__file__).parent / "golden" / "extraction"
GOLDEN_NAMES = sorted(path.stem for path in GOLDEN.glob("*.txt"))


def _reply(name: str) -> str:
    # Bytes, so line endings reach the parser exactly as the model wrote them.
    return (GOLDEN / f"{name}.txt").read_bytes().decode("utf-8")


def _case(name: str) -> dict[str, Any]:
    return json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))


def _counts(data: Counter[str] | dict[str, int]) -> dict[str, int]:
    return {key: value for key, value in data.items() if value}


def _relation(extraction: ChunkExtraction, detail: dict[str, Any]) -> RelationMention:
    matches = [
        relation
        for relation in extraction.relations
        if relation.target == detail["target"] and detail.get("source", relation.source) == relation.source
    ]
    assert len(matches) == 1, f"no single relation for {detail} in {extraction.relations}"
    return matches[0]


def test_golden_set_is_complete() -> None:
    real = [name for name in GOLDEN_NAMES if name.startswith("smollm2_")]
    hand = [name for name in GOLDEN_NAMES if name.startswith("hand_")]
    assert 8 <= len(real) <= 12
    assert len(hand) >= 12
    for name in GOLDEN_NAMES:
        assert _case(name)["expected"], f"{name}.json has no expectation written yet"


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_golden(name: str) -> None:
    case = _case(name)
    expected = case["expected"]
    result = parse_extraction(_reply(name), case["passages"], with_claims=case.get("with_claims", False))

    assert _counts(result.dropped) == expected["dropped"]
    assert set(result.extractions) == set(expected["chunks"])
    for chunk_id, want in expected["chunks"].items():
        got = result.extractions[chunk_id]
        assert got.chunk_id == chunk_id
        assert [entity.name for entity in got.entities] == want["entities"]
        assert [[relation.source, relation.target] for relation in got.relations] == want["relations"]
        assert _counts(got.dropped) == want["dropped"]
        by_name = {entity.name: entity for entity in got.entities}
        for entity_name, entity_type in want.get("types", {}).items():
            assert by_name[entity_name].type == entity_type
        for entity_name, description in want.get("descriptions", {}).items():
            assert by_name[entity_name].description == description
        for detail in want.get("relation_details", []):
            relation = _relation(got, detail)
            for key, value in detail.items():
                assert getattr(relation, key) == value, f"{key} of {relation}"
        if "claims" in want:
            assert len(got.claims) == len(want["claims"])
            for claim, claim_want in zip(got.claims, want["claims"], strict=True):
                for key, value in claim_want.items():
                    assert getattr(claim, key) == value, f"{key} of {claim}"


def test_total_dropped_adds_reply_and_chunk_reasons() -> None:
    case = _case("hand_12")
    result = parse_extraction(_reply("hand_12"), case["passages"])
    result.extractions["chunk-a"].dropped["self_loop"] += 2
    assert result.total_dropped() == Counter({"unknown_passage": 3, "self_loop": 2})
    assert result.dropped == Counter({"unknown_passage": 3})


def test_every_chunk_gets_an_entry_even_when_nothing_is_found() -> None:
    result = parse_extraction("no graph here", {"P1": "c1", "P2": "c2", "P3": "c3"})
    assert list(result.extractions) == ["c1", "c2", "c3"]
    assert all(not extraction.entities for extraction in result.extractions.values())


def test_single_passage_takes_records_with_any_label() -> None:
    reply = '{"entities": [{"passage": "P7", "name": "Warsaw"}, {"name": "Paris"}]}'
    result = parse_extraction(reply, {"P1": "only"})
    assert [entity.name for entity in result.extractions["only"].entities] == ["Warsaw", "Paris"]
    assert not result.total_dropped()


def test_claims_from_tuple_records() -> None:
    reply = '("claim"<|>Fast Forward Games<|>NONE<|>bankruptcy<|>true<|>2001<|>It went out of business.)'
    result = parse_extraction(reply, {"P1": "c"}, with_claims=True)
    (claim,) = result.extractions["c"].claims
    assert (claim.subject, claim.object, claim.status, claim.date) == ("Fast Forward Games", "", "TRUE", "2001")


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ('"Marie Curie"', "Marie Curie"),
        ("**Marie Curie**", "Marie Curie"),
        ("- Marie Curie.", "Marie Curie"),
        ("1. Warsaw,", "Warsaw"),
        ("[Nobel Prize in Physics]", "Nobel Prize in Physics"),
        ("`Demon Dice`", "Demon Dice"),
        ("  Maha   Sona \n", "Maha Sona"),
        ("Queen (band)", "Queen (band)"),
        ("(Queen (band))", "Queen (band)"),
        ("Tim Brown)", "Tim Brown"),
        ("“Demon Dice”:", "Demon Dice"),
        ("U.S.", "U.S."),
        ("iPhone", "iPhone"),
        ("C#", "C#"),
        ("Yahoo!", "Yahoo!"),
        ("", ""),
        ('"  "', ""),
    ],
)
def test_clean_name(raw: str, clean: str) -> None:
    assert clean_name(raw) == clean


def _well_formed(result: ParseResult, chunk_ids: set[str]) -> None:
    """What any parse must satisfy whatever the reply was."""
    assert set(result.extractions) == chunk_ids
    for extraction in result.extractions.values():
        names = {entity.name.lower() for entity in extraction.entities}
        assert len(names) == len(extraction.entities)
        for entity in extraction.entities:
            assert entity.name and len(entity.name) <= MAX_NAME_LENGTH
        for relation in extraction.relations:
            assert relation.source.lower() in names and relation.target.lower() in names
            assert relation.source.lower() != relation.target.lower()
            assert 1.0 <= relation.strength <= 10.0
    assert all(value > 0 for value in result.total_dropped().values())


_GARBAGE_ALPHABET = '{}[]()"\':,<|>#\n\t\\ ;-*`' + "abcdePQ1239" + "entity" * 2


def _garbage_cases(rng: random.Random) -> list[tuple[str, dict[str, str]]]:
    valid = [name for name in GOLDEN_NAMES if name.startswith("hand_")] + ["smollm2_03", "smollm2_05"]
    cases: list[tuple[str, dict[str, str]]] = []
    for index in range(200):
        name = rng.choice(valid)
        reply, passages = _reply(name), _case(name)["passages"]
        kind = index % 4
        if kind == 0:  # cut anywhere, as max_tokens does
            text = reply[: rng.randrange(len(reply) + 1)]
        elif kind == 1:  # random garbage
            text = "".join(rng.choice(_GARBAGE_ALPHABET) for _ in range(rng.randrange(300)))
        elif kind == 2:  # a valid reply with characters flipped
            chars = list(reply)
            for _ in range(rng.randrange(1, 12)):
                if chars:
                    chars[rng.randrange(len(chars))] = rng.choice(_GARBAGE_ALPHABET)
            text = "".join(chars)
        else:  # two replies spliced at random points
            other = _reply(rng.choice(valid))
            text = reply[: rng.randrange(len(reply) + 1)] + other[rng.randrange(len(other) + 1) :]
        cases.append((text, passages))
    return cases


def test_never_raises_on_garbage_or_truncation() -> None:
    rng = random.Random(20240611)
    for text, passages in _garbage_cases(rng):
        result = parse_extraction(text, passages, with_claims=rng.random() < 0.5)
        _well_formed(result, set(passages.values()))


@pytest.mark.parametrize("name", ["hand_01", "hand_06", "hand_08", "hand_09", "hand_17"])
def test_truncation_never_invents_names(name: str) -> None:
    """Every prefix of a reply (max_tokens can stop anywhere) yields only names the whole reply has.

    A record cut inside its name must be dropped, not kept with half a name.
    Every second cut point keeps the test fast and still lands inside every name.
    """
    reply, passages = _reply(name), _case(name)["passages"]

    def names(text: str) -> set[str]:
        result = parse_extraction(text, passages)
        return {entity.name for extraction in result.extractions.values() for entity in extraction.entities}

    full = names(reply)
    for cut in range(0, len(reply) + 1, 2):
        assert names(reply[:cut]) <= full, reply[:cut]


def test_stays_fast_on_pathological_replies() -> None:
    replies = [
        "[" * 20_000,
        "{" * 20_000,
        "[P1] " * 4_000,
        'word [ "more" { te:xt ' * 2_000,
        "<think>" * 10_000,
        '{"entities": [' + ",".join(f'{{"name": "E{i}"}}' for i in range(2_000)) + "]}",
    ]
    start = time.perf_counter()
    for reply in replies:
        _well_formed(parse_extraction(reply, {"P1": "c"}), {"c"})
    assert time.perf_counter() - start < 2.0
