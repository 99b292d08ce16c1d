"""Issue 20's offline speed work: the embedded embedder's batching, the nlp extractor's
worker setting, and the per-stage hook the offline benchmark reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fakes import HashEmbedder, fake_stack, make_settings, small_corpus
from unirag.graph.extract_nlp import NlpExtractor
from unirag.graph.graph_build import make_extractor
from unirag.llm.base import UsageLedger
from unirag.index.vector_artifacts import embed_in_length_order
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.workspace import Workspace

TEXTS = [
    "Teutberga",
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II.",
    "Lothair II",
    "Teutberga",
    "She was a daughter of Bosonid Boso the Elder and sister of Hucbert, the lay-abbot of St. Maurice's Abbey. " * 4,
    "",
]


@pytest.fixture(scope="module")
def embedder() -> object:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    from unirag.errors import UniragError
    from unirag.llm.embedded import EmbeddedEmbedder

    model = EmbeddedEmbedder(batch_tokens=64)  # small runs: several sub-batches even for these few texts
    try:
        model.embed(["load"])
    except UniragError as exc:
        pytest.skip(str(exc))
    return model


def test_each_distinct_text_is_embedded_once(embedder: object) -> None:
    batch = embedder.embed(TEXTS)
    assert batch.vectors.shape == (len(TEXTS), 384)
    assert np.array_equal(batch.vectors[0], batch.vectors[3])
    once = embedder.embed(list(dict.fromkeys(TEXTS)))
    assert batch.prompt_tokens == once.prompt_tokens  # the duplicate cost nothing
    assert np.allclose(np.linalg.norm(batch.vectors, axis=1), 1.0, atol=1e-5)


def test_batching_does_not_change_a_vector(embedder: object) -> None:
    together = embedder.embed(TEXTS).vectors
    alone = np.stack([embedder.embed([text]).vectors[0] for text in TEXTS])
    assert float(np.min(np.sum(together * alone, axis=1))) > 0.9999


def test_sub_batches_stay_within_the_token_budget(embedder: object) -> None:
    lengths = np.array([3, 3, 5, 9, 20, 40, 64])
    runs = list(embedder._sub_batches(lengths, np.arange(len(lengths))))
    assert [int(i) for run in runs for i in run] == list(range(len(lengths)))
    assert all(int(lengths[run].max()) * len(run) <= 64 for run in runs)
    assert len(runs[0]) > 1  # short texts share a run


def test_nlp_processes_setting_reaches_the_extractor(tmp_path: Path) -> None:
    settings = make_settings(None, graph__extractor="nlp", graph__nlp_processes=3, graph__nlp_batch_size=16)
    extractor = make_extractor(settings, fake_stack(settings, Workspace.init(tmp_path / "ws")).accounted(UsageLedger()))
    assert isinstance(extractor, NlpExtractor)
    assert (extractor.n_process, extractor.batch_size) == (3, 16)
    # The workers give the same extractions, so they are not part of the extractor's name.
    assert extractor.name == NlpExtractor().name


def test_nlp_processes_default_is_one_and_zero_means_one_per_core_up_to_two() -> None:
    assert make_settings(None).graph.resolved_nlp_processes() == 1
    assert 1 <= make_settings(None, graph__nlp_processes=0).graph.resolved_nlp_processes() <= 2


def test_run_index_names_each_stage_as_it_starts(tmp_path: Path) -> None:
    settings = make_settings(None)
    ws = Workspace.init(tmp_path / "ws")
    seen: list[str] = []
    run_index(ws, [small_corpus(tmp_path)], settings, fake_stack(settings, ws), graphs=[], on_stage=seen.append)
    assert seen[0] == "ingest" and "chunk_vectors" in seen and "chunk_bm25" in seen


def test_embed_in_length_order_embeds_each_distinct_text_once() -> None:
    texts = ["river Nile", "Nile", "river Nile", "capital of Japan", "Nile"]
    model = HashEmbedder()
    vectors = embed_in_length_order(model, texts, 2, Progress(), "embedding", "test")
    assert model.embedded_texts == 3
    assert sorted(t for batch in model.batches for t in batch) == sorted(set(texts))
    expected = HashEmbedder().embed(texts).vectors
    assert np.allclose(vectors, expected, atol=1e-6)
