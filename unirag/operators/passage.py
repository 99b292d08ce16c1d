"""Passage-graph operators: KGP's traversal (survey Table 3 KGP: node TF-IDF on the passage graph).

* ``kgp.traverse`` (KGP, Wang et al. 2024 "Knowledge Graph Prompting for
  Multi-Document QA"; survey §6.1 node TF-IDF): TF-IDF seed passages, then
  rounds of expansion along the passage graph (``chunk_links:pg``: chunks
  sharing entities), each neighbour ranked by embedding similarity to the
  question, or (``agent: true``) to the evidence the LLM says is still
  missing, as KGP's traversal agent does.

The passage graph is a sparse matrix over the chunk-vector rows, built once
per process from the ``chunk_links`` table (``Resources.derived``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from unirag.errors import MethodError
from unirag.graph.graph_store import GraphStore
from unirag.operators.context import ContextItem, QueryState, Resources
from unirag.operators.hierarchy import check_dim, check_model, loaded, question_vector, vector_rows
from unirag.operators.node import rank
from unirag.operators.spec import Count, CountOrZero, OperatorSpec
from unirag.text.replies import first_object, strip_think
from unirag.text.tokenizer import get_tokenizer

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

PROMPT = "kgp_next"
MAX_PASSAGE_TOKENS = 400  # passage text shown to the traversal agent
MAX_EVIDENCE_CHARS = 1000


@dataclass(frozen=True)
class PassageGraph:
    """Chunks (rows of ``chunk_vectors``) and their passage-graph links.

    ``adjacency`` (C x C, CSR, symmetric): the number of entities two chunks
    share, for every pair linked in the ``chunk_links`` table.
    """

    ids: list[str]
    row: dict[str, int]
    vectors: np.ndarray  # (C, d), memory-mapped, L2-normalised rows
    adjacency: csr_matrix


def passage_graph(resources: Resources, kind: str = "pg") -> PassageGraph:
    """The passage graph of ``chunk_links:<kind>`` over the chunk-vector rows, built once per process."""
    from scipy.sparse import coo_matrix

    def build() -> PassageGraph:
        stored = vector_rows(resources, "chunk_vectors")
        links = GraphStore(resources.workspace).load_chunk_links(kind)
        a = np.array([stored.row.get(x, -1) for x, _, _ in links], dtype=np.int64)
        b = np.array([stored.row.get(y, -1) for _, y, _ in links], dtype=np.int64)
        shared = np.array([float(n) for _, _, n in links], dtype=np.float64)
        keep = (a >= 0) & (b >= 0) & (a != b)
        a, b, shared = a[keep], b[keep], shared[keep]
        n = len(stored.ids)
        adjacency = coo_matrix((np.concatenate([shared, shared]), (np.concatenate([a, b]), np.concatenate([b, a]))),
                               shape=(n, n)).tocsr()
        adjacency.sum_duplicates()
        return PassageGraph(stored.ids, stored.row, stored.vectors, adjacency)

    return loaded(resources, f"passage_graph:{kind}", (f"chunk_links:{kind}", "chunk_vectors"), build)


def _evidence_text(reply: str) -> str:
    """The agent's description of the missing evidence (think blocks, JSON wrappers and fences dropped)."""
    text = strip_think(reply or "").strip().strip("`").strip()
    obj = first_object(text) if "{" in text else None
    if obj:
        values = [v for v in obj.values() if isinstance(v, str) and v.strip()]
        if values:
            text = values[0]
    return " ".join(text.split())[:MAX_EVIDENCE_CHARS]


def _evidence_vector(state: QueryState, chunk_id: str) -> tuple[np.ndarray | None, str]:
    """Ask the LLM (prompt ``kgp_next``) what is still missing after ``chunk_id``;
    the embedding of question + reply, or (None, "") when the reply is empty."""
    chunk = state.resources.workspace.corpus.get_chunks([chunk_id]).get(chunk_id)
    passage = get_tokenizer().truncate(chunk.indexed_text if chunk else "", MAX_PASSAGE_TOKENS)
    prompt = state.prompt(PROMPT)
    request = state.request(prompt, "query.kgp.traverse", max_tokens=128, question=state.question, passage=passage)
    evidence = _evidence_text(state.models.chat.complete(request).text)
    if not evidence:
        return None, ""
    vector = np.asarray(state.models.embedder.embed([f"{state.question}\n{evidence}"], stage="query.embed").vectors[0],
                        dtype=np.float32)
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm > 0 else None), evidence


def _tfidf_seeds(state: QueryState, k: int) -> list[tuple[str, float]]:
    """The top-k chunks by TF-IDF cosine to the question (positive scores only), ties by id."""
    index = state.resources.chunk_tfidf
    if k <= 0 or index.matrix.shape[1] == 0 or not index.ids:
        return []
    scores = (index.matrix @ index.query_vector(state.question).T).toarray().ravel()
    return rank(np.arange(len(index.ids)), scores, index.ids, k, positive_only=True)


def kgp_traverse(
    state: QueryState, top_k: Count = 4, seeds: Count | None = None, neighbors: Count = 3, hops: CountOrZero = 2,
    agent: bool = False,
) -> list[ContextItem]:
    """KGP retrieval: TF-IDF seeds, then traversal of the passage graph (KGP; survey Table 3 node TF-IDF).

    ``top_k`` is the budget: at most that many chunks in all. Seeds: the
    ``seeds`` best chunks by TF-IDF (``chunk_tfidf``; default
    ``max(1, top_k // (neighbors + 1))``, so each seed has room for its
    neighbours, as KGP's ``k // k_nei``). Then ``hops`` rounds: for each
    chunk reached in the previous round (best first), its passage-graph
    neighbours (``chunk_links:pg``) not yet retrieved are ranked by cosine of
    their embedding (``chunk_vectors``) to a guide vector, and the best
    ``neighbors`` are added, until the budget is spent. The guide is the
    question's embedding, or with ``agent: true`` (KGP's traversal agent) the
    embedding of the question plus what the LLM says is still missing after
    reading that chunk (prompt ``kgp_next``; one call per expanded chunk; an
    empty reply falls back to the question). The traversal may end under
    budget when the graph around the seeds is exhausted.

    Items in retrieval order (seeds, then each round); scores: TF-IDF cosine
    for seeds, the guide cosine for the others; provenance ``hop`` (0 =
    seed), ``via`` (the chunk it was reached from), ``guide`` (``tfidf``,
    ``question`` or ``evidence``). Writes ``state.chunks``.
    """
    if neighbors < 1:
        raise MethodError(f"kgp.traverse: neighbors must be at least 1, not {neighbors}")
    if hops < 0:
        raise MethodError(f"kgp.traverse: hops must be at least 0, not {hops}")
    if seeds is not None and seeds < 1:
        raise MethodError(f"kgp.traverse: seeds must be at least 1, not {seeds}")
    guide = question_vector(state, "kgp.traverse")
    state.chunks = {}
    if top_k <= 0:
        return []
    resources = state.resources
    check_model(resources, "chunk_vectors", state.models.embedder.name)
    graph = passage_graph(resources)
    if guide is not None:
        check_dim(graph.vectors, guide, "chunk_vectors")
    n_seeds = min(top_k, seeds if seeds is not None else max(1, top_k // (neighbors + 1)))

    retrieved: list[tuple[str, float, dict[str, Any]]] = []
    visited: set[int] = set()
    frontier: list[int] = []
    for chunk_id, score in _tfidf_seeds(state, n_seeds):
        row = graph.row.get(chunk_id)
        if row is not None and row not in visited:
            visited.add(row)
            frontier.append(row)
            retrieved.append((chunk_id, score, {"hop": 0, "via": None, "guide": "tfidf"}))

    for hop in range(1, hops + 1):
        reached: list[int] = []
        for source in frontier:
            room = min(neighbors, top_k - len(retrieved))
            if room <= 0:
                break
            candidates = np.array([n for n in graph.adjacency[source].indices.tolist() if n not in visited],
                                  dtype=np.int64)
            if not candidates.size:
                continue
            vector, how = guide, "question"
            if agent:
                evidence, text = _evidence_vector(state, graph.ids[source])
                if evidence is not None:
                    vector, how = evidence, "evidence"
            if vector is None:
                scores = np.zeros(candidates.size)
            else:
                order = np.argsort(candidates)  # ascending rows: a sequential read of the memory map
                scores = np.empty(candidates.size)
                scores[order] = np.asarray(graph.vectors[candidates[order]], dtype=np.float32) @ vector
            names = np.array([graph.ids[c] for c in candidates.tolist()])
            for i in np.lexsort((names, -scores))[:room].tolist():
                row = int(candidates[i])
                visited.add(row)
                reached.append(row)
                provenance = {"hop": hop, "via": graph.ids[source], "guide": how}
                if how == "evidence":
                    provenance["evidence"] = text
                retrieved.append((graph.ids[row], float(scores[i]), provenance))
        frontier = reached
        if not frontier or len(retrieved) >= top_k:
            break

    items = {item.id: item for item in resources.chunk_items([(c, s) for c, s, _ in retrieved], "kgp.traverse")}
    out = []
    for chunk_id, score, provenance in retrieved:
        item = items.get(chunk_id)
        if item is not None:
            item.provenance.update(provenance)
            out.append(item)
    state.chunks = {item.id: item.score for item in out}
    return out


OPERATORS = (
    OperatorSpec(
        "kgp.traverse", "chunk", kgp_traverse,
        "KGP: TF-IDF seed chunks, then passage-graph neighbours ranked by similarity to the question "
        "(or to the LLM's next-evidence text)",
        requires=("chunk_tfidf", "chunk_links:pg", "chunk_vectors"), needs=("embedding",),
    ),
)
