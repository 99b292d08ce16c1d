"""A text vector artifact rebuilt after a change embeds only its new and changed texts, and
its vectors are exactly those of embedding every text again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fakes import HashEmbedder
from unirag.errors import WorkspaceError
from unirag.index.vector_artifacts import build_text_vectors, load_vectors, vector_paths
from unirag.progress import Progress
from unirag.workspace import Workspace

TEXTS = {"a": "river Nile", "b": "Nile", "c": "capital of Japan", "d": "river Nile", "e": "Tokyo tower"}


def _build(ws: Workspace, texts: dict[str, str], model: HashEmbedder) -> tuple[list[str], np.ndarray]:
    build_text_vectors(ws, model, "v", "v", list(texts), list(texts.values()), 2, Progress(), "test", "embedding")
    ids, vectors = load_vectors(ws, "v", "v")
    return ids, np.array(vectors)


def test_a_rebuild_embeds_only_new_and_changed_texts_and_equals_a_whole_embedding(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    _build(ws, TEXTS, HashEmbedder())
    changed = {**{k: v for k, v in TEXTS.items() if k != "e"}, "c": "capital of France", "f": "river Nile",
               "g": "Eiffel tower"}
    model = HashEmbedder()
    ids, vectors = _build(ws, changed, model)
    assert sorted(t for batch in model.batches for t in batch) == ["Eiffel tower", "capital of France"]
    whole_ids, whole = _build(Workspace.init(tmp_path / "whole"), changed, HashEmbedder())
    assert ids == whole_ids and vectors.tobytes() == whole.tobytes()


def test_digests_of_another_build_or_model_are_not_used(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    _build(ws, TEXTS, HashEmbedder())
    model = HashEmbedder(name="another")
    _build(ws, {**TEXTS, "f": "x"}, model)
    assert model.embedded_texts == 5  # another model: every distinct text
    # the vectors file rewritten behind the manifest's back: the digests no longer belong to it
    np.save(vector_paths(ws, "v")[0], np.zeros((6, 64), np.float32))
    ws.manifest.set_entry("v", {**ws.manifest.entry("v"), "inputs": "other"}, files=())
    model = HashEmbedder(name="another")
    _build(ws, {**TEXTS, "f": "x", "g": "y"}, model)
    assert model.embedded_texts == 6  # every distinct text again


def test_stored_vectors_of_another_dimension_are_an_error_not_a_mix(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    _build(ws, TEXTS, HashEmbedder())
    with pytest.raises(WorkspaceError, match="64-dimension vectors.*32-dimension vectors"):
        _build(ws, {**TEXTS, "f": "x"}, HashEmbedder(dim=32))


def test_new_texts_scattered_over_a_whole_build_are_packed_into_full_batches(tmp_path: Path) -> None:
    """Ten new texts of every length among 200 known ones: five calls of two (the batch size),
    not one small call per batch a whole embedding would make."""
    ws = Workspace.init(tmp_path / "ws")
    known = {f"k{i}": "word " * (i % 40 + 1) + str(i) for i in range(200)}
    _build(ws, known, HashEmbedder())
    new = {f"n{i}": "term " * (i * 4 + 1) + "new" for i in range(10)}
    model = HashEmbedder()
    ids, vectors = _build(ws, {**known, **new}, model)
    assert [len(batch) for batch in model.batches] == [2] * 5
    assert sorted(t for batch in model.batches for t in batch) == sorted(new.values())
    whole_ids, whole = _build(Workspace.init(tmp_path / "whole"), {**known, **new}, HashEmbedder())
    assert ids == whole_ids and vectors.tobytes() == whole.tobytes()
