"""BM25 and TF-IDF updated in place: an update must give the bytes a full build gives.

The chunk lexical indices keep their chunks' term counts beside them
(``chunks.bm25.terms.npz``, ``chunks.tfidf.terms.npz``); an update tokenises only
new or changed chunks. Every comparison here is exact: the saved arrays with
``np.array_equal`` and their dtypes, the JSON files byte for byte, the scores of
several queries with ``np.array_equal``. Real passages: the MuSiQue and 2Wiki
samples in tests/data.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
import pytest
from tests.dev_sets import SAMPLE

from unirag.ingest import ingest
from unirag.index.bm25 import Bm25Index
from unirag.index.chunks import build_chunk_bm25, build_chunk_tfidf
from unirag.index.term_counts import count_terms, load_term_counts, save_term_counts
from unirag.index.tfidf import TfidfIndex
from unirag.text.types import Document
from unirag.workspace import Workspace

from tests.fakes import make_settings

INDICES = {"chunks.bm25": (build_chunk_bm25, Bm25Index), "chunks.tfidf": (build_chunk_tfidf, TfidfIndex)}
QUERIES = ["Who edits the Journal of Mathematical Physics?", "person-centered therapy counseling",
           "Which film was directed by the older director?", "capital city river bridge", "the of and"]


def _passages() -> list[dict[str, str]]:
    musique = json.loads((SAMPLE.root / "musique" / "musique_train_corpus.json").read_text())
    twowiki = json.loads((SAMPLE.root / "2wikimultihopqa" / "2wikimultihopqa_corpus.json").read_text())
    return musique + twowiki


PASSAGES = _passages()
A, B = PASSAGES[:60], PASSAGES[60:]


def _documents(passages: list[dict[str, str]]) -> list[Document]:
    return [Document(p["title"], p["text"], source="", presplit=True) for p in passages]


def _workspace(root: Path, *parts: list[dict[str, str]]) -> Workspace:
    ws = Workspace.init(root)
    settings = make_settings(root)
    for part in parts:
        ingest(ws, [], settings, documents=_documents(part))
    return ws


def _build(ws: Workspace) -> None:
    for build, _ in INDICES.values():
        assert build(ws)


def _content(directory: Path) -> dict[str, Any]:
    """Every file of an artifact directory: arrays for .npz/.npy, bytes otherwise."""
    content: dict[str, Any] = {}
    for path in sorted(directory.iterdir()):
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as saved:
                content.update({f"{path.name}:{key}": saved[key] for key in saved.files})
        elif path.suffix == ".npy":
            content[path.name] = np.load(path, allow_pickle=False)
        else:
            content[path.name] = path.read_bytes()
    return content


def _assert_same(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert left.keys() == right.keys()
    for key, value in left.items():
        other = right[key]
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and np.array_equal(value, other), key
        else:
            assert value == other, key


def _assert_same_indices(ws: Workspace, expected: Workspace) -> None:
    """Same files, and the same scores for every query (exactly)."""
    for name in INDICES:
        _assert_same(_content(ws.artifact_path(name)), _content(expected.artifact_path(name)))
    tfidf = [TfidfIndex.load(w.artifact_path("chunks.tfidf")) for w in (ws, expected)]
    bm25 = [Bm25Index.load(w.artifact_path("chunks.bm25")) for w in (ws, expected)]
    for query in QUERIES:
        scores = [(index.matrix @ index.query_vector(query).T).toarray().ravel() for index in tfidf]
        assert np.array_equal(scores[0], scores[1]), query
        assert tfidf[0].search(query, 5) == tfidf[1].search(query, 5)
        assert bm25[0].search(query, 5) == bm25[1].search(query, 5)


@pytest.fixture
def tokenised(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many texts each index tokenised."""
    seen = {"chunks.bm25": 0, "chunks.tfidf": 0}
    for name, (_, index) in INDICES.items():
        original = index.tokenize

        def counting(texts: list[str], name: str = name, original: Any = original) -> list[list[str]]:
            seen[name] += len(texts)
            return original(texts)

        monkeypatch.setattr(index, "tokenize", counting)
    return seen


def test_a_build_equals_the_libraries_own_build() -> None:
    """The counts-based build gives what scikit-learn's and bm25s's own indexing give."""
    texts = [f"{p['title']}\n{p['text']}" for p in PASSAGES]
    ids = [f"c{i}" for i in range(len(texts))]
    vectorizer = TfidfIndex._vectorizer_for()
    expected = vectorizer.fit_transform(texts).tocsr()
    built = TfidfIndex.build(texts, ids)
    for part in ("data", "indices", "indptr"):
        left, right = getattr(built.matrix, part), getattr(expected, part)
        assert left.dtype == right.dtype and np.array_equal(left, right), part
    assert list(built.vocabulary.items()) == [(term, int(i)) for term, i in vectorizer.vocabulary_.items()]
    assert np.array_equal(built.idf, vectorizer.idf_) and built.idf.dtype == vectorizer.idf_.dtype
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    ours = Bm25Index.build(texts, ids)._retriever
    for part in ("data", "indices", "indptr"):
        left, right = ours.scores[part], retriever.scores[part]
        assert left.dtype == right.dtype and np.array_equal(left, right), part
    assert ours.scores["num_docs"] == retriever.scores["num_docs"]
    assert list(ours.vocab_dict.items()) == list(retriever.vocab_dict.items())


def test_the_tfidf_terms_are_scikit_learns() -> None:
    """The terms counted are the vectoriser's analyser's for CONFIG (tricky text included)."""
    texts = [f"{p['title']}\n{p['text']}" for p in PASSAGES[:50]] + [
        "İstanbul's ĲSSEL-meer, naïve café_au_lait; x2 y 42 and THE Ǆungla — e-mail: a.b@c.d", "", "I a"]
    assert TfidfIndex.tokenize(texts) == [TfidfIndex._vectorizer_for().build_analyzer()(t) for t in texts]


def test_adding_passages_equals_a_full_build(tmp_path: Path, tokenised: dict[str, int]) -> None:
    grown = _workspace(tmp_path / "grown", A)
    _build(grown)
    assert tokenised == {name: len(A) for name in INDICES}
    ingest(grown, [], make_settings(grown.root), documents=_documents(B))
    _build(grown)
    assert tokenised == {name: len(A) + len(B) for name in INDICES}  # only B tokenised by the update
    whole = _workspace(tmp_path / "whole", A, B)
    _build(whole)
    _assert_same_indices(grown, whole)
    for name in INDICES:  # and the kept counts are the ones a full build keeps
        _assert_same(_content_of_file(grown.artifact_path(f"{name}.terms.npz")),
                     _content_of_file(whole.artifact_path(f"{name}.terms.npz")))


def _content_of_file(path: Path) -> dict[str, Any]:
    with np.load(path, allow_pickle=False) as saved:
        return {key: saved[key] for key in saved.files}


def test_deleting_the_added_passages_equals_a_build_over_the_rest(tmp_path: Path, tokenised: dict[str, int]) -> None:
    shrunk = _workspace(tmp_path / "shrunk", A, B)
    _build(shrunk)
    shrunk.corpus.delete_documents({doc.id for doc in _documents(B)})
    _build(shrunk)
    assert tokenised == {name: len(A) + len(B) for name in INDICES}  # the delete tokenised nothing
    alone = _workspace(tmp_path / "alone", A)
    _build(alone)
    _assert_same_indices(shrunk, alone)


def test_a_changed_passage_is_counted_again(tmp_path: Path, tokenised: dict[str, int]) -> None:
    """A new version of a passage replaces the old one (its chunk gets a new id: ids hash
    the title and text): only that chunk is tokenised, the result is a full build's."""
    edited = [*A[:7], {"title": A[7]["title"], "text": "Zanzibar cloves and the quokka of Rottnest."}, *A[8:]]
    changed = _workspace(tmp_path / "changed", A)
    _build(changed)
    changed.corpus.delete_documents([_documents([A[7]])[0].id])
    ingest(changed, [], make_settings(changed.root), documents=_documents(edited[7:8]))
    _build(changed)
    assert tokenised == {name: len(A) + 1 for name in INDICES}
    whole = _workspace(tmp_path / "whole", edited[:7], edited[8:], edited[7:8])  # the same chunk order
    _build(whole)
    _assert_same_indices(changed, whole)
    assert TfidfIndex.load(changed.artifact_path("chunks.tfidf")).search("quokka Zanzibar", 1)[0][0] \
        == changed.corpus.chunk_ids()[-1]


@pytest.mark.parametrize("damage", ["garbage", "cut", "other tokeniser", "lost"])
def test_a_damaged_counts_file_gives_a_full_build(tmp_path: Path, tokenised: dict[str, int], damage: str) -> None:
    grown = _workspace(tmp_path / "grown", A)
    _build(grown)
    for name in INDICES:
        path = grown.artifact_path(f"{name}.terms.npz")
        if damage == "garbage":
            path.write_bytes(b"not an npz file")
        elif damage == "cut":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        elif damage == "other tokeniser":
            counts = load_term_counts(path, INDICES[name][1].signature())
            assert counts is not None
            save_term_counts(path, replace(counts, signature="another tokeniser"))
        else:
            path.unlink()
    ingest(grown, [], make_settings(grown.root), documents=_documents(B))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a lost economy file is no error and says nothing
        _build(grown)
    assert tokenised == {name: 2 * len(A) + len(B) for name in INDICES}  # everything again
    whole = _workspace(tmp_path / "whole", A, B)
    _build(whole)
    _assert_same_indices(grown, whole)


def test_a_build_killed_before_its_counts_are_saved_resumes_to_the_same_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The artifact is written, the counts file not (the older one stays), no manifest entry:
    the next build updates from the older counts to the same result."""
    import unirag.index.chunks as chunks  # the builders save their counts through this name

    grown = _workspace(tmp_path / "grown", A)
    _build(grown)
    ingest(grown, [], make_settings(grown.root), documents=_documents(B))

    def killed(path: Path, counts: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(chunks, "save_term_counts", killed)
        for build, _ in INDICES.values():
            with pytest.raises(KeyboardInterrupt):
                build(grown)
    assert grown.manifest.stale_artifacts().keys() >= {"chunk_bm25", "chunk_tfidf"}
    _build(grown)
    whole = _workspace(tmp_path / "whole", A, B)
    _build(whole)
    _assert_same_indices(grown, whole)


def test_deleting_every_passage_leaves_empty_indices(tmp_path: Path) -> None:
    ids = [f"c{i}" for i in range(len(A))]
    texts = [f"{p['title']}\n{p['text']}" for p in A]
    for index in (TfidfIndex, Bm25Index):
        before = count_terms(ids, lambda rows: [texts[i] for i in rows], index.tokenize, index.signature())
        empty = count_terms([], lambda rows: [], index.tokenize, index.signature(), before)
        assert empty.ids == [] and empty.terms == [] and len(empty.columns) == 0
        directory = tmp_path / index.__name__
        index.from_counts(empty).save(directory)
        assert index.load(directory).search("Journal of Mathematical Physics", 3) == []
        full = tmp_path / f"{index.__name__}.full"
        index.build([], []).save(full)
        _assert_same(_content(directory), _content(full))
    stop_words_only = Bm25Index.build(["the of and", "a an"], ["c0", "c1"])  # bm25s itself fails here
    stop_words_only.save(tmp_path / "stop")
    assert Bm25Index.load(tmp_path / "stop").search("the quokka", 2) == []
