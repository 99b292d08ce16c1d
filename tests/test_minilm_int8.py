"""``embedding.int8_kernels``: the derived MiniLM graph builds, embeds close to the default,
is named apart from it, and its cached file is reused, rebuilt when damaged, or kept in memory."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.fakes import make_settings
from unirag.errors import ConfigError
from unirag.llm.backends import backend_embedder

SENTENCES = [
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II.",
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France, completed in 1889.",
    "Penicillin was discovered by Alexander Fleming in 1928 at St Mary's Hospital in London.",
    "Lothair II",
    "Who discovered penicillin?",
]


@pytest.fixture(scope="module")
def default_vectors() -> np.ndarray:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from unirag.errors import UniragError
    from unirag.llm.embedded import EmbeddedEmbedder

    try:
        return EmbeddedEmbedder().embed(SENTENCES).vectors
    except UniragError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory: pytest.TempPathFactory, default_vectors: np.ndarray) -> Path:
    """A cache directory holding the derived graph, built once for the module."""
    from unirag.llm.embedded import EmbeddedEmbedder

    cache = tmp_path_factory.mktemp("model-cache")
    EmbeddedEmbedder(int8_kernels=True, model_cache=cache).embed(["build the graph"])
    return cache


def cached_graphs(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.onnx"))


def int8_embedder(cache: Path, warnings: list[str] | None = None) -> object:
    from unirag.llm.embedded import EmbeddedEmbedder

    return EmbeddedEmbedder(int8_kernels=True, model_cache=cache,
                            warn=warnings.append if warnings is not None else None)


def test_int8_kernels_embed_close_to_the_default_graph(built_cache: Path, default_vectors: np.ndarray) -> None:
    from unirag.llm.embedded import EmbeddedEmbedder

    model = int8_embedder(built_cache)
    vectors = model.embed(SENTENCES).vectors
    assert vectors.shape == default_vectors.shape
    assert float(np.min(np.sum(vectors * default_vectors, axis=1))) >= 0.98
    assert model.name != EmbeddedEmbedder().name  # stored vectors of the two graphs never mix
    assert len(cached_graphs(built_cache)) == 1
    import onnx

    graph = onnx.load(str(cached_graphs(built_cache)[0]))
    assert sum(node.op_type == "MatMulInteger" for node in graph.graph.node) == 36  # every weight MatMul


def test_the_cached_graph_is_reused(built_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unirag.llm import minilm_int8

    def no_build(*_: object) -> None:
        raise AssertionError("the cached graph was built again")

    monkeypatch.setattr(minilm_int8, "build_int8_kernel_graph", no_build)
    warnings: list[str] = []
    assert int8_embedder(built_cache, warnings).embed(SENTENCES[:1]).vectors.shape == (1, 384)
    assert not warnings


def test_a_damaged_cached_graph_is_rebuilt_with_one_warning(
    built_cache: Path, tmp_path: Path, default_vectors: np.ndarray,
) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(built_cache, cache)
    graph = cached_graphs(cache)[0]
    graph.write_bytes(graph.read_bytes()[: graph.stat().st_size // 3])  # a copy cut short
    warnings: list[str] = []
    vectors = int8_embedder(cache, warnings).embed(SENTENCES).vectors
    assert len(warnings) == 1 and "rebuilding" in warnings[0] and "\n" not in warnings[0]
    assert float(np.min(np.sum(vectors * default_vectors, axis=1))) >= 0.98
    assert cached_graphs(cache) == [graph] and graph.stat().st_size == cached_graphs(built_cache)[0].stat().st_size
    assert not list(cache.glob("*.part"))  # no scratch file left behind


def test_an_unwritable_cache_keeps_the_graph_in_memory(tmp_path: Path, default_vectors: np.ndarray) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    vectors = int8_embedder(blocker / "cache").embed(SENTENCES).vectors  # mkdir fails: built in memory
    assert float(np.min(np.sum(vectors * default_vectors, axis=1))) >= 0.98
    assert blocker.read_text() == "not a directory"


def test_the_setting_chooses_the_graph_and_is_refused_for_an_endpoint() -> None:
    pytest.importorskip("onnxruntime")
    settings = make_settings()
    default_name = backend_embedder(settings).name
    settings.embedding.int8_kernels = True
    assert backend_embedder(settings).name == default_name + "-kernels"  # built lazily: no model loaded here
    settings.embedding.base_url = "http://localhost:9/v1"
    settings.embedding.model = "some-server-model"
    with pytest.raises(ConfigError, match="int8_kernels"):
        backend_embedder(settings)
