"""HNSW vector index (hnswlib) over L2-normalised vectors, inner-product space.

Labels are row numbers of the artifact's vectors when the index is built
whole. After an in-place update (:meth:`HnswIndex.updated`: rows added,
removed rows marked deleted, as hnswlib allows) labels and rows differ, and
the label -> row map is saved beside the index with the row -> id map.
Scores returned are cosine similarities (1 - hnswlib's distance).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from unirag.errors import embedding_mismatch  # noqa: F401 (re-exported: its users import it here)
from unirag.workspace import atomic_path, atomic_write_bytes

TIE_MARGIN = 8  # rows fetched past k so that equal scores at the k-th place are ordered by id
# A row whose vector moved by at most this much (1 - cosine) keeps its place in the graph and
# gets the new vector: derived vectors (HyGRAG's propagated embeddings) shift slightly for
# thousands of rows after a small change, and relinking them would cost a rebuild. Keeping
# links for moves up to 0.05 leaves recall@10 where a whole build has it and saves most of the
# relinking (the numbers: README, Performance, "Measurements behind code decisions").
RELINK_TOLERANCE = 0.05


class VectorIndex(Protocol):
    """What a query needs of a vector index, whichever store holds it: :class:`HnswIndex`
    (a file, the SQLite store) or :class:`~unirag.index.pgvector_index.PgVectorIndex`
    (a pgvector table, the PostgreSQL store). Both answer the same top-k, equal scores by id."""

    ids: list[str]  # row -> id, the artifact's row order
    dim: int
    label: str

    def __len__(self) -> int: ...

    def search(self, query: np.ndarray, k: int) -> list[list[tuple[str, float]]]: ...

    def labelled(self, label: str) -> VectorIndex: ...


def read_ids_file(path: Path) -> dict[str, Any]:
    """The ``.ids.json`` beside a vector index: ``dim``, ``ids`` (row -> id), and ``labels``
    (label -> row) after an in-place hnswlib update."""
    return json.loads(path.read_text())


def write_ids_file(path: Path, ids: list[str], dim: int, labels: list[int] | None = None) -> None:
    meta: dict[str, Any] = {"dim": dim, "ids": ids}
    if labels is not None:
        meta["labels"] = labels
    atomic_write_bytes(path, json.dumps(meta).encode())


class HnswIndex:
    """Build once, save to the workspace, load once per process, search many times."""

    def __init__(self, index: Any, ids: list[str], dim: int, label_rows: list[int] | None = None,
                 label: str = "vectors") -> None:
        self._index = index
        self.ids = ids  # row -> id, the artifact's row order
        self.dim = dim
        # label -> row (-1: deleted); None when labels are rows (a whole build)
        self.label_rows = label_rows
        self._label_ids = ids if label_rows is None else [ids[row] if row >= 0 else "" for row in label_rows]
        self.label = label  # the artifact's name, for messages
        self.update_counts: dict[str, int] | None = None  # what an in-place update did (None: built whole)

    @classmethod
    def build(cls, vectors: np.ndarray, ids: list[str], m: int = 16, ef_construction: int = 200) -> HnswIndex:
        import hnswlib

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(ids) != vectors.shape[0]:
            raise ValueError(f"{len(ids)} ids for {vectors.shape[0]} vectors")
        dim = int(vectors.shape[1]) if vectors.ndim == 2 and vectors.shape[0] else 1
        index = hnswlib.Index(space="ip", dim=dim)
        index.init_index(max_elements=max(1, len(ids)), ef_construction=ef_construction, M=m, random_seed=42)
        if len(ids):
            # one thread: hnswlib's parallel insertion links the graph in thread order, so two
            # builds of the same vectors differed and so did a few searches (the dev-set tables
            # moved by up to 0.02 between identical runs); one thread gives the same graph every time
            index.add_items(vectors, np.arange(len(ids)), num_threads=1)
        return cls(index, list(ids), dim)

    @staticmethod
    def ids_path(path: Path) -> Path:
        """The row -> id map saved beside the index at ``path``."""
        return path.with_suffix(".ids.json")

    @classmethod
    def updated(cls, path: Path, old_ids: list[str], old_vectors: np.ndarray, ids: list[str], vectors: np.ndarray,
                max_deleted_share: float = 0.25, relink_tolerance: float = RELINK_TOLERANCE,
                match: RowMatch | None = None) -> HnswIndex | None:
        """The index saved at ``path`` (over ``old_ids``/``old_vectors``) brought to ``ids``/``vectors``
        in place: rows whose id and vector are unchanged keep their label, rows whose vector moved
        by at most ``relink_tolerance`` (cosine) keep their label and links with the new vector
        written over the old, a new row whose vector is byte-identical to a dropped row's takes
        over that row's label (a renamed community: its id derives from its members, its summary
        is the same), the others are marked deleted and the new ones added. ``match`` (what the
        caller already knows of old rows per new row) spares comparing rows it knows unchanged.
        None when a whole build is the better choice: no usable saved index, another dimension,
        or deleted labels would pass ``max_deleted_share`` (they still cost search time, so the
        index is compacted by rebuilding it then). ``update_counts`` says what was done."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        try:
            meta = read_ids_file(cls.ids_path(path))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict):  # a damaged map: the caller builds whole
            return None
        label_rows = meta.get("labels")
        if (meta.get("ids") != list(old_ids) or not len(ids) or meta.get("dim") != vectors.shape[1]
                or old_vectors.shape[0] != len(old_ids)):
            return None
        plan = LabelPlan.of(label_rows, old_vectors, vectors, match or RowMatch.of(old_ids, ids), relink_tolerance)
        if plan.too_many_deleted(max_deleted_share):
            return None
        try:  # loaded with room for every label at once: growing it after would copy the whole graph
            old = cls.load(path, capacity=len(plan.labels), meta=meta)
        except (OSError, ValueError, RuntimeError, KeyError):
            return None
        index = old._index
        if plan.moved.any():
            index = _with_vectors(index, plan.moved_labels, vectors[plan.moved])
            if index is None:
                return None
        if index.get_max_elements() < max(1, len(plan.labels)):
            index.resize_index(max(1, len(plan.labels)))
        for label in plan.dropped.tolist():
            index.mark_deleted(int(label))
        if len(plan.added):
            index.add_items(vectors[plan.added], plan.fresh, num_threads=1)  # one thread: the same graph every time
        updated = cls(index, list(ids), old.dim, plan.labels.tolist(), old.label)
        updated.update_counts = plan.counts
        return updated

    def save(self, path: Path) -> None:
        with atomic_path(path) as tmp:
            self._index.save_index(str(tmp))
        write_ids_file(self.ids_path(path), self.ids, self.dim, self.label_rows)

    @classmethod
    def load(cls, path: Path, capacity: int = 0, meta: dict[str, Any] | None = None) -> HnswIndex:
        """The saved index, with room for at least ``capacity`` elements (an update's count);
        ``meta``: its ids file, when the caller has read it already."""
        import hnswlib

        meta = meta if meta is not None else read_ids_file(cls.ids_path(path))
        labels = meta.get("labels")
        index = hnswlib.Index(space="ip", dim=meta["dim"])
        stored = len(labels if labels is not None else meta["ids"])
        index.load_index(str(path), max_elements=max(1, stored, capacity))
        return cls(index, meta["ids"], meta["dim"], labels, path.stem)

    def labelled(self, label: str) -> HnswIndex:
        """This index, named ``label`` (its artifact) in messages."""
        self.label = label
        return self

    @staticmethod
    def load_ids(path: Path) -> list[str]:
        """The row -> id map of a saved index, without loading the index."""
        return list(read_ids_file(HnswIndex.ids_path(path))["ids"])

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """Top-k (id, cosine) per query row, best first."""
        query, k, fetch = search_plan(self, query, k)
        if k <= 0:
            return [[] for _ in range(query.shape[0])]
        self._index.set_ef(max(64, 2 * fetch))
        labels, distances = self._index.knn_query(query, k=fetch)
        return [
            ties_by_id(((self._label_ids[int(label)], float(1.0 - dist)) for label, dist in zip(row_l, row_d, strict=True)),
                       k)
            for row_l, row_d in zip(labels, distances, strict=True)
        ]


@dataclass(frozen=True)
class RowMatch:
    """Each new row's row in the previous build (-1: a new id), and the new rows already known
    to hold their old row's exact vector (a text artifact knows them from its text digests:
    their vectors were copied from the old ones), which an update then need not compare."""

    old_rows: np.ndarray  # int64 per new row
    known_same: np.ndarray | None = None  # bool per new row; None: compare every matched row

    @classmethod
    def of(cls, old_ids: Sequence[str], ids: Sequence[str], known_same: np.ndarray | None = None) -> RowMatch:
        old_row = {item: row for row, item in enumerate(old_ids)}
        return cls(np.fromiter((old_row.get(item, -1) for item in ids), dtype=np.int64, count=len(ids)), known_same)

    def compared(self, old_vectors: np.ndarray, vectors: np.ndarray,
                 tolerance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(same, moved) per new row: its old row's vector is the new one, or within ``tolerance``
        (1 - cosine) of it (None: none moved). Rows ``known_same`` are not read again."""
        same = np.zeros(len(self.old_rows), dtype=bool)
        moved = np.zeros(len(self.old_rows), dtype=bool)
        check = self.old_rows >= 0
        if self.known_same is not None:
            same[self.known_same] = True
            check &= ~self.known_same
        rows = np.flatnonzero(check)
        before, after = old_vectors[self.old_rows[rows]], vectors[rows]
        equal = np.all(before == after, axis=1)
        same[rows[equal]] = True
        if tolerance is not None:
            moved[rows[~equal & (1.0 - np.einsum("ij,ij->i", before, after) <= tolerance)]] = True
        return same, moved


@dataclass(frozen=True)
class LabelPlan:
    """How an index whose labels are not rows (hnswlib; a pgvector table) is brought to new rows
    in place: a row whose id and vector are unchanged keeps its label, so does one whose vector
    moved a little (with the new vector), a new row with a dropped row's exact vector takes over
    that row's label (a renamed community), the other dropped labels are deleted and the other
    new rows get fresh labels after the old ones."""

    labels: np.ndarray  # label -> new row (-1: deleted), every old label then the fresh ones
    dropped: np.ndarray  # live old labels to delete, ascending
    added: np.ndarray  # new rows to insert under fresh labels, in row order
    moved: np.ndarray  # bool per new row: its label kept, its vector rewritten
    moved_labels: np.ndarray  # the labels of the moved rows, in row order
    counts: dict[str, int]  # kept, moved, relabelled, added, deleted: the manifest's ``update``

    @classmethod
    def of(cls, old_label_rows: list[int] | None, old_vectors: np.ndarray, vectors: np.ndarray, match: RowMatch,
           tolerance: float | None) -> LabelPlan:
        """The plan from the old label -> row map (None: labels are rows), the old and new
        vectors, and which old row each new row continues; ``tolerance`` (None: exact only)
        as in :meth:`RowMatch.compared`."""
        old_vectors = np.asarray(old_vectors)  # a memmap's rows gathered as a plain array: no per-call wrapping
        n_old = old_vectors.shape[0]
        same, moved = match.compared(old_vectors, vectors, tolerance)
        kept = same | moved
        old_labels = np.asarray(old_label_rows if old_label_rows is not None else range(n_old), dtype=np.int64)
        label_of_row = np.full(n_old, -1, dtype=np.int64)
        live = np.flatnonzero(old_labels >= 0)
        label_of_row[old_labels[live]] = live
        still_used = np.zeros(n_old, dtype=bool)
        still_used[match.old_rows[kept]] = True
        dropped = np.sort(label_of_row[~still_used])
        added = np.flatnonzero(~kept)
        taken, takers = identical_rows(old_vectors[old_labels[dropped]], vectors[added])
        relabelled, renamed = dropped[taken], added[takers]
        dropped, added = np.delete(dropped, taken), np.delete(added, takers)
        labels = np.full(len(old_labels) + len(added), -1, dtype=np.int64)
        labels[label_of_row[match.old_rows[kept]]] = np.flatnonzero(kept)
        labels[relabelled] = renamed
        labels[len(old_labels):] = added
        counts = {"kept": int(np.count_nonzero(same)), "moved": int(np.count_nonzero(moved)),
                  "relabelled": int(len(renamed)), "added": int(len(added)), "deleted": int(len(dropped))}
        return cls(labels, dropped, added, moved, label_of_row[match.old_rows[moved]], counts)

    @property
    def fresh(self) -> np.ndarray:
        """The labels of the ``added`` rows."""
        return np.arange(len(self.labels) - len(self.added), len(self.labels), dtype=np.int64)

    def too_many_deleted(self, max_deleted_share: float) -> bool:
        """Deleted labels past ``max_deleted_share`` of all: time to build whole (compacted)."""
        return np.count_nonzero(self.labels < 0) > max_deleted_share * len(self.labels)


def identical_rows(dropped: np.ndarray, added: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices into ``dropped``, indices into ``added``) of pairs with byte-identical vectors:
    each added row takes the first free dropped row of its bytes, in order, so the pairing (and
    the index written) is the same on every run."""
    free: dict[bytes, list[int]] = {}
    for at in range(len(dropped) - 1, -1, -1):
        free.setdefault(dropped[at].tobytes(), []).append(at)  # reversed: pop() gives the first
    taken, takers = [], []
    for at, row in enumerate(added):
        slots = free.get(row.tobytes())
        if slots:
            taken.append(slots.pop())
            takers.append(at)
    return np.array(taken, dtype=np.int64), np.array(takers, dtype=np.int64)


def search_plan(index: VectorIndex, query: np.ndarray, k: int) -> tuple[np.ndarray, int, int]:
    """(query rows as float32, k within the index's size, rows to fetch) of a search, the query's
    dimension checked. Equal scores are ordered by id: which of several tied rows an approximate
    index returns, and in what order, depends on how it was built (threads, in-place updates, the
    store), and a query must not. A few rows past k are fetched so that a tie at the k-th place is
    settled too."""
    query = np.atleast_2d(np.asarray(query, dtype=np.float32))
    k = min(k, len(index))
    if k > 0 and query.shape[1] != index.dim:
        raise embedding_mismatch(index.label, f"{index.dim}-dimension vectors", f"{query.shape[1]}-dimension vectors")
    return query, k, min(len(index), k + TIE_MARGIN)


def ties_by_id(hits: Iterable[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    """The k best (id, score) hits, equal scores by id."""
    return sorted(hits, key=lambda hit: (-hit[1], hit[0]))[:k]


def _with_vectors(index: Any, labels: np.ndarray, vectors: np.ndarray) -> Any | None:
    """A copy of hnswlib ``index`` whose elements ``labels`` hold ``vectors``, links unchanged.

    hnswlib has no call to replace a vector without relinking it, so this goes through its
    pickled state (level-0 block: each element's links, then its vector); None when the state
    is not the layout known here (another hnswlib), and the caller builds whole instead."""
    import hnswlib

    (state,) = index.__getstate__()
    dim = int(state.get("dim", -1))
    if state.get("ser_version") != 1 or state.get("space") != "ip" or dim != vectors.shape[1]:
        return None
    count, size, offset = state["cur_element_count"], state["size_data_per_element"], state["offset_data"]
    if offset + 4 * dim > size or state["data_level0"].size < count * size:
        return None
    table = state["data_level0"].view(np.uint8)[: count * size].reshape(count, size)
    external, internal = state["label_lookup_external"], state["label_lookup_internal"]
    order = np.argsort(external)
    at = np.searchsorted(external[order], labels)
    if np.any(at >= len(order)) or np.any(external[order][np.minimum(at, len(order) - 1)] != labels):
        return None
    rows = internal[order[at]].astype(np.int64)
    table[rows, offset:offset + 4 * dim] = np.ascontiguousarray(vectors, dtype=np.float32).view(np.uint8)
    copy = hnswlib.Index.__new__(hnswlib.Index)
    copy.__setstate__((state,))
    return copy
