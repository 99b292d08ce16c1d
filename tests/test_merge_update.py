"""An insert extends the merged graph (unirag.graph.merge_update) instead of merging every
extraction again: the result must be the whole merge's, row for row and in the same order
(descriptions shortened alike, chunk links alike); a delete merges whole and must too."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes import ScriptedChat, fake_stack, make_settings
from unirag.graph.graph_store import GraphStore
from unirag.graph.merge import Accumulators, MergedGraph, long_descriptions, shorten_items
from unirag.graph.merge_update import STATE_VERSION, extend_graph, merge_states, plan_merge
from unirag.graph.projections import new_chunk_links, shared_entity_links
from unirag.graph.types import ChunkExtraction, EntityMention, RelationMention
from unirag.llm.base import ChatModel
from unirag.pipeline import run_delete, run_index
from unirag.workspace import Workspace

CORPUS = Path(__file__).parent / "data" / "datasets" / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
ARTIFACTS = ["graph", "chunk_links:pg", "chunk_links:hybrid"]


# -- the merge itself, on extractions made to hit every case ----------------------------


def _extractions(count: int) -> list[ChunkExtraction]:
    """Chunks mentioning a few shared names under varying spellings, types and long
    descriptions, so votes flip, names change and descriptions get shortened."""
    spellings = ["Marie Curie", "marie curie", "MARIE CURIE", "Marie  Curie!"]
    out = []
    for i in range(count):
        entities = [EntityMention(spellings[i % len(spellings)], ["person", "scientist"][i % 3 == 0],
                                  f"fact {i} about her work " * (1 + i % 4)),
                    EntityMention(f"Place {i % 5}", "location", "" if i % 2 else f"place note {i % 3}"),
                    EntityMention(f"Only {i}", "", f"single {i}")]
        relations = [RelationMention(spellings[(i + 1) % 4], f"Place {i % 5}", ["lived in", "worked in"][i % 2],
                                     f"relation {i % 6} " * (1 + i % 3), [f"kw{i % 4}", "Shared"], 1 + (i * 7) % 10),
                     RelationMention(f"Place {i % 5}", f"Endpoint {i % 7}", "near", f"near {i}", [], 2.5),
                     RelationMention("Same", "same", "self", "dropped", [], 1)]
        out.append(ChunkExtraction(f"c{i:03d}", entities, relations))
    return out


def _shorten(chat: ChatModel | None) -> Callable[[MergedGraph, Any], set[str]]:
    count = lambda text: len(text.split())
    cut = lambda text, n: " ".join(text.split()[:n])

    def shorten(graph: MergedGraph, ids: Any = None) -> set[str]:
        items = long_descriptions(graph, 12, count, ids)
        shorten_items(items, 12, cut, chat, concurrency=1)
        return {item.id for _, item in items}

    return shorten


def _merged(extractions: list[ChunkExtraction], shorten: Callable[..., set[str]]
            ) -> tuple[MergedGraph, set[str], dict[str, str]]:
    accumulators = Accumulators()
    for extraction in extractions:
        accumulators.add(extraction)
    graph = accumulators.graph()
    shortened = shorten(graph)
    return graph, shortened, dict(merge_states(accumulators, shortened))


def _same(a: MergedGraph, b: MergedGraph) -> None:
    assert list(a.entities) == list(b.entities)
    assert list(a.relationships) == list(b.relationships)
    assert a == b


def test_extending_equals_merging_whole_in_steps_with_cuts_and_summaries() -> None:
    extractions = _extractions(40)
    # the summary names its subject: a renamed end must be summarised again, as a whole merge does
    chat = ScriptedChat(answers={"summarize_descriptions": lambda user: f"summary: {user.splitlines()[0]}"})
    for shorten in (_shorten(None), _shorten(chat)):
        graph, shortened, stored = _merged(extractions[:20], shorten)
        total = len(shortened)
        for start, end in ((20, 21), (21, 30), (30, 40)):
            states = lambda ids: {key: json.loads(stored[key]) for key in ids if key in stored}
            extension = extend_graph(graph, extractions[start:end], states)
            assert extension is not None
            now = shorten(graph, extension.touched())
            stored.update(extension.states(now))
            total += len(now) - extension.was_shortened
            whole, whole_shortened, whole_states = _merged(extractions[:end], shorten)
            _same(graph, whole)
            assert total == len(whole_shortened)
            assert stored == whole_states


def test_extending_without_a_state_gives_up() -> None:
    extractions = _extractions(6)
    graph, _, _ = _merged(extractions[:4], _shorten(None))
    assert extend_graph(graph, extractions[4:], lambda ids: {}) is None


def test_new_chunk_links_are_the_whole_product_restricted_to_new_chunks() -> None:
    extractions = _extractions(30)
    graph, _, _ = _merged(extractions, _shorten(None))
    ids = [extraction.chunk_id for extraction in extractions]
    added = ids[24:]
    for minimum in (1, 2, 3):
        whole = shared_entity_links(graph, ids, minimum)
        touching = sorted(link for link in whole if link[0] in added or link[1] in added)
        assert sorted(new_chunk_links(graph, ids, added, minimum)) == touching


# -- through run_index and run_delete on real passages ---------------------------------------


def _index(ws: Workspace, passages: list[dict[str, str]], tmp: Path, name: str) -> None:
    source = tmp / f"{name}.json"
    source.write_text(json.dumps(passages), encoding="utf-8")
    settings = _settings(ws)
    run_index(ws, [source], settings, fake_stack(settings, ws), graphs=[], artifacts=ARTIFACTS)


def _settings(ws: Workspace) -> Any:
    return make_settings(ws.root, graph__extractor="nlp", graph__description_max_tokens=8, concurrency=1)


def _state(ws: Workspace) -> dict[str, Any]:
    store = GraphStore(ws)
    manifest = ws.manifest.entries()
    return {
        "graph": store.load_graph(),
        "merge_state": sorted(store.db.execute("SELECT id, state FROM merge_state")),
        "links": {kind: store.load_chunk_links(kind) for kind in ("pg", "hybrid")},
        "counts": {key: manifest["graph"][key] for key in ("entities", "relationships", "claims",
                                                           "descriptions_shortened", "inputs")},
        "link_counts": {kind: manifest[f"chunk_links:{kind}"]["count"] for kind in ("pg", "hybrid")},
    }


def test_insert_extends_and_delete_merges_whole_equal_to_building_from_scratch(tmp_path: Path) -> None:
    passages = json.loads(CORPUS.read_text(encoding="utf-8"))
    base, more, rest = passages[:28], passages[28:34], passages[34:]
    grown = Workspace.init(tmp_path / "grown")
    try:
        _index(grown, base, tmp_path, "base")
        _index(grown, more, tmp_path, "more")
        assert grown.manifest.entry("graph")["update"]["mode"] == "extend"
        assert grown.manifest.entry("chunk_links:pg")["update"]["mode"] == "extend"
        _index(grown, rest, tmp_path, "rest")
        assert grown.manifest.entry("graph")["update"]["mode"] == "extend"
        assert grown.manifest.entry("graph")["descriptions_shortened"] > 0
        after_insert = _state(grown)
        settings = _settings(grown)
        run_delete(grown, [str(tmp_path / "rest.json")], settings, fake_stack(settings, grown))
        assert grown.manifest.entry("graph")["update"]["mode"] == "full"
        after_delete = _state(grown)
    finally:
        grown.close()
    for name, records in (("whole", passages), ("first", base + more)):
        ws = Workspace.init(tmp_path / name)
        try:
            _index(ws, records, tmp_path, name)
            expected = _state(ws)
        finally:
            ws.close()
        got = after_insert if name == "whole" else after_delete
        _same(got.pop("graph"), expected.pop("graph"))
        assert got == expected


def test_plan_extends_only_a_stateful_merge_of_a_prefix_of_the_chunks() -> None:
    fingerprint = lambda ids: "|".join(ids)
    config = {"extractor": "nlp", "max_tokens": 8}
    entry = {"state": STATE_VERSION, "chunks": 2, "config": config, "inputs": "a|b"}
    assert plan_merge(None, config, ["a"], [], fingerprint).reason == "no merged graph"
    assert plan_merge({**entry, "state": None}, config, ["a", "b"], [], fingerprint).reason == "no merge state"
    assert plan_merge(entry, {**config, "max_tokens": 9}, ["a", "b"], [], fingerprint).mode == "full"
    assert plan_merge(entry, config, ["a", "c"], ["c"], fingerprint).mode == "full"  # b removed
    assert plan_merge(entry, config, ["b", "a", "c"], ["c"], fingerprint).mode == "full"  # reordered
    assert plan_merge(entry, config, ["a", "b", "c"], ["b", "c"], fingerprint).mode == "full"  # b extracted again
    plan = plan_merge(entry, config, ["a", "b", "c", "d"], ["d"], fingerprint)  # c extracted by a killed run
    assert (plan.mode, plan.added, plan.previous) == ("extend", ["c", "d"], "a|b")


def test_an_extension_on_postgresql_keeps_the_row_order_of_a_whole_merge(tmp_path: Path, postgres_store: str) -> None:
    passages = json.loads(CORPUS.read_text(encoding="utf-8"))[:24]
    grown = Workspace.init(tmp_path / "grown", store=postgres_store)
    try:
        _index(grown, passages[:18], tmp_path, "base")
        _index(grown, passages[18:], tmp_path, "more")
        assert grown.manifest.entry("graph")["update"]["mode"] == "extend"
        got = _state(grown)
    finally:
        grown.close()
    whole = Workspace.init(tmp_path / "whole")
    try:
        _index(whole, passages, tmp_path, "whole")
        expected = _state(whole)
    finally:
        whole.close()
    _same(got.pop("graph"), expected.pop("graph"))
    assert got == expected
