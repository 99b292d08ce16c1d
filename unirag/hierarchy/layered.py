"""One loop for every layered summary hierarchy: cluster a layer, summarise its groups, embed, go up.

RAPTOR's tree (:mod:`unirag.hierarchy.tree`) and the community hierarchies of
ArchRAG, HyGRAG and LeanRAG (``unirag.index``) are built the same way
(survey §4-5): the nodes of a layer are clustered, every group gets a summary
(one model call, or an extractive stand-in), the summaries are embedded, and
the groups become the nodes of the next layer. Only each paper's own steps
differ: how a layer is clustered, how a summary is asked for and read, which
records a level yields, and how the next layer's edges are derived. Those are
a :class:`LayeredAlgorithm`; :func:`build_levels` runs the loop once for all,
so the stop rules, the progress bars and the counters agree everywhere.
GraphRAG's communities (clustered top-down, reported leaves first) use the
summary step (:func:`ask_all`) and the counters only.

This module sits in the graph layer, below ``unirag.index``, because the
RAPTOR tree is built there (from the chunk vectors, beside the graphs) and
must be able to use it.

**Stop reasons** (``HierarchyStats.stop_reason``): the loop's own are
``empty`` (no nodes), ``no_reduction`` (clustering left every node alone),
``root`` (one group held every node: its summary is the root) and
``max_levels``; an algorithm adds its own in
:meth:`LayeredAlgorithm.stop_before` (``min_nodes``, ``small_layer``, ...).

**Counters** (:class:`HierarchyStats`, per level and in total) use one set of
keys for every builder: ``summaries`` (groups a summary was asked for, with
or without a model), of which ``llm_summaries`` (the reply as the prompt asked
for it), ``prose_summaries`` (plain text where JSON was asked, kept) and
``fallback_summaries`` (extractive stand-ins: an unusable reply, or no model);
``summary_cache_hits``; ``singletons`` (nodes or groups of one that got no
summary call); ``communities`` (records built) and ``links``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any, Generic, Literal, TypeVar

import numpy as np

from unirag.hierarchy.attach import LevelCarrier
from unirag.llm.base import ChatModel, ChatRequest, EmbeddingModel, normalise_rows
from unirag.llm.batch import complete_all
from unirag.progress import Progress
from unirag.prompts.prompt import PromptLibrary
from unirag.text.tokenizer import Tokenizer, get_tokenizer

# ``json``: the reply as the prompt asked for it (JSON; for a plain-text prompt, any non-empty
# reply); ``prose``: text where JSON was asked; ``fallback``: extractive; ``given``: nothing
# was asked (a group of one stands for itself).
SummarySource = Literal["json", "prose", "fallback", "given"]
_SOURCE_COUNTER = {"json": "llm_summaries", "prose": "prose_summaries", "fallback": "fallback_summaries"}


@dataclass(frozen=True)
class BuildModels:
    """What a layered builder calls, and how: one argument where there were six.

    ``chat=None`` is the zero-LLM path (``index.summarizer: extractive``): no
    call is made and every summary is its builder's extractive fallback.
    ``embedder`` may be None for a builder that embeds nothing (GraphRAG's
    reports).
    """

    chat: ChatModel | None
    embedder: EmbeddingModel | None = None
    concurrency: int = 4
    temperature: float = 0.0
    progress: Progress = field(default_factory=Progress)
    tokenizer: Tokenizer = field(default_factory=get_tokenizer)
    prompts: PromptLibrary = field(default_factory=PromptLibrary)  # the workspace's prompt files first


@dataclass
class Layer:
    """The nodes clustered at one level: the leaves, or the records of the level below.

    Rows follow ``ids``. ``texts`` are what prompts quote at length (entity
    ``name: description``, chunk text, ``title: summary``); ``names`` the short
    labels (entity name, community title); ``entities`` the entity ids beneath
    each node. ``edges`` are row pairs with ``weights`` and ``edge_texts``
    where an algorithm keeps them (the tree keeps none).
    """

    ids: list[str]
    texts: list[str]
    vectors: np.ndarray  # (n, d) float32, L2-normalised
    names: list[str] = field(default_factory=list)
    entities: list[list[str]] = field(default_factory=list)
    edges: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    weights: np.ndarray = field(default_factory=lambda: np.zeros(0))
    edge_texts: list[str] = field(default_factory=list)
    # What each edge stands for where the algorithm keeps it (LeanRAG: the digest of the
    # entity-level relations an aggregated relation aggregates); empty: the endpoints' ids.
    edge_keys: list[str] = field(default_factory=list)
    # The entity-level relations beneath each edge (LeanRAG: sorted relation hashes), where kept.
    edge_bases: list[np.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class Clustering:
    """One layer clustered: the groups (row lists) that become this level's records, and
    the algorithm's own figures for the level's stats (merges, quality, ...).

    Groups of one appear only where the algorithm keeps them as records; a row
    in no group is left alone (a singleton, with no parent). An algorithm
    subclasses this to carry what its later steps need (labels, edges, ...).
    ``stats`` becomes the level's :class:`LevelStats` extras, so later steps
    may add their own figures to it (prompts cut, relation calls).
    """

    groups: list[list[int]]
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class Summary:
    """A group's summary as read from the reply (or written without one).

    ``embed`` is the text embedded for the next layer (None: not embedded,
    the algorithm supplies the vector); ``detail`` keeps an algorithm's full
    reading (GraphRAG's report).
    """

    title: str
    text: str
    source: SummarySource
    embed: str | None = None
    cached: bool = False
    detail: Any = None
    kept: bool = False  # carried from the last build unchanged (an incremental update), not asked


@dataclass(frozen=True)
class Ask:
    """One group's summary to obtain: the request (None: no call) and the reader that
    turns the reply text (``""`` when nothing was asked, or on the zero-LLM path)
    into a :class:`Summary`, falling back to an extractive one where it must.

    ``build`` makes the request only when it is sent: on an incremental update most
    groups keep their last summary (:func:`build_levels` swaps their asks), and
    fitting their prompts to the token budget would cost as much as a full build.
    """

    request: ChatRequest | None
    read: Callable[[str], Summary]
    build: Callable[[], ChatRequest] | None = None

    @property
    def calls_model(self) -> bool:
        """Whether this ask sends a request (built now or when sent)."""
        return self.request is not None or self.build is not None

    def to_send(self) -> ChatRequest:
        """The request, built now when it was deferred."""
        if self.request is not None:
            return self.request
        if self.build is None:
            raise ValueError("this ask sends no request")
        return self.build()


@dataclass(frozen=True)
class ProgressLabels:
    """Progress bar labels of one level, with ``{level}`` and ``{n}`` (nodes clustered or
    summaries embedded) filled in; None shows no bar for that step."""

    summarising: str
    clustering: str | None = None
    embedding: str | None = None


# -- stats ----------------------------------------------------------------------------


@dataclass
class LevelStats:
    """The counters of one level (see the module docstring) and the algorithm's own figures."""

    level: int
    nodes: int = 0
    communities: int = 0
    singletons: int = 0
    summaries: int = 0
    llm_summaries: int = 0
    prose_summaries: int = 0
    fallback_summaries: int = 0
    summary_cache_hits: int = 0
    kept_summaries: int = 0
    links: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def count(self, summaries: Sequence[Summary]) -> None:
        """Count what each summary came from (a ``given`` one is a singleton, not a summary;
        a ``kept`` one was carried unchanged from the last build)."""
        for summary in summaries:
            if summary.kept:
                self.kept_summaries += 1
                continue
            if summary.source == "given":
                self.singletons += 1
                continue
            self.summaries += 1
            self.summary_cache_hits += int(summary.cached)
            key = _SOURCE_COUNTER[summary.source]
            setattr(self, key, getattr(self, key) + 1)

    def to_dict(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}, **self.extra}


COUNTERS = tuple(f.name for f in fields(LevelStats) if f.name not in ("level", "nodes", "extra"))


@dataclass
class HierarchyStats:
    """What a layered build did: per-level counters, their totals, why it stopped.

    ``extra`` holds figures of the whole build (input sizes, the config);
    ``summed`` names per-level extras that are also totalled. ``to_dict()`` is
    what the manifest stores and ``unirag stats --json`` shows.
    """

    per_level: list[LevelStats] = field(default_factory=list)
    stop_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    summed: tuple[str, ...] = ()

    @property
    def levels(self) -> int:
        """Levels that hold records."""
        return sum(1 for level in self.per_level if level.communities)

    def to_dict(self) -> dict[str, Any]:
        totals = {key: sum(getattr(level, key) for level in self.per_level) for key in COUNTERS}
        summed = {key: sum(level.extra.get(key, 0) for level in self.per_level) for key in self.summed}
        return {"levels": self.levels, **totals, **summed, "stop_reason": self.stop_reason, **self.extra,
                "per_level": [level.to_dict() for level in self.per_level]}


# -- the steps every builder shares ------------------------------------------------------


@contextmanager
def _task(progress: Progress, label: str | None, total: int | None = None) -> Iterator[Callable[[int], None]]:
    if label is None:
        yield lambda n=1: None
        return
    with progress.task(label, total=total) as advance:
        yield advance


def _kept(summary: Summary, reply: str) -> Summary:
    """The reader of a kept summary: nothing was asked, the last build's summary stands."""
    return summary


def ask_all(asks: Sequence[Ask], models: BuildModels, label: str) -> list[Summary]:
    """Every ask's summary, in order: the requests run concurrently (:func:`complete_all`,
    ``chat=None`` makes no call), then each reply is read by its own reader."""
    requests = [ask.to_send() for ask in asks if ask.calls_model]
    replies = iter(complete_all(models.chat, requests, models.concurrency, models.progress, label))
    out: list[Summary] = []
    for ask in asks:
        if not ask.calls_model:
            out.append(ask.read(""))
            continue
        reply = next(replies)
        summary = ask.read(reply.text)
        summary.cached = reply.cached
        out.append(summary)
    return out


def embed_summaries(
    summaries: Sequence[Summary], models: BuildModels, stage: str, label: str | None = None,
    batch: int | None = None,
) -> np.ndarray:
    """L2-normalised vectors of the summaries' ``embed`` texts (those that have one, in order),
    ``batch`` texts per call (None: one call)."""
    texts = [summary.embed for summary in summaries if summary.embed is not None]
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    if models.embedder is None:
        raise ValueError("this hierarchy embeds its summaries: BuildModels.embedder is None")
    size = batch or len(texts)
    parts = []
    with _task(models.progress, label, total=len(texts)) as advance:
        for start in range(0, len(texts), size):
            part = texts[start : start + size]
            vectors = np.asarray(models.embedder.embed(part, stage=stage).vectors, dtype=np.float32)
            if len(vectors) != len(part):
                raise ValueError(f"embedder returned {len(vectors)} vectors for {len(part)} summaries")
            parts.append(vectors)
            advance(len(part))
    return normalise_rows(np.concatenate(parts))


# -- the loop ---------------------------------------------------------------------------

L = TypeVar("L", bound=Layer)
C = TypeVar("C", bound=Clustering)
R = TypeVar("R")


class LayeredAlgorithm(ABC, Generic[L, C, R]):
    """One paper's steps of the layered loop; :func:`build_levels` calls them in order.

    ``records`` are what a level yields (communities, tree nodes); ``below``
    holds the records that are the current layer's nodes (empty at level 1),
    so a level can name itself their parent.
    """

    labels: ProgressLabels
    embed_stage: str
    embed_batch: int | None = None  # texts per embedding call (None: one call per level)
    max_levels: int
    summed: tuple[str, ...] = ()  # per-level extras also totalled in the stats
    # Set for an incremental update (``unirag.hierarchy.attach``): ``cluster`` takes each level's
    # groups from the previous build where it had that level, instead of clustering afresh.
    carrier: LevelCarrier | None = None

    def stop_before(self, layer: L, level: int) -> str:
        """Why ``layer`` is not clustered into ``level`` ("" to go on)."""
        return ""

    def kept(self, record: R) -> Summary:
        """The summary a record of the last build was made from, for a group that keeps it
        (an incremental update). This default reads a :class:`Community` whose embedded text
        is its summary; an algorithm whose records differ says how to read them."""
        payload = getattr(record, "payload", {}) or {}
        text = getattr(record, "summary", "")
        return Summary(getattr(record, "title", ""), text, payload.get("summary_source", "json"), embed=text,
                       kept=True)

    @abstractmethod
    def cluster(self, layer: L, level: int) -> C:
        """The groups of ``layer`` (rows), with this level's figures."""

    @abstractmethod
    def asks(self, layer: L, clustering: C, level: int) -> list[Ask]:
        """One :class:`Ask` per group, in the groups' order."""

    @abstractmethod
    def records(self, layer: L, clustering: C, summaries: list[Summary], vectors: np.ndarray, level: int,
                below: list[R]) -> list[R]:
        """This level's records, one per group; ``vectors`` embed the summaries that have ``embed`` text."""

    @abstractmethod
    def next_layer(self, layer: L, clustering: C, records: list[R], vectors: np.ndarray,
                   level: int) -> tuple[L, list[Any]]:
        """The layer above (one node per record) and the links between this level's records."""


@dataclass
class Levels(Generic[R]):
    """What :func:`build_levels` returns: the records of every level (lowest first), links, stats."""

    records: list[R]
    links: list[Any]
    stats: HierarchyStats


def build_levels(algorithm: LayeredAlgorithm[L, C, R], layer: L, models: BuildModels,
                 stats: HierarchyStats | None = None) -> Levels[R]:
    """Run the layered loop from ``layer`` up: cluster, summarise, embed, build records, next layer.

    Stops (the reason in ``stats.stop_reason``) on an empty layer, when the
    algorithm says so, when clustering leaves every node alone, after a level
    whose one group holds every node (the root), or after ``max_levels``.
    """
    stats = stats if stats is not None else HierarchyStats()
    stats.summed = algorithm.summed
    records: list[R] = []
    links: list[Any] = []
    below: list[R] = []
    labels = algorithm.labels
    reason = "empty" if len(layer) == 0 else ""
    level = 0
    while not reason:
        level += 1
        if level > algorithm.max_levels:
            reason = "max_levels"
            break
        reason = algorithm.stop_before(layer, level)
        if reason:
            break
        with _task(models.progress, labels.clustering and labels.clustering.format(level=level, n=len(layer))):
            clustering = algorithm.cluster(layer, level)
        level_stats = LevelStats(level, nodes=len(layer), extra=clustering.stats)
        stats.per_level.append(level_stats)
        covered = len({row for group in clustering.groups for row in group})
        level_stats.singletons += len(layer) - covered
        if not clustering.groups:
            reason = "no_reduction"
            break
        asks = algorithm.asks(layer, clustering, level)
        if algorithm.carrier is not None:
            for index, record in enumerate(algorithm.carrier.kept(level)):
                if record is not None and asks[index].calls_model:
                    asks[index] = Ask(None, partial(_kept, algorithm.kept(record)))
        summaries = ask_all(asks, models, labels.summarising.format(level=level))
        level_stats.count(summaries)
        embedded = sum(summary.embed is not None for summary in summaries)
        vectors = embed_summaries(summaries, models, algorithm.embed_stage,
                                  labels.embedding and labels.embedding.format(level=level, n=embedded),
                                  algorithm.embed_batch)
        built = algorithm.records(layer, clustering, summaries, vectors, level, below)
        if algorithm.carrier is not None:
            algorithm.carrier.annotate(level, built)
            algorithm.carrier.built(level, [record.id for record in built])  # type: ignore[attr-defined]
        upper, level_links = algorithm.next_layer(layer, clustering, built, vectors, level)
        level_stats.communities, level_stats.links = len(built), len(level_links)
        records.extend(built)
        links.extend(level_links)
        if len(clustering.groups) == 1 and covered == len(layer):
            reason = "root"
        layer, below = upper, built
    stats.stop_reason = reason
    if algorithm.carrier is not None:
        stats.extra["update"] = {"mode": "attach", **algorithm.carrier.stats}
    return Levels(records, links, stats)
