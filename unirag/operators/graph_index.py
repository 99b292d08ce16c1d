"""The merged graph as sparse matrices, loaded once per process for every operator.

Operators never walk Python dicts of the whole graph per query: they index
rows of these arrays and multiply sparse matrices (survey §6.1 operators on
the KG/TKG/RKG). Rows follow ``entity_ids`` / ``rel_ids`` / ``chunk_ids``.

* ``adjacency`` (n x n, CSR, symmetric): relationship weights summed per pair.
* ``entity_rel`` (n x R, CSR, 0/1): which relationships touch an entity.
* ``entity_chunks`` (n x C, CSR, 0/1): the chunks an entity was extracted from.
* ``rel_chunks`` (R x C, CSR, 0/1): the chunks a relationship was extracted from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, repeat
from typing import Any

import numpy as np

from unirag.graph.graph_store import GraphColumns


def _incidence(rows: list[list[str]], column: dict[str, int], n_cols: int) -> Any:
    """CSR 0/1 matrix whose row i marks the columns of the keys ``rows[i]`` (keys without a
    column are skipped). The keys are mapped in one pass over all rows, not a list per row."""
    from scipy.sparse import csr_matrix

    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    mapped = np.fromiter(map(column.get, chain.from_iterable(rows), repeat(-1)), dtype=np.int64,
                         count=int(lengths.sum()))
    kept = mapped >= 0
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(np.bincount(np.repeat(np.arange(len(rows)), lengths)[kept], minlength=len(rows)))
    indices = mapped[kept]
    data = np.ones(len(indices), dtype=np.float32)
    matrix = csr_matrix((data, indices, indptr), shape=(len(rows), n_cols))
    matrix.sum_duplicates()
    matrix.data[:] = 1.0
    return matrix


@dataclass
class GraphIndex:
    entity_ids: list[str]
    names: list[str]
    types: list[str]
    descriptions: list[str]
    rel_ids: list[str]
    rel_src: np.ndarray  # entity rows
    rel_dst: np.ndarray
    rel_weight: np.ndarray
    rel_relation: list[str]
    rel_description: list[str]
    rel_keywords: list[list[str]]
    chunk_ids: list[str]
    adjacency: Any
    entity_rel: Any
    entity_chunks: Any
    rel_chunks: Any
    entity_row: dict[str, int] = field(default_factory=dict)
    rel_row: dict[str, int] = field(default_factory=dict)
    chunk_row: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.entity_row = {entity_id: i for i, entity_id in enumerate(self.entity_ids)}
        self.rel_row = {rel_id: i for i, rel_id in enumerate(self.rel_ids)}
        self.chunk_row = {chunk_id: i for i, chunk_id in enumerate(self.chunk_ids)}

    @classmethod
    def from_graph(cls, graph: Any, chunk_ids: list[str]) -> GraphIndex:
        """Build from a :class:`~unirag.graph.merge.MergedGraph` and the corpus's chunk ids."""
        return cls.from_columns(GraphColumns.of_graph(graph), chunk_ids)

    @classmethod
    def from_columns(cls, columns: GraphColumns, chunk_ids: list[str]) -> GraphIndex:
        """Build from the graph's columns (:meth:`GraphStore.load_columns`: a query's load)
        and the corpus's chunk ids."""
        from scipy.sparse import coo_matrix

        entity_ids = columns.entity_ids
        row = {entity_id: i for i, entity_id in enumerate(entity_ids)}
        chunk_row = {chunk_id: i for i, chunk_id in enumerate(chunk_ids)}
        n_rels = len(columns.rel_ids)
        src = np.fromiter(map(row.__getitem__, columns.rel_sources), dtype=np.int64, count=n_rels)
        dst = np.fromiter(map(row.__getitem__, columns.rel_targets), dtype=np.int64, count=n_rels)
        weight = np.array(columns.rel_weights, dtype=np.float64)
        n = len(entity_ids)
        adjacency = coo_matrix(
            (np.concatenate([weight, weight]), (np.concatenate([src, dst]), np.concatenate([dst, src]))),
            shape=(n, n),
        ).tocsr()
        entity_rel = coo_matrix(
            (np.ones(2 * n_rels, dtype=np.float32),
             (np.concatenate([src, dst]), np.concatenate([np.arange(n_rels)] * 2))),
            shape=(n, n_rels),
        ).tocsr()
        entity_rel.data[:] = 1.0
        return cls(
            entity_ids=list(entity_ids),
            names=list(columns.names),
            types=list(columns.types),
            descriptions=list(columns.descriptions),
            rel_ids=list(columns.rel_ids),
            rel_src=src,
            rel_dst=dst,
            rel_weight=weight,
            rel_relation=list(columns.relations),
            rel_description=list(columns.rel_descriptions),
            rel_keywords=[list(keywords) for keywords in columns.rel_keywords],
            chunk_ids=list(chunk_ids),
            adjacency=adjacency,
            entity_rel=entity_rel,
            entity_chunks=_incidence(columns.entity_chunks, chunk_row, len(chunk_ids)),
            rel_chunks=_incidence(columns.rel_chunks, chunk_row, len(chunk_ids)),
        )

    @property
    def n_entities(self) -> int:
        return len(self.entity_ids)

    @cached_property
    def transition(self) -> Any:
        """Row-stochastic transition matrix ``D^-1 A`` (rows without edges stay zero)."""
        return transition_matrix(self.adjacency)

    def entity_text(self, row: int) -> str:
        description = " ".join(self.descriptions[row].split())
        return f"{self.names[row]}: {description}" if description else self.names[row]

    def rel_text(self, row: int) -> str:
        text = f"{self.names[self.rel_src[row]]} {self.rel_relation[row]} {self.names[self.rel_dst[row]]}".strip()
        description = " ".join(self.rel_description[row].split())
        return f"{text}: {description}" if description else text

    def rows_of(self, entity_ids: list[str]) -> np.ndarray:
        """Rows of the known ids, in order (unknown ids are skipped)."""
        return np.array([self.entity_row[e] for e in entity_ids if e in self.entity_row], dtype=np.int64)


def transition_matrix(adjacency: Any) -> Any:
    """Row-stochastic ``D^-1 A`` of a weighted adjacency (rows without edges stay zero)."""
    from scipy.sparse import diags

    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    return (diags(inverse) @ adjacency).tocsr()


def personalized_pagerank(
    graph: GraphIndex, restart: np.ndarray, damping: float = 0.5, iterations: int = 100, tolerance: float = 1e-8
) -> np.ndarray:
    """Personalised PageRank over the entity graph (:func:`pagerank_power`)."""
    if restart.shape != (graph.n_entities,):
        raise ValueError(f"restart vector has {restart.shape[0]} entries for {graph.n_entities} entities")
    return pagerank_power(graph.transition, restart, damping, iterations, tolerance)


def pagerank_power(
    transition: Any, restart: np.ndarray, damping: float = 0.5, iterations: int = 100, tolerance: float = 1e-8
) -> np.ndarray:
    """Personalised PageRank by sparse power iteration (no per-node Python loop).

    ``transition`` is a row-stochastic matrix (:func:`transition_matrix`) of any graph
    (the entity graph; HippoRAG 2's and LinearRAG's graphs of entities and passages);
    ``restart`` (n,) is the restart distribution (normalised here); mass that reaches a
    node without edges returns to the restart distribution, so the scores always sum to
    1. ``damping`` is the probability of following an edge (HippoRAG uses 0.5).
    """
    return pagerank_transposed(transition.T.tocsr(), restart, damping, iterations, tolerance)


def pagerank_transposed(
    transposed: Any, restart: np.ndarray, damping: float = 0.5, iterations: int = 100, tolerance: float = 1e-8
) -> np.ndarray:
    """:func:`pagerank_power` given the transition matrix already transposed (CSR): a caller
    that walks one graph for every query transposes it once per process."""
    n = transposed.shape[0]
    restart = np.asarray(restart, dtype=np.float64).reshape(-1)
    if restart.shape != (n,):
        raise ValueError(f"restart vector has {restart.shape[0]} entries for {n} nodes")
    total = restart.sum()
    if n == 0 or total <= 0:
        return np.zeros(n)
    restart = restart / total
    scores = restart.copy()
    for _ in range(iterations):
        walked = damping * (transposed @ scores)
        updated = walked + (1.0 - walked.sum()) * restart  # restart and dangling mass
        if np.abs(updated - scores).sum() < tolerance:
            scores = updated
            break
        scores = updated
    return scores
