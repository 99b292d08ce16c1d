"""``embedding.model: wordllama-l2-supercat-256``: the faster offline embedder loads from the
installed package with no network, gives normalised 256-d float32 vectors that do not depend on
their batch, ranks a few sentences as expected, re-embeds a workspace indexed with another model,
and a missing package is one line naming the extra."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fakes import HashEmbedder, ScriptedChat, make_settings, small_corpus
from tests.test_extras import python
from unirag.config import FAST_EMBEDDING_MODEL
from unirag.errors import ConfigError
from unirag.index.vector_artifacts import load_vectors
from unirag.llm.backends import backend_embedder
from unirag.llm.factory import build_stack
from unirag.llm.wordllama_embedder import WordLlamaEmbedder
from unirag.pipeline import run_index
from unirag.workspace import Workspace

SENTENCES = [
    "Teutberga (died 11 November 875) was a queen of Lotharingia by marriage to Lothair II.",
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France, completed in 1889.",
    "Penicillin was discovered by Alexander Fleming in 1928 at St Mary's Hospital in London.",
    "A cat is sleeping on the sofa.",
    "Stock markets fell sharply on Monday.",
]
QUESTIONS = {"Which queen married Lothair II?": 0, "When was the Eiffel Tower built?": 1,
             "Who discovered penicillin?": 2, "A kitten naps on the couch.": 3}


def _no_network(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the wordllama embedder tried to reach the network")


@pytest.fixture(scope="module")
def embedder() -> WordLlamaEmbedder:
    pytest.importorskip("wordllama", reason="the fast-embed extra is not installed")
    pytest.importorskip("safetensors")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "create_connection", _no_network)
        patch.setattr(socket.socket, "connect", _no_network)
        requests = sys.modules.get("requests")
        if requests is not None:
            patch.setattr(requests, "get", _no_network)
        model = WordLlamaEmbedder()
        model.embed(["load the table"])  # loads now, with the network refused
    return model


def test_loads_offline_from_the_package_without_importing_it(embedder: WordLlamaEmbedder) -> None:
    # importing wordllama calls logging.basicConfig(level=INFO) and its loader downloads: neither happens
    done = python("""
        import logging, sys
        from unirag.llm.wordllama_embedder import WordLlamaEmbedder
        vectors = WordLlamaEmbedder().embed(["offline"]).vectors
        print(vectors.shape, "wordllama" in sys.modules, logging.getLogger().handlers)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 256) False []"


def test_vectors_are_normalised_float32_and_deterministic(embedder: WordLlamaEmbedder) -> None:
    batch = embedder.embed(SENTENCES)
    assert batch.vectors.dtype == np.float32 and batch.vectors.shape == (len(SENTENCES), 256)
    assert np.allclose(np.linalg.norm(batch.vectors, axis=1), 1.0, atol=1e-6)
    assert batch.prompt_tokens > len(SENTENCES) and batch.calls == 1
    assert WordLlamaEmbedder().embed(SENTENCES).vectors.tobytes() == batch.vectors.tobytes()


def test_a_vector_does_not_depend_on_its_batch(embedder: WordLlamaEmbedder) -> None:
    together = embedder.embed(SENTENCES).vectors
    alone = np.vstack([embedder.embed([text]).vectors for text in SENTENCES])
    # a short text next to long ones: the package's padded batches must not leak into its mean
    mixed = embedder.embed([SENTENCES[4], "x " * 400, SENTENCES[0], SENTENCES[4]]).vectors
    assert alone.tobytes() == together.tobytes()
    assert mixed[0].tobytes() == mixed[3].tobytes() == together[4].tobytes()
    assert mixed[2].tobytes() == together[0].tobytes()


def test_the_nearest_sentence_is_the_one_on_the_same_topic(embedder: WordLlamaEmbedder) -> None:
    passages = embedder.embed(SENTENCES).vectors
    questions = embedder.embed(list(QUESTIONS)).vectors
    scores = questions @ passages.T
    assert [int(i) for i in scores.argmax(axis=1)] == list(QUESTIONS.values())
    cat, kitten, stocks = passages[3], questions[3], passages[4]
    assert float(cat @ kitten) > 0.4 > 0.1 > float(kitten @ stocks)


def test_the_setting_chooses_it_and_a_switch_re_embeds(tmp_path: Path, embedder: WordLlamaEmbedder) -> None:
    settings = make_settings()
    minilm = HashEmbedder(name=backend_embedder(settings).name, dim=384)  # MiniLM's name, without loading it
    ws = Workspace.init(tmp_path / "ws")
    run_index(ws, [small_corpus(tmp_path)], settings, build_stack(settings, ws.cache(), ScriptedChat(), minilm),
              graphs=[])
    assert ws.manifest.entry("chunk_vectors")["config"]["model"] == minilm.name

    fast = make_settings(embedding__model=FAST_EMBEDDING_MODEL)
    chosen = backend_embedder(fast)
    assert isinstance(chosen, WordLlamaEmbedder) and chosen.name == FAST_EMBEDDING_MODEL != minilm.name
    run_index(ws, [], fast, build_stack(fast, ws.cache(), ScriptedChat()), graphs=[])
    assert ws.manifest.entry("chunk_vectors")["config"]["model"] == FAST_EMBEDDING_MODEL
    _, vectors = load_vectors(ws, "chunk_vectors", "chunk_vectors")
    assert np.asarray(vectors).shape == (len(ws.corpus.chunk_ids()), 256)
    ws.close()


def test_int8_kernels_are_refused_for_it() -> None:
    with pytest.raises(ConfigError, match="int8_kernels applies to the embedded MiniLM only"):
        backend_embedder(make_settings(embedding__model=FAST_EMBEDDING_MODEL, embedding__int8_kernels=True))


def test_a_missing_package_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path)
    done = python(f"""
        import os, sys
        os.environ["UNIRAG_EMBEDDING_MODEL"] = {FAST_EMBEDDING_MODEL!r}
        from unirag.cli import main
        sys.argv = ["unirag", "index", {str(corpus)!r}, "-w", {str(tmp_path / "ws")!r}, "-q"]
        main()
    """, ("wordllama",), cwd=tmp_path)
    lines = [line for line in done.stderr.splitlines() if not line.startswith("unirag: warning:")]
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    assert lines[0] == ("unirag: error: embedding.model wordllama-l2-supercat-256 needs the optional package "
                        "'wordllama', which is not installed: pip install 'unirag[fast-embed]'")
