"""Graph building: merge rules, projections, thresholds, one extraction pass, resume, export."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from tests.fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings
from unirag.graph.export import export_graph
from unirag.graph.graph_store import GraphStore
from unirag.graph.projections import project, shared_entity_links
from unirag.graph.merge import merge_extractions, normalize_name, shorten_descriptions
from unirag.graph.types import ChunkExtraction, EntityMention, RelationMention
from unirag.errors import WorkspaceError
from unirag.pipeline import run_index
from unirag.workspace import Workspace


def ex(chunk_id: str, entities: list[tuple[str, str, str]], relations: list[tuple[str, str, str, float]] = ()):
    return ChunkExtraction(
        chunk_id,
        [EntityMention(n, t, d) for n, t, d in entities],
        [RelationMention(a, b, r, f"{a} {r} {b}", [r], s) for a, b, r, s in relations],
    )


HAND = [
    ex("c1", [("Marie Curie", "person", "A physicist."), ("Warsaw", "location", "A city.")],
       [("Marie Curie", "Warsaw", "born in", 9)]),
    ex("c2", [("marie curie.", "scientist", "Won two Nobel prizes."), ("Paris", "location", "Capital of France.")],
       [("MARIE  CURIE", "Paris", "lived in", 7), ("Warsaw", "Marie Curie", "born in", 8)]),
    ex("c3", [("Marie Curie", "person", "A physicist."), ("Pierre Curie", "person", "Her husband.")],
       [("Marie Curie", "Pierre Curie", "married", 10), ("Marie Curie", "marie curie", "self", 1)]),
]


def test_normalize_name_matches_case_whitespace_punctuation() -> None:
    assert normalize_name("  Marie   CURIE. ") == normalize_name("marie curie") == "marie curie"
    assert normalize_name("Lothair II") != normalize_name("Lothair I")


def test_merge_rules() -> None:
    graph = merge_extractions(HAND)
    curie = graph.entities["marie curie"]
    assert curie.name == "Marie Curie"  # most frequent surface form
    assert curie.type == "person"  # voted 2:1 over "scientist"
    assert curie.description.split("\n") == ["A physicist.", "Won two Nobel prizes."]  # distinct, in order
    assert curie.chunk_ids == ["c1", "c2", "c3"]
    assert curie.mentions == 3
    born = graph.relationships["marie curie|warsaw"]
    assert born.weight == 2  # two supporting mentions, either direction
    assert born.strength == 17  # summed strength
    assert born.relation == "born in" and born.chunk_ids == ["c1", "c2"]
    assert "marie curie|marie curie" not in graph.relationships  # self-loop after normalisation
    assert len(graph.relationships) == 3


def test_relationship_endpoints_become_nodes() -> None:
    graph = merge_extractions([ex("c9", [], [("Ada Lovelace", "Charles Babbage", "worked with", 6)])])
    assert set(graph.entities) == {"ada lovelace", "charles babbage"}
    assert graph.entities["ada lovelace"].chunk_ids == ["c9"]


def test_projections_follow_survey_table_2() -> None:
    graph = merge_extractions(HAND)
    kg, tkg, rkg = (project(kind, graph) for kind in ("kg", "tkg", "rkg"))
    assert {n["id"] for n in kg.nodes} == {"marie curie", "warsaw", "paris", "pierre curie"}
    assert "description" not in kg.nodes[0] and "type" not in kg.nodes[0]
    assert all("relation" in e and "weight" in e and "description" not in e for e in kg.edges)
    assert all("type" in n and "description" in n for n in tkg.nodes)
    assert all("description" in e and "keywords" not in e for e in tkg.edges)
    assert all("keywords" in e and "description" in e for e in rkg.edges)
    assert len(kg.edges) == len(tkg.edges) == len(rkg.edges) == 3


def test_passage_graph_threshold() -> None:
    graph = merge_extractions([
        ex("c1", [("A", "", ""), ("B", "", ""), ("C", "", "")]),
        ex("c2", [("A", "", ""), ("B", "", "")]),
        ex("c3", [("C", "", "")]),
        ex("c4", [("D", "", "")]),
    ])
    chunks = ["c1", "c2", "c3", "c4"]
    assert shared_entity_links(graph, chunks, 2) == [("c1", "c2", 2)]
    assert sorted(shared_entity_links(graph, chunks, 1)) == [("c1", "c2", 2), ("c1", "c3", 1)]
    assert shared_entity_links(graph, chunks, 3) == []


def test_hybrid_graph_edges() -> None:
    names = [(n, "", "") for n in "PQRSTU"]
    graph = merge_extractions([ex("c1", names[:5]), ex("c2", names[:4]), ex("c3", names[:3])])
    chunks = {"c1": "one", "c2": "two", "c3": "three"}
    links = shared_entity_links(graph, list(chunks), 3 + 1)  # HyGRAG: more than l = 3 shared
    assert links == [("c1", "c2", 4)]
    view = project("hybrid", graph, chunks, links)
    kinds = Counter(e["kind"] for e in view.edges)
    assert kinds["chunk-chunk"] == 1
    assert kinds["chunk-entity"] == 5 + 4 + 3
    assert {n["kind"] for n in view.nodes} == {"chunk", "entity"}
    assert len(view.nodes) == 3 + 5


def test_shorten_descriptions_truncates_without_llm_and_summarises_with_it() -> None:
    graph = merge_extractions([ex(f"c{i}", [("Hub", "", f"Fact number {i} " * 20)]) for i in range(10)])
    count = lambda text: len(text.split())
    cut = lambda text, n: " ".join(text.split()[:n])
    assert shorten_descriptions(graph, 50, count, cut) == 1
    assert count(graph.entities["hub"].description) == 50
    graph = merge_extractions([ex(f"c{i}", [("Hub", "", f"Fact number {i} " * 20)]) for i in range(10)])
    chat = ScriptedChat()
    assert shorten_descriptions(graph, 50, count, cut, chat=chat) == 1
    assert graph.entities["hub"].description.startswith("summary of")
    assert [r.stage for r in chat.requests] == ["build.summarize_descriptions"]


# -- end to end through run_index -------------------------------------------------


PASSAGES = [
    {"title": "Marie Curie", "text": "Marie Curie was born in Warsaw. She moved to Paris and married Pierre Curie."},
    {"title": "Pierre Curie", "text": "Pierre Curie worked in Paris with Marie Curie on Radium research."},
    {"title": "Warsaw", "text": "Warsaw is the capital of Poland. Marie Curie was born in Warsaw."},
    {"title": "Radium", "text": "Radium was discovered by Marie Curie and Pierre Curie in Paris."},
    {"title": "Paris", "text": "Paris is the capital of France, home of the Sorbonne where Marie Curie taught."},
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "passages.json"
    path.write_text(json.dumps(PASSAGES), encoding="utf-8")
    return path


def index(root: Path, corpus: Path, chat: ScriptedChat, graphs: list[str], **overrides):
    ws = Workspace.init(root)
    settings = make_settings(root, graph__extractor="llm", concurrency=1, **overrides)
    report = run_index(ws, [corpus], settings, fake_stack(settings, ws, chat=chat, embedder=HashEmbedder()),
                       graphs=graphs)
    return ws, report


def extract_calls(chat: ScriptedChat) -> int:
    return sum(r.stage == "build.extract" for r in chat.requests)


def test_every_graph_type_from_one_extraction_pass(tmp_path: Path, corpus: Path) -> None:
    chat = ScriptedChat()
    ws, report = index(tmp_path / "ws", corpus, chat, ["kg"], graph__max_passages_per_call=1)
    assert extract_calls(chat) == 5  # one call per chunk
    ws, report = index(tmp_path / "ws", corpus, chat, ["kg", "tkg", "rkg", "pg", "tree", "hybrid"],
                       graph__max_passages_per_call=1)
    assert extract_calls(chat) == 5  # no chunk extracted twice across graph types
    counts = GraphStore(ws).type_counts()
    assert set(counts) == {"kg", "tkg", "rkg", "pg", "tree", "hybrid"}
    assert counts["kg"]["nodes"] > 5 and counts["kg"]["edges"] > 0
    assert counts["pg"]["edges"] > 0  # the passages share "Marie Curie"
    assert counts["tree"]["nodes"] > 5
    before = chat.calls
    index(tmp_path / "ws", corpus, chat, ["kg", "tkg", "rkg", "pg", "tree", "hybrid"],
          graph__max_passages_per_call=1)
    assert chat.calls == before  # everything up to date: no model call at all


def test_short_passages_share_a_call_and_keep_provenance(tmp_path: Path, corpus: Path) -> None:
    chat = ScriptedChat()
    ws, _ = index(tmp_path / "ws", corpus, chat, ["kg"], graph__max_passages_per_call=4)
    assert extract_calls(chat) == 2  # 5 short passages: 4 + 1
    graph = GraphStore(ws).load_graph()
    titles = {c.id: c.title for c in ws.corpus.iter_chunks()}
    # "Poland" occurs only in the Warsaw passage, "Sorbonne" only in the Paris one.
    assert [titles[c] for c in graph.entities["poland"].chunk_ids] == ["Warsaw"]
    assert [titles[c] for c in graph.entities["sorbonne"].chunk_ids] == ["Paris"]


def test_gleaning_asks_then_gleans(tmp_path: Path, corpus: Path) -> None:
    chat = ScriptedChat()
    chat.glean_answer = "YES"
    ws, _ = index(tmp_path / "ws", corpus, chat, ["kg"], graph__max_passages_per_call=5, graph__gleaning=2,
                   graph__grounding=False)
    stages = Counter(r.stage for r in chat.requests)
    assert stages == {"build.extract": 1, "build.extract.glean_check": 2, "build.extract.glean": 2}
    glean = next(r for r in chat.requests if r.stage == "build.extract.glean")
    user = glean.messages[-1]["content"]
    assert "Already extracted:" in user and "Marie Curie" in user
    assert "gleaned thing" in GraphStore(ws).load_graph().entities
    chat2 = ScriptedChat()  # NO: one check per group, no glean
    index(tmp_path / "ws2", corpus, chat2, ["kg"], graph__max_passages_per_call=5, graph__gleaning=2,
                   graph__grounding=False)
    assert Counter(r.stage for r in chat2.requests) == {"build.extract": 1, "build.extract.glean_check": 1}


def test_resume_in_the_middle_of_extraction(tmp_path: Path, corpus: Path) -> None:
    chat = ScriptedChat(fail_on={3: KeyboardInterrupt()})
    with pytest.raises(KeyboardInterrupt):
        index(tmp_path / "ws", corpus, chat, ["kg"], graph__max_passages_per_call=1, graph__gleaning=0)
    done_first = extract_calls(chat) - 1  # the third call died
    chat2 = ScriptedChat()
    ws, _ = index(tmp_path / "ws", corpus, chat2, ["kg"], graph__max_passages_per_call=1, graph__gleaning=0)
    assert done_first + extract_calls(chat2) == 5  # nothing extracted twice
    clean_chat = ScriptedChat()
    clean, _ = index(tmp_path / "clean", corpus, clean_chat, ["kg"], graph__max_passages_per_call=1,
                     graph__gleaning=0)
    assert set(GraphStore(ws).load_graph().entities) == set(GraphStore(clean).load_graph().entities)


def test_graphml_export_loads_in_networkx_with_attributes(tmp_path: Path, corpus: Path) -> None:
    ws, _ = index(tmp_path / "ws", corpus, ScriptedChat(), ["tkg", "pg", "tree"])
    path = export_graph(ws, "tkg", "graphml", tmp_path / "tkg.graphml")
    loaded = nx.read_graphml(path)
    node = loaded.nodes["marie curie"]
    assert node["name"] == "Marie Curie" and node["type"] == "concept" and node["description"]
    assert json.loads(node["chunk_ids"])
    edge = next(iter(loaded.edges(data=True)))[2]
    assert edge["weight"] >= 1 and "description" in edge
    tree = nx.read_graphml(export_graph(ws, "tree", "graphml", tmp_path / "tree.graphml"))
    assert {data["layer"] for _, data in tree.nodes(data=True)} >= {0, 1}
    directory = export_graph(ws, "pg", "parquet", tmp_path / "pg")
    import pyarrow.parquet as pq

    assert pq.read_table(directory / "nodes.parquet").num_rows == 5


def test_export_of_a_graph_not_built_is_a_clear_error(tmp_path: Path, corpus: Path) -> None:
    ws, _ = index(tmp_path / "ws", corpus, ScriptedChat(), [])
    with pytest.raises(WorkspaceError, match="--graph hybrid"):
        export_graph(ws, "hybrid", "graphml")


def test_grounding_drops_names_not_in_the_passage() -> None:
    from unirag.graph.extract_llm import ground

    extraction = ex("c1", [("Marie Curie", "person", "copied from the example"), ("Lothair II", "person", ""),
                           ("Teutberga", "person", "")],
                    [("Teutberga", "Lothair II", "married", 9), ("Marie Curie", "Warsaw", "born in", 9)])
    ground(extraction, "Teutberga\nTeutberga was a queen by marriage to Lothair II.")
    assert [e.name for e in extraction.entities] == ["Lothair II", "Teutberga"]
    assert [(r.source, r.target) for r in extraction.relations] == [("Teutberga", "Lothair II")]
    assert extraction.dropped == {"ungrounded_entity": 1, "ungrounded_relation": 1}
