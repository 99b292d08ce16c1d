"""A small hand-built graph in a real workspace, for operator tests with known answers.

Five passages about the Curies; the extraction is written by hand (not by a
model), so every entity, relationship and chunk link is known:

    marie curie --born in-- warsaw --capital of-- poland
    marie curie --married-- pierre curie --worked in-- paris
    marie curie --discovered-- radium --discovered-- pierre curie
    paris --capital of-- france ;  sorbonne --located in-- paris
    lone island (no relationship)

The workspace has chunk vectors, BM25, TF-IDF, the merged graph and the
entity / entity-name / relationship vector indices, all built with the
deterministic ``HashEmbedder``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings
from unirag.graph.graph_store import GraphStore
from unirag.graph.merge import merge_extractions
from unirag.graph.types import ChunkExtraction, EntityMention, RelationMention
from unirag.artifacts.registry import BuildContext, artifact_registry
from unirag.llm.base import UsageLedger
from unirag.operators.context import QueryState, Resources
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.workspace import Workspace

PASSAGES = [
    {"title": "Marie Curie", "text": "Marie Curie was born in Warsaw. She married Pierre Curie."},
    {"title": "Pierre Curie", "text": "Pierre Curie worked in Paris with Marie Curie. Together they discovered Radium."},
    {"title": "Warsaw", "text": "Warsaw is the capital of Poland."},
    {"title": "Paris", "text": "Paris is the capital of France and home of the Sorbonne."},
    {"title": "Lone Island", "text": "Lone Island is a small island with no famous people."},
]

# title -> (entities [(name, type, description)], relations [(source, target, relation, strength)])
FACTS: dict[str, tuple[list[tuple[str, str, str]], list[tuple[str, str, str, float]]]] = {
    "Marie Curie": (
        [("Marie Curie", "person", "Physicist and chemist."), ("Warsaw", "location", "City in Poland."),
         ("Pierre Curie", "person", "Physicist.")],
        [("Marie Curie", "Warsaw", "born in", 9), ("Marie Curie", "Pierre Curie", "married", 10)],
    ),
    "Pierre Curie": (
        [("Pierre Curie", "person", "French physicist."), ("Paris", "location", "Capital of France."),
         ("Marie Curie", "person", "Physicist and chemist."), ("Radium", "concept", "A chemical element.")],
        [("Pierre Curie", "Paris", "worked in", 7), ("Marie Curie", "Radium", "discovered", 9),
         ("Pierre Curie", "Radium", "discovered", 8)],
    ),
    "Warsaw": ([("Warsaw", "location", "Capital of Poland."), ("Poland", "location", "A country.")],
               [("Warsaw", "Poland", "capital of", 10)]),
    "Paris": ([("Paris", "location", "Capital of France."), ("France", "location", "A country."),
               ("Sorbonne", "organization", "A university in Paris.")],
              [("Paris", "France", "capital of", 10), ("Sorbonne", "Paris", "located in", 8)]),
    "Lone Island": ([("Lone Island", "location", "A small island.")], []),
}

ARTIFACTS = ("entity_vectors", "entity_name_vectors", "relation_vectors", "chunk_tfidf")


def build_hand_graph(root: Path, **overrides: Any) -> tuple[Workspace, Any, HashEmbedder]:
    """A workspace over PASSAGES with the FACTS graph and its indices; (workspace, settings, embedder)."""
    corpus = root.parent / f"{root.name}-passages.json"
    corpus.write_text(json.dumps(PASSAGES), encoding="utf-8")
    ws = Workspace.init(root)
    settings = make_settings(ws.root, **overrides)
    embedder = HashEmbedder()
    run_index(ws, [corpus], settings, fake_stack(settings, ws, embedder=embedder), graphs=[])
    chunk_of = {chunk.title: chunk.id for chunk in ws.corpus.iter_chunks()}
    extractions = [
        ChunkExtraction(
            chunk_of[title],
            [EntityMention(name, kind, description) for name, kind, description in entities],
            [RelationMention(a, b, relation, f"{a} {relation} {b}.", [relation], strength)
             for a, b, relation, strength in relations],
        )
        for title, (entities, relations) in FACTS.items()
    ]
    GraphStore(ws).save_graph(merge_extractions(extractions))
    ws.manifest.set_entry("graph", {"config": {"extractor": "hand"}, "inputs": "hand-built",
                                    "entities": 9, "relationships": 8})
    ctx = BuildContext(ws, settings, fake_stack(settings, ws, embedder=embedder).accounted(UsageLedger()), Progress())
    registry = artifact_registry()
    for name in ARTIFACTS:
        registry[name].build(ctx)
    return ws, settings, embedder


def query_state(
    ws: Workspace, settings: Any, question: str, embedder: HashEmbedder | None = None, chat: Any = None,
) -> QueryState:
    """A fresh query state over the workspace, with the question embedded."""
    embedder = embedder or HashEmbedder()
    models = fake_stack(settings, ws, chat=chat or ScriptedChat(), embedder=embedder).accounted(UsageLedger())
    state = QueryState(question=question, resources=Resources(ws, settings), models=models)
    state.query_vector = embedder.embed([question]).vectors[0]
    return state


def chunk_id_of(ws: Workspace, title: str) -> str:
    return next(chunk.id for chunk in ws.corpus.iter_chunks() if chunk.title == title)
