"""Node operators (survey §6.1, node type): VDB, RelNode, PPR, Agent, Onehop, Link, TF-IDF.

Each reads candidate maps of the :class:`QueryState` (``entities``,
``relationships``, ``question_entities``, ...) and writes its own map, best
first, ties broken by id. Scores over the graph are numpy / scipy sparse
operations on the rows of the few candidates, never a Python loop over the
whole graph. Operators that score graph elements (RelNode, PPR, Onehop,
TF-IDF) keep every scored candidate when ``top_k <= 0``.

The helpers at the top (ranking, seed weights, the LLM selection of the
Agent operators) are shared with :mod:`unirag.operators.relationship`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import numpy as np
from pydantic import Field

from unirag.errors import MethodError
from unirag.operators.context import ContextItem, QueryState
from unirag.operators.graph_index import personalized_pagerank
from unirag.operators.spec import Count, CountOrZero, OperatorSpec
from unirag.text.replies import first_list, first_object

if TYPE_CHECKING:
    from unirag.operators.graph_index import GraphIndex

EntityIndex = Literal["entity_vectors", "entity_name_vectors"]
QuerySource = Literal["question", "keywords_low", "keywords_high"]
ENTITY_INDICES: tuple[str, ...] = get_args(EntityIndex)
QUERY_SOURCES: tuple[str, ...] = get_args(QuerySource)


# -- shared helpers ------------------------------------------------------------


def rank(
    rows: np.ndarray, scores: np.ndarray, ids: list[str], k: int,
    tiebreak: np.ndarray | None = None, positive_only: bool = False,
) -> list[tuple[str, float]]:
    """Top-``k`` (id, score) of candidate ``rows`` (``k <= 0``: all), best first.

    Order: score descending, then ``tiebreak`` descending (when given), then id.
    Only the candidates scoring at least the k-th best score are sorted, so the
    cost follows k (plus ties), not the number of candidates.
    """
    rows = np.asarray(rows, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    if positive_only:
        keep = scores > 0
        rows, scores = rows[keep], scores[keep]
        tiebreak = None if tiebreak is None else np.asarray(tiebreak)[keep]
    if rows.size == 0:
        return []
    if 0 < k < rows.size:
        kth = np.partition(-scores, k - 1)[k - 1]
        keep = -scores <= kth
        rows, scores = rows[keep], scores[keep]
        tiebreak = None if tiebreak is None else np.asarray(tiebreak)[keep]
    names = np.array([ids[r] for r in rows.tolist()])
    keys = (names, -np.asarray(tiebreak, dtype=np.float64), -scores) if tiebreak is not None else (names, -scores)
    order = np.lexsort(keys)
    if k > 0:
        order = order[:k]
    return [(ids[int(rows[i])], float(scores[i])) for i in order]


def sort_hits(hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Vector-search hits best first, ties broken by id."""
    return sorted(hits, key=lambda hit: (-hit[1], hit[0]))


def seed_weights(graph: GraphIndex, candidates: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(entity rows, weights) of the candidate entities found in the graph.

    Weights are the candidate scores clipped at 0; when none is positive (all
    candidates scored 0, e.g. by an LLM choice), every seed weighs 1.
    """
    known = [(graph.entity_row[e], s) for e, s in candidates.items() if e in graph.entity_row]
    rows = np.array([r for r, _ in known], dtype=np.int64)
    weights = np.clip(np.array([s for _, s in known], dtype=np.float64), 0.0, None)
    if rows.size and weights.sum() <= 0:
        weights = np.ones(rows.size)
    return rows, weights


def sum_by_column(matrix: Any, rows: np.ndarray, weights: np.ndarray,
                  use_data: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """For the selected ``rows`` of a CSR ``matrix``: (columns reached, sum over
    the rows of weight x entry) — a sparse mat-vec touching only those rows."""
    sub = matrix[rows].tocoo()
    contribution = weights[sub.row] * (sub.data if use_data else 1.0)
    columns, inverse = np.unique(sub.col, return_inverse=True)
    return columns.astype(np.int64), np.bincount(inverse, weights=contribution, minlength=columns.size)


def query_needs(params: dict[str, Any]) -> tuple[str, ...]:
    """The question conversion a VDB operator's ``query`` param needs: the
    question's embedding, or the keywords it embeds itself."""
    return ("embedding",) if params.get("query", "question") == "question" else ("keywords",)


def query_vector(state: QueryState, query: str, operator: str) -> np.ndarray:
    """The vector a VDB operator searches with: the question's embedding, or
    (LightRAG) the low- or high-level keywords joined by ", " and embedded."""
    if query == "question":
        if state.query_vector is None:
            raise MethodError(f"{operator} needs the 'embedding' question conversion")
        return state.query_vector
    if query not in QUERY_SOURCES:
        raise MethodError(f"{operator}: query must be one of {', '.join(QUERY_SOURCES)}, not {query!r}")
    keywords = getattr(state, query)
    if not keywords:
        raise MethodError(f"{operator} with query: {query} needs the 'keywords' question conversion")
    return state.models.embedder.embed([", ".join(keywords)], stage="query.embed").vectors[0]


def check_index(index: str, allowed: tuple[str, ...], operator: str) -> None:
    if index not in allowed:
        raise MethodError(f"{operator}: index must be one of {', '.join(allowed)}, not {index!r}")


_NUMBER = re.compile(r"^\s*[\[(#]?\s*(\d+)\s*[\]).:]?(?:\s|$)")
_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)


def _norm(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text.casefold()).split())


def _reply_items(reply: str) -> list[Any] | None:
    """The list the model chose, from ``{"selected": [...]}`` or a bare list."""
    obj = first_object(reply)
    if obj is not None:
        for key in ("selected", "entities", "relationships", "choices", "ids", "numbers"):
            if isinstance(obj.get(key), list):
                return obj[key]
        lists = [value for value in obj.values() if isinstance(value, list)]
        if lists:
            return lists[0]
    return first_list(reply)


def parse_selection(reply: str, aliases: list[list[str]], k: int) -> list[int]:
    """Candidate positions (0-based) the model chose, in its order, at most ``k``.

    Accepts 1-based numbers (``2``, ``"2"``, ``"[2] Paris"``), ids and names
    (case and punctuation ignored), objects with an ``id``/``name``/``number``;
    without any parsable list, candidates whose name appears in the reply.
    """
    lookup: dict[str, int] = {}
    for position, names in enumerate(aliases):
        for name in names:
            lookup.setdefault(_norm(name), position)
    lookup.pop("", None)
    chosen: list[int] = []

    def add(position: int | None) -> None:
        if position is not None and 0 <= position < len(aliases) and position not in chosen:
            chosen.append(position)

    def resolve(item: Any) -> int | None:
        if isinstance(item, bool):
            return None
        if isinstance(item, (int, float)) and float(item).is_integer():
            return int(item) - 1
        if isinstance(item, dict):
            for key in ("number", "id", "index", "name", "entity", "relationship"):
                if key in item:
                    found = resolve(item[key])
                    if found is not None:
                        return found
            return None
        if isinstance(item, str):
            text = item.strip()
            if _norm(text) in lookup:
                return lookup[_norm(text)]
            match = _NUMBER.match(text)
            if match:
                return int(match.group(1)) - 1
            rest = _norm(re.sub(r"^\s*[\[(#]?\s*\d+\s*[\]).:]?", "", text))
            return lookup.get(rest)
        return None

    items = _reply_items(reply)
    for item in items or []:
        add(resolve(item))
    if not chosen and items is None:  # prose: names mentioned in the reply, in reply order
        text = f" {_norm(reply)} "
        found = []
        for name, position in lookup.items():
            at = text.find(f" {name} ")
            if at >= 0 and len(name) >= 3:
                found.append((at, position))
        for _, position in sorted(found):
            add(position)
    return chosen[: max(k, 0)]


def agent_select(
    state: QueryState, candidates: list[tuple[str, float]], texts: list[str], aliases: list[list[str]],
    kind: str, k: int, operator: str,
) -> tuple[list[tuple[str, float]], bool]:
    """Ask the LLM (prompt ``agent_select``) which of the ``candidates`` help
    answer the question; (chosen (id, candidate score) best first, True) or,
    when the reply names none, (the top-k candidates, False)."""
    prompt = state.prompt("agent_select")
    listing = "\n".join(f"{number}. {' '.join(text.split())[:300]}" for number, text in enumerate(texts, start=1))
    request = state.request(prompt, f"query.{operator}", max_tokens=256, json_mode=True,
                             question=state.question, kind=kind, candidates=listing, k=str(k))
    reply = state.models.chat.complete(request).text
    chosen = parse_selection(reply, aliases, k)
    if not chosen:
        return candidates[:k], False
    picked = [candidates[i] for i in chosen]
    return sort_hits(picked), True


def mark_items(items: list[ContextItem], key: str, value: Any) -> list[ContextItem]:
    for item in items:
        item.provenance[key] = value
    return items


# -- operators -----------------------------------------------------------------


def node_vdb(
    state: QueryState, top_k: Count = 4, index: EntityIndex = "entity_vectors", query: QuerySource = "question",
) -> list[ContextItem]:
    """Top-k entities by vector similarity (survey §6.1 node VDB).

    Reads the question's embedding (``query: question``, needs the
    ``embedding`` conversion) or, for LightRAG's local retrieval, the
    low-level keywords joined and embedded (``query: keywords_low``, needs the
    ``keywords`` conversion; ``keywords_high`` likewise). ``index`` is
    ``entity_vectors`` (name + description, TKG/RKG) or
    ``entity_name_vectors`` (names only, KG) — that artifact is required.
    Writes ``state.entities``.
    """
    check_index(index, ENTITY_INDICES, "node.vdb")
    vector = query_vector(state, query, "node.vdb")
    vectors = state.resources.vectors(index, embedding_model=state.models.embedder.name)
    hits = sort_hits(vectors.search(vector, top_k)[0]) if top_k > 0 else []
    state.entities = dict(hits)
    return state.resources.entity_items(hits, "node.vdb")


def node_relnode(
    state: QueryState, top_k: CountOrZero = 4, combine: Literal["max", "sum"] = "max",
) -> list[ContextItem]:
    """Entities at the ends of ``state.relationships`` (survey §6.1 RelNode;
    LightRAG global retrieval).

    An entity scores the best (``combine: max``, LightRAG's order of first
    appearance) or the sum (``combine: sum``) of the scores of the retrieved
    relationships it ends. ``top_k <= 0`` keeps every endpoint. Writes
    ``state.entities``.
    """
    if combine not in ("max", "sum"):
        raise MethodError(f"node.relnode: combine must be max or sum, not {combine!r}")
    graph = state.resources.graph()
    known = [(graph.rel_row[r], s) for r, s in state.relationships.items() if r in graph.rel_row]
    if not known:
        state.entities = {}
        return []
    rel_rows = np.array([r for r, _ in known], dtype=np.int64)
    rel_scores = np.array([s for _, s in known], dtype=np.float64)
    ends = np.concatenate([graph.rel_src[rel_rows], graph.rel_dst[rel_rows]])
    scores = np.concatenate([rel_scores, rel_scores])
    rows, inverse = np.unique(ends, return_inverse=True)
    if combine == "sum":
        combined = np.bincount(inverse, weights=scores, minlength=rows.size)
    else:
        combined = np.full(rows.size, -np.inf)
        np.maximum.at(combined, inverse, scores)
    hits = rank(rows, combined, graph.entity_ids, top_k)
    state.entities = dict(hits)
    return state.resources.entity_items(hits, "node.relnode")


def node_ppr(
    state: QueryState, top_k: CountOrZero = 4, damping: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.5,
) -> list[ContextItem]:
    """Personalised PageRank from the candidate entities (survey §6.1 PPR;
    HippoRAG, FastGraphRAG).

    The restart vector puts each entity of ``state.entities`` (e.g. from
    ``node.link``) at its score — the similarity to a question entity — so the
    walk restarts where the question points. ``damping`` is the probability of
    following an edge (HippoRAG: 0.5). Writes the full score vector to
    ``state.entity_scores`` (for ``relationship.aggregator`` and
    ``chunk.aggregator``) and the top-k entities to ``state.entities``.
    """
    if not 0.0 <= damping < 1.0:
        raise MethodError(f"node.ppr: damping must be in [0, 1), not {damping}")
    graph = state.resources.graph()
    rows, weights = seed_weights(graph, state.entities)
    if rows.size == 0:
        state.entities = {}
        return []
    restart = np.zeros(graph.n_entities)
    np.add.at(restart, rows, weights)
    scores = personalized_pagerank(graph, restart, damping=damping)
    state.entity_scores = scores
    hits = rank(np.arange(graph.n_entities), scores, graph.entity_ids, top_k, positive_only=True)
    state.entities = dict(hits)
    return state.resources.entity_items(hits, "node.ppr")


def node_agent(state: QueryState, top_k: Count = 4, max_candidates: Count = 30) -> list[ContextItem]:
    """The LLM picks up to ``top_k`` entities useful for the question from the
    candidates ``state.entities`` (survey §6.1 node Agent; ToG, DALK).

    The best ``max_candidates`` candidates are listed (``name: description``);
    the reply is read leniently (numbers, ids or names). When it names none,
    the top-k candidates are kept. The chosen keep their candidate scores.
    Writes ``state.entities``; items carry ``provenance["agent"]`` = ``llm`` or
    ``fallback``.
    """
    graph = state.resources.graph()
    candidates = [(e, s) for e, s in state.entities.items() if e in graph.entity_row][: max(max_candidates, 0)]
    if not candidates or top_k <= 0:
        state.entities = {}
        return []
    rows = [graph.entity_row[e] for e, _ in candidates]
    texts = [graph.entity_text(r) for r in rows]
    aliases = [[e, graph.names[r]] for (e, _), r in zip(candidates, rows, strict=True)]
    hits, by_llm = agent_select(state, candidates, texts, aliases, "entities", top_k, "node.agent")
    state.entities = dict(hits)
    return mark_items(state.resources.entity_items(hits, "node.agent"), "agent", "llm" if by_llm else "fallback")


def node_onehop(state: QueryState, top_k: CountOrZero = 4, include_seeds: bool = False) -> list[ContextItem]:
    """One-hop neighbours of the candidate entities (survey §6.1 Onehop; ToG, DALK).

    A neighbour scores the sum over its seeds of edge weight x seed score
    (``state.entities``). Seeds are left out unless ``include_seeds``; then
    each seed also scores its own weight. Writes ``state.entities``.
    """
    graph = state.resources.graph()
    rows, weights = seed_weights(graph, state.entities)
    if rows.size == 0:
        state.entities = {}
        return []
    reached, scores = sum_by_column(graph.adjacency, rows, weights)
    if include_seeds:
        all_rows, inverse = np.unique(np.concatenate([reached, rows]), return_inverse=True)
        scores = np.bincount(inverse, weights=np.concatenate([scores, weights]), minlength=all_rows.size)
        reached = all_rows
    else:
        keep = ~np.isin(reached, rows)
        reached, scores = reached[keep], scores[keep]
    hits = rank(reached, scores, graph.entity_ids, top_k)
    state.entities = dict(hits)
    return state.resources.entity_items(hits, "node.onehop")


def node_link(state: QueryState, index: EntityIndex = "entity_name_vectors") -> list[ContextItem]:
    """For each question entity, the most similar graph entity (survey §6.1 Link;
    HippoRAG, ToG, DALK, FastGraphRAG).

    Embeds ``state.question_entities`` (the ``entities`` conversion) in one
    batch and takes the top-1 of the ``index`` (``entity_name_vectors`` by
    default: a question entity is a name; ``entity_vectors`` also works and is
    then the required artifact). An entity linked twice keeps its best
    similarity. Writes ``state.entities``.
    """
    check_index(index, ENTITY_INDICES, "node.link")
    names = [name for name in dict.fromkeys(n.strip() for n in state.question_entities) if name]
    if not names:
        state.entities = {}
        return []
    vectors = state.resources.vectors(index, embedding_model=state.models.embedder.name)
    embedded = state.models.embedder.embed(names, stage="query.embed").vectors
    best: dict[str, float] = {}
    for hits in vectors.search(embedded, 1):
        for entity_id, score in hits:
            best[entity_id] = max(score, best.get(entity_id, -np.inf))
    hits = sort_hits(list(best.items()))
    state.entities = dict(hits)
    return state.resources.entity_items(hits, "node.link")


def node_tfidf(state: QueryState, top_k: CountOrZero = 4) -> list[ContextItem]:
    """Top-k passage nodes by TF-IDF similarity to the question (survey §6.1
    TF-IDF; KGP).

    KGP's graph is a passage graph: its nodes are the chunks, so this operator
    ranks chunks with the ``chunk_tfidf`` artifact (cosine of TF-IDF rows) and
    returns chunk items; chunks sharing no term with the question are left out
    (``top_k <= 0``: every chunk that shares one). Writes ``state.chunks``
    (not ``state.entities``)."""
    index = state.resources.chunk_tfidf
    if index.matrix.shape[1] == 0 or not index.ids:
        state.chunks = {}
        return []
    scores = (index.matrix @ index.query_vector(state.question).T).toarray().ravel()
    hits = rank(np.arange(len(index.ids)), scores, index.ids, top_k, positive_only=True)
    state.chunks = dict(hits)
    return state.resources.chunk_items(hits, "node.tfidf")


OPERATORS = (
    OperatorSpec(
        "node.vdb", "node", node_vdb,
        "top-k entities by vector similarity to the question (or LightRAG's low-level keywords)",
        requires=("graph", "{index}"), needs=("embedding",), needs_fn=query_needs,
    ),
    OperatorSpec(
        "node.relnode", "node", node_relnode, "the entities at the ends of the candidate relationships",
        requires=("graph",),
    ),
    OperatorSpec(
        "node.ppr", "node", node_ppr,
        "personalised PageRank restarting at the candidate entities (weighted by their scores)",
        requires=("graph",),
    ),
    OperatorSpec(
        "node.agent", "node", node_agent, "the LLM picks the relevant entities among the candidates",
        requires=("graph",),
    ),
    OperatorSpec(
        "node.onehop", "node", node_onehop, "one-hop neighbours of the candidate entities",
        requires=("graph",),
    ),
    OperatorSpec(
        "node.link", "node", node_link, "the most similar entity for each entity of the question",
        requires=("graph", "{index}"), needs=("entities",),
    ),
    OperatorSpec(
        "node.tfidf", "node", node_tfidf, "top-k passage nodes (chunks) by TF-IDF similarity (KGP)",
        requires=("chunk_tfidf",),
    ),
)
