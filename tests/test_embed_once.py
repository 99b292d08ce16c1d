"""Issue 34: embed what is needed, once.

Long texts embedded as the word-weighted mean of their sentences (each distinct sentence
embedded once for every artifact), the
embedding cache as the content-addressed store two artifacts share (the second embeds nothing),
the ledger's tokens read and sent, and the table of vector artifacts each method reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fakes import HashEmbedder, fake_stack, make_settings
from unirag.artifacts.registry import BuildContext, artifact_registry, community_text, resolve_names
from unirag.graph.graph_store import GraphStore
from unirag.graph.merge import merge_extractions
from unirag.graph.types import ChunkExtraction, EntityMention, RelationMention
from unirag.hierarchy.communities import Community
from unirag.hierarchy.entity_graph import relationship_texts
from unirag.index.vector_artifacts import build_text_vectors, load_vectors
from unirag.llm.base import EmbeddingBatch, UsageLedger
from unirag.llm.layers import AccountedEmbedder
from unirag.llm.sentence_mean import NAME_SUFFIX, SentenceMeanEmbedder
from unirag.methods.vector_reads import readers, unread_vector_artifacts, vector_artifact_names
from unirag.progress import Progress
from unirag.text.sentences import text_segments
from unirag.workspace import Workspace

pytestmark = pytest.mark.numeric  # sentence-mean vectors compared with expected means

SENTENCE = "Ada, Bob and Cy met in Oslo."
OTHER = "Bob and Cy wrote a book."


def _graph_workspace(root: Path, **overrides: str) -> tuple[Workspace, BuildContext, HashEmbedder, UsageLedger]:
    """Three people named in one sentence (three relationships citing it), Bob and Cy in a second."""
    ws = Workspace.init(root)
    extraction = ChunkExtraction("c1", [EntityMention(name, "person", SENTENCE) for name in ("Ada", "Bob", "Cy")], [
        RelationMention("Ada", "Bob", "met", SENTENCE, [], 1.0),
        RelationMention("Ada", "Cy", "met", SENTENCE, [], 1.0),
        RelationMention("Bob", "Cy", "met", SENTENCE, [], 1.0),
    ])
    second = ChunkExtraction("c2", [EntityMention(name, "person", OTHER) for name in ("Bob", "Cy")],
                             [RelationMention("Bob", "Cy", "wrote", OTHER, [], 1.0)])
    GraphStore(ws).save_graph(merge_extractions([extraction, second]))
    ws.manifest.set_entry("graph", {"config": {"extractor": "hand"}, "inputs": "hand-built"})
    settings = make_settings(ws.root, **{"index__long_texts": "sentences", **overrides})
    embedder, ledger = HashEmbedder(), UsageLedger()
    ctx = BuildContext(ws, settings, fake_stack(settings, ws, embedder=embedder).accounted(ledger), Progress())
    return ws, ctx, embedder, ledger


def _unit(embedder: HashEmbedder, text: str) -> np.ndarray:
    vector = embedder.vector(text)
    return vector / np.linalg.norm(vector)


def _sentence_mean(embedder: HashEmbedder, text: str) -> np.ndarray:
    """The expected vector: the word-weighted mean of the text's segments' unit vectors."""
    segments = text_segments(text)
    mean = sum(len(part.split()) * _unit(embedder, part) for part in segments)
    return mean / np.linalg.norm(mean)


def test_relation_vectors_embed_each_sentence_once_as_the_word_weighted_mean(tmp_path: Path) -> None:
    ws, ctx, embedder, _ = _graph_workspace(tmp_path / "ws")
    assert artifact_registry()["relation_vectors"].build(ctx)
    embedded = [text for batch in embedder.batches for text in batch]
    assert embedded.count(SENTENCE) == 1 and embedded.count(OTHER) == 1  # three relationships cite SENTENCE
    _, texts = relationship_texts(GraphStore(ws).shared_graph())
    assert sorted(embedded) == sorted({part for text in texts for part in text_segments(text)})
    ids, vectors = load_vectors(ws, "relation_vectors", "relation_vectors")
    assert ws.manifest.entry("relation_vectors")["config"]["model"] == embedder.name + NAME_SUFFIX
    for text, row in zip(texts, np.asarray(vectors)):
        np.testing.assert_allclose(row, _sentence_mean(embedder, text), atol=1e-6)


def test_long_texts_whole_keeps_the_whole_text_vectors(tmp_path: Path) -> None:
    ws, ctx, embedder, _ = _graph_workspace(tmp_path / "ws", index__long_texts="whole")
    assert artifact_registry()["relation_vectors"].build(ctx)
    _, texts = relationship_texts(GraphStore(ws).shared_graph())
    assert sorted(text for batch in embedder.batches for text in batch) == sorted(texts)
    assert ws.manifest.entry("relation_vectors")["config"]["model"] == embedder.name


def test_long_texts_are_embedded_whole_unless_told(tmp_path: Path) -> None:
    """The sentence mean cost most graph methods recall on the dev sets: it is opt-in."""
    assert make_settings(tmp_path).index.long_texts == "whole"
    ws, ctx, embedder, _ = _graph_workspace(tmp_path / "ws", index__long_texts="whole")
    assert artifact_registry()["entity_vectors"].build(ctx)
    assert sorted(t for batch in embedder.batches for t in batch) == sorted(
        [f"Ada: {SENTENCE}", f"Bob: {SENTENCE} {OTHER}", f"Cy: {SENTENCE} {OTHER}"])


def test_embedding_calls_are_512_texts_for_the_embedded_models_and_32_for_an_endpoint(tmp_path: Path) -> None:
    assert make_settings(tmp_path).embedding.resolved_batch_size == 512
    assert make_settings(tmp_path, embedding__base_url="http://localhost:1/v1",
                         embedding__model="m").embedding.resolved_batch_size == 32
    assert make_settings(tmp_path, embedding__batch_size=7).embedding.resolved_batch_size == 7
    assert "\n  batch_size:" not in (Workspace.init(tmp_path / "ws").root / "unirag.yaml").read_text()


def test_switching_long_texts_rebuilds_the_vectors(tmp_path: Path) -> None:
    ws, ctx, embedder, _ = _graph_workspace(tmp_path / "ws")
    assert artifact_registry()["relation_vectors"].build(ctx)
    assert not artifact_registry()["relation_vectors"].build(ctx)  # up to date
    whole = make_settings(ws.root)  # the default
    ctx = BuildContext(ws, whole, ctx.models, Progress())
    assert artifact_registry()["relation_vectors"].build(ctx)


def test_relation_vectors_rebuild_embeds_only_changed_relationships(tmp_path: Path) -> None:
    ws, ctx, embedder, _ = _graph_workspace(tmp_path / "ws")
    artifact_registry()["relation_vectors"].build(ctx)
    before = dict(zip(*load_vectors(ws, "relation_vectors", "relation_vectors")))
    graph = GraphStore(ws).shared_graph()
    changed = next(iter(graph.relationships.values()))
    changed.description = "Ada met Bob again."
    GraphStore(ws).save_graph(graph)
    ws.manifest.set_entry("graph", {"config": {"extractor": "hand"}, "inputs": "hand-built-2"})
    embedder.batches.clear()
    ctx = BuildContext(ws, ctx.settings, ctx.models, Progress())  # a new run reads the new graph
    assert artifact_registry()["relation_vectors"].build(ctx)
    assert embedder.batches == [["Ada met Bob again."]]  # its label: a cache hit
    after = dict(zip(*load_vectors(ws, "relation_vectors", "relation_vectors")))
    for rel_id, vector in after.items():
        if rel_id != changed.id:
            np.testing.assert_allclose(vector, before[rel_id], atol=1e-7)  # kept, not re-embedded


def test_entity_vectors_reuse_the_names_and_the_relationships_sentences(tmp_path: Path) -> None:
    ws, ctx, embedder, ledger = _graph_workspace(tmp_path / "ws")
    registry = artifact_registry()
    for name in ("entity_name_vectors", "relation_vectors"):
        assert registry[name].build(ctx)
    embedder.batches.clear()
    assert registry["entity_vectors"].build(ctx)
    assert embedder.batches == []  # names and sentences: all embedded already
    assert ledger.to_json()["index.entity_vectors"]["embedding_cache_hits"] == 5
    graph = GraphStore(ws).shared_graph()
    for entity_id, row in zip(*load_vectors(ws, "entity_vectors", "entity_vectors")):
        entity = graph.entities[entity_id]
        np.testing.assert_allclose(row, _sentence_mean(embedder, f"{entity.name}: {entity.description}"), atol=1e-6)


def test_sentence_mean_of_one_segment_is_the_models_vector() -> None:
    inner = HashEmbedder()
    composed = SentenceMeanEmbedder(inner)
    single = composed.embed(["Ada met Bob in Oslo."]).vectors[0]
    np.testing.assert_allclose(single, _unit(inner, "Ada met Bob in Oslo."), atol=1e-6)
    assert composed.embed([]).vectors.shape[0] == 0
    weighted = composed.embed(["Ada: one two three. Four."]).vectors[0]
    expected = _unit(inner, "Ada") + 3 * _unit(inner, "one two three.") + _unit(inner, "Four.")
    np.testing.assert_allclose(weighted, expected / np.linalg.norm(expected), atol=1e-6)
    texts = ["Ada: one two three. Four.", "Bob: Four. Five six.", "Cy"]
    small = HashEmbedder()
    in_pairs = SentenceMeanEmbedder(small, batch_size=2).embed(texts)  # an endpoint's request size
    assert [len(batch) for batch in small.batches] == [2, 2, 2]  # six distinct segments
    np.testing.assert_allclose(in_pairs.vectors, composed.embed(texts).vectors, atol=1e-6)
    assert in_pairs.calls == 3


def test_text_segments_split_a_short_label_lines_and_sentences() -> None:
    assert text_segments("Bob met Cy: Bob met Cy. He left.\nA line (met)") == [
        "Bob met Cy", "Bob met Cy.", "He left.", "A line (met)"]
    assert text_segments("No label here. Second: one.") == ["No label here.", "Second", "one."]
    assert text_segments("Title\nBody: more.") == ["Title", "Body", "more."]
    assert text_segments("Ada; Bob; Cy\nAda: She wrote; he read.") == ["Ada", "Bob", "Cy", "Ada", "She wrote", "he read."]
    assert text_segments("Ada; Wrong Turn: The Foundation; Bob") == ["Ada", "Wrong Turn", "The Foundation", "Bob"]
    long_label = " ".join(["word"] * 17)
    assert text_segments(f"{long_label}: rest.") == [f"{long_label}: rest."]
    assert text_segments("") == []


def test_two_artifacts_embedding_the_same_text_embed_it_once(tmp_path: Path) -> None:
    """The embedding cache is the store every vector artifact reads, keyed by model and text: a
    second artifact with the same texts is all cache hits, counted as such in the ledger."""
    ws, ctx, embedder, ledger = _graph_workspace(tmp_path / "ws")
    texts = ["the first summary", "the second summary"]
    for key in ("first", "second"):
        build_text_vectors(ws, ctx.models.embedder, key, key, ["a", "b"], texts, 8, Progress(), f"index.{key}", key)
    assert embedder.embedded_texts == 2
    usage = ledger.to_json()
    assert usage["index.first"]["embedded_texts"] == 2 and usage["index.first"]["embedding_cache_hits"] == 0
    assert usage["index.second"]["embedded_texts"] == 0 and usage["index.second"]["embedding_cache_hits"] == 2
    assert np.array_equal(np.asarray(load_vectors(ws, "first", "first")[1]),
                          np.asarray(load_vectors(ws, "second", "second")[1]))


def test_hygrag_and_archrag_community_vectors_embed_the_summary_their_build_embedded() -> None:
    community = Community(id="c", hierarchy="hygrag", level=1, children=[], entities=[], title="Oslo",
                          summary="Ada met Bob in Oslo.")
    assert community_text(community) == "Oslo: Ada met Bob in Oslo."
    assert community_text(community, "summary") == "Ada met Bob in Oslo."
    from unirag.hierarchy.registry import spec_of

    assert {name: spec_of(name).vector_text for name in ("graphrag", "archrag", "hygrag", "leanrag")} == {
        "graphrag": "title_summary", "archrag": "summary", "hygrag": "summary", "leanrag": "title_summary"}


def test_hygrag_community_vectors_are_cache_hits_after_its_build(tmp_path: Path) -> None:
    """(ArchRAG makes no community of the hand graph: its rule is the same one, checked above.)"""
    from tests.graph_fixture import build_hand_graph

    hierarchy = "hygrag"
    ws, settings, embedder = build_hand_graph(tmp_path / "ws", index__summarizer="extractive")
    ledger = UsageLedger()
    ctx = BuildContext(ws, settings, fake_stack(settings, ws, embedder=embedder).accounted(ledger), Progress())
    registry = artifact_registry()
    for name in ("chunk_vectors", "chunk_links:hybrid", f"communities:{hierarchy}"):
        registry[name].build(ctx)
    embedded = embedder.embedded_texts
    assert registry[f"community_vectors:{hierarchy}"].build(ctx)
    usage = ledger.to_json()[f"index.{hierarchy}.embed_reports"]
    assert usage["embedding_cache_hits"] > 0
    assert (usage["embedded_texts"], embedder.embedded_texts) == (0, embedded)


class _Truncating:
    """An embedder that reads at most 3 tokens (words) of a text, as MiniLM reads 256 word pieces."""

    name = "truncating"

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        words = [len(text.split()) for text in texts]
        return EmbeddingBatch(np.ones((len(texts), 2), np.float32), prompt_tokens=sum(min(w, 3) for w in words),
                              calls=1, sent_tokens=sum(words))


def test_the_ledger_counts_tokens_read_and_tokens_sent() -> None:
    ledger = UsageLedger()
    AccountedEmbedder(_Truncating(), ledger).embed(["one two three four five", "six"], stage="index.x")
    usage = ledger.to_json()["index.x"]
    assert (usage["embedding_tokens"], usage["embedding_tokens_sent"]) == (4, 6)
    AccountedEmbedder(HashEmbedder(), ledger).embed(["a b"], stage="index.y")  # reads all it is sent
    assert ledger.to_json()["index.y"]["embedding_tokens_sent"] == ledger.to_json()["index.y"]["embedding_tokens"]


def test_embedded_minilm_reads_256_word_pieces_and_counts_what_it_cut() -> None:
    pytest.importorskip("onnxruntime")
    from unirag.llm.embedded import EmbeddedEmbedder

    model = EmbeddedEmbedder()
    long_text = "hello world " * 300  # 600 word pieces
    batch = model.embed([long_text, "hello world"])
    assert batch.prompt_tokens == 256 + 4  # read: the cap (with [CLS] and [SEP]), and the short text whole
    assert batch.sent_tokens == 602 + 4
    prefix = model.embed([" ".join(["hello world"] * 127)]).vectors[0]  # the 254 word pieces it read
    assert float(batch.vectors[0] @ prefix) > 0.9999


def test_every_vector_artifact_all_builds_is_read_by_a_shipped_method() -> None:
    assert unread_vector_artifacts(resolve_names(["all"])) == []
    assert "community_vectors:leanrag" not in readers()
    assert sorted(readers()["relation_vectors"]) == ["g-retriever", "glightrag", "hipporag2", "hipporag2-rerank", "hlightrag", "hygrag"]
    assert "community_vectors:archrag" in vector_artifact_names()


def test_the_generated_table_lists_every_vector_artifact_and_its_readers() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import docs_hooks

    table = docs_hooks.vector_reads_table()
    for name in vector_artifact_names():
        assert f"| `{name}` |" in table
    row = next(line for line in table.splitlines() if line.startswith("| `community_vectors:archrag` |"))
    assert row.endswith("| - | `archrag`, `archrag-direct`, `archrag-entity-only`, `archrag-single-layer` |")
    assert docs_hooks.on_page_markdown(docs_hooks.MARKERS["vector_reads"]) == table
    graphs_page = Path(__file__).resolve().parents[1] / "docs" / "graphs.md"
    assert docs_hooks.MARKERS["vector_reads"] in graphs_page.read_text(encoding="utf-8")


def test_switching_long_texts_rebuilds_the_tree_summaries(tmp_path: Path) -> None:
    """The tree's leaves are the chunk vectors; its summaries' vectors follow index.long_texts."""
    from tests.graph_fixture import build_hand_graph

    ws, settings, embedder = build_hand_graph(tmp_path / "ws", index__summarizer="extractive")
    ctx = BuildContext(ws, settings, fake_stack(settings, ws, embedder=embedder).accounted(UsageLedger()), Progress())
    registry = artifact_registry()
    assert registry["tree"].build(ctx) and not registry["tree"].build(ctx)
    by_sentences = make_settings(ws.root, index__long_texts="sentences", index__summarizer="extractive")
    ctx = BuildContext(ws, by_sentences, ctx.models, Progress())
    assert registry["tree"].build(ctx)
    assert ws.manifest.entry("tree")["identity"]["embedder"].endswith(NAME_SUFFIX)
