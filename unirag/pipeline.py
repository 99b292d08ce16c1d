"""Indexing end to end: ingest (build) -> chunk vectors and BM25 -> requested graphs and indices;
deleting documents; bringing what a query needs up to date.

Kept apart from the CLI so tests, benchmarks, the evaluator (and the library
API) call the same functions. Usage is charged to named stages and stored in
the workspace.

Every change of the corpus (insert, replace, delete) refreshes every artifact
the workspace has built, not only the ones asked for: an artifact is never
left behind its corpus by an index or delete run. Refreshing is incremental
where it counts: extraction runs only for new chunks, embeddings of unchanged
texts and every model reply whose prompt did not change come from the cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unirag.artifacts.cost import estimate_index_cost
from unirag.artifacts.registry import BuildContext, built_artifacts, ensure_artifacts, outdated, resolve_names
from unirag.config import Settings
from unirag.corpus import delete_target_keys
from unirag.errors import PaidBuildError, SourceError, UniragError, WorkspaceError
from unirag.executors import executor_for
from unirag.graph.graph_build import parse_graph_list
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy.community_store import CommunityStore
from unirag.ingest import IngestReport, incoming_chunks, ingest, release_sources
from unirag.llm.base import ChatModel, UsageLedger
from unirag.llm.factory import ModelStack, run_by
from unirag.methods.spec import resolve_method
from unirag.progress import Progress
from unirag.text.loaders import FORMATS
from unirag.text.types import Document
from unirag.workspace import Workspace

if TYPE_CHECKING:  # the cost model imports the LLM extractor: a query needs neither
    from unirag.artifacts.cost import CostEstimate


@dataclass
class IndexReport:
    ingest: IngestReport
    rebuilt: list[str]
    ledger: UsageLedger
    timings: dict[str, float] = field(default_factory=dict)
    estimate: CostEstimate | None = None

    def to_json(self) -> dict[str, Any]:
        report = self.ingest
        total = self.ledger.total()
        return {
            "documents_seen": report.documents_seen,
            "documents_added": report.documents_added,
            "already_indexed": report.already_indexed,
            "duplicates_skipped": report.duplicates,
            "chunks_added": report.chunks_added,
            "documents_removed": report.documents_removed,
            "chunks_removed": report.chunks_removed,
            "warnings": report.warnings,
            "rebuilt": self.rebuilt,
            "llm_calls": total.llm_calls,
            "embedding_calls": total.embedding_calls,
            "usage_by_stage": self.ledger.to_json(),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            **({"estimate": self.estimate.to_json()} if self.estimate is not None else {}),
        }


def run_index(
    workspace: Workspace,
    sources: Sequence[str | Path],
    settings: Settings,
    stack: ModelStack,
    fmt: str = "auto",
    progress: Progress | None = None,
    warn: Callable[[str], None] | None = None,
    rebuild: bool = False,
    graphs: list[str] | None = None,
    artifacts: list[str] | None = None,
    documents: Iterable[Document] | None = None,
    sync: bool = False,
    estimate: CostEstimate | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> IndexReport:
    """Add the sources to the workspace and bring the chunk artifacts, the
    requested graphs (default: ``graph.graphs``) and ``artifacts`` (names or
    aliases of :mod:`unirag.artifacts.registry`) up to date.

    ``rebuild`` re-chunks from scratch, but only once a first batch of the new
    sources has loaded: a mistyped path never wipes the corpus. ``documents``
    (already loaded, e.g. a benchmark's passages) are added like sources. Re-indexed
    files replace their old documents; ``sync`` deletes those of files gone from the
    given directories. Every artifact built before is refreshed too. ``estimate`` (from
    :func:`estimate_index`, shown before the run) is stored with the run's actual usage.
    ``on_stage`` is told ``"ingest"``, then each artifact's name, as its step starts.
    """
    progress = progress or Progress()
    ledger = workspace.usage.ledger("index")
    # ``executor: ray``: model calls that miss the cache run as Ray tasks (llm.remote); chunking
    # and the zero-LLM extractor fan out in their own steps. Writes stay here, on the driver.
    models = run_by(stack, settings, workspace.cache(), executor_for(settings)).accounted(ledger)
    timings: dict[str, float] = {}
    rebuilt: list[str] = []
    with workspace.writing():
        try:
            tick = time.perf_counter()
            if on_stage is not None:
                on_stage("ingest")
            if sources or rebuild or documents is not None:
                report = ingest(workspace, sources, settings, fmt, progress, warn, rebuild, documents, sync)
            else:  # build on the corpus already stored
                report = IngestReport()
                if not workspace.corpus.chunk_ids():
                    raise SourceError(f"{workspace.root} has no corpus yet: give the files or directories to index")
            forget_pending_chunks(workspace)  # of a delete (or sync) killed before it refreshed
            timings["build.chunks"] = time.perf_counter() - tick
            ctx = BuildContext(workspace, settings, models, progress, timings=timings, rebuilt=rebuilt,
                               on_stage=on_stage)
            if workspace.corpus.chunk_ids():
                ensure_artifacts(ctx, index_targets(workspace, settings, graphs, artifacts), index_job=True)
            else:  # --sync removed every document
                _drop_derived(workspace)
            workspace.manifest.finish_delete()  # every built artifact is refreshed
        finally:
            # Usage is kept even when the run dies: the calls were made (and cached). Most of it
            # is stored already, as calls finished (a hard kill skips this line).
            ledger.flush()
            if estimate is not None:
                total = ledger.total()
                workspace.usage.record_index_cost({
                    "estimate": estimate.to_json(), "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "actual": {"llm_calls": total.llm_calls, "cache_hits": total.cache_hits,
                               "prompt_tokens": total.prompt_tokens},
                })
    return IndexReport(report, rebuilt, ledger, timings, estimate)


def index_targets(workspace: Workspace | None, settings: Settings, graphs: list[str] | None,
                  artifacts: list[str] | None) -> list[str]:
    """What an index run brings up to date: the chunk indices, the graphs asked for (default
    ``graph.graphs``), the artifacts asked for, and every artifact built before."""
    wanted = graphs if graphs is not None else list(settings.graph.graphs)
    built = built_artifacts(workspace) if workspace is not None else []
    return ["chunk_vectors", "chunk_bm25", *wanted, *(artifacts or []), *built]


def charges_for_calls(settings: Settings) -> bool:
    """Whether index calls go to a remote OpenAI-compatible chat endpoint (a paid one, perhaps):
    the embedded model and the zero-LLM path cost nothing, so they get no estimate."""
    return settings.chat.resolved_provider == "openai"


def estimate_index(
    workspace: Workspace | None,
    sources: Sequence[str | Path],
    settings: Settings,
    chat: ChatModel,
    fmt: str = "auto",
    rebuild: bool = False,
    graphs: list[str] | None = None,
    artifacts: list[str] | None = None,
) -> CostEstimate:
    """The LLM calls and prompt tokens :func:`run_index` with the same arguments would spend,
    from the corpus (the sources chunked in memory: nothing is written) and the configs."""
    incoming = incoming_chunks(workspace, sources, settings, fmt, rebuild) if sources else []
    return estimate_index_cost(workspace, settings, chat, index_targets(workspace, settings, graphs, artifacts),
                               incoming, rebuild)


@dataclass(frozen=True)
class IndexPlan:
    """What an ``index`` call asks for, checked before anything is written."""

    sources: list[str]
    graphs: list[str] | None  # None: the settings' ``graph.graphs``
    artifacts: list[str]


def plan_index(
    sources: str | Path | Sequence[str | Path] | None,
    *,
    fmt: str = "auto",
    graphs: str | Sequence[str] | None = None,
    indices: str | Sequence[str] | None = None,
    method: str | Sequence[str] | None = None,
) -> IndexPlan:
    """Check an index request: the format is known, every source exists, graph, index and
    method names resolve. One-line errors, and nothing is written, on any mistake.
    ``method``: one method or several (``"archrag,hipporag2"`` or a list), whose every
    required artifact (``spec.requires()``: graphs, indices, hierarchies) is built."""
    if fmt not in FORMATS:
        raise UniragError(f"unknown format '{fmt}' (known: {', '.join(FORMATS)})")
    wanted_graphs = parse_graph_list(_comma_list(graphs)) if graphs is not None else None
    names = [n.strip() for n in _comma_list(indices).split(",") if n.strip()]
    artifacts = resolve_names(names) if names else []
    paths = [Path(sources)] if isinstance(sources, (str, Path)) else [Path(s) for s in sources or []]
    missing = [str(s) for s in paths if not s.exists()]
    if missing:
        raise SourceError(f"{missing[0]}: no such file or directory")
    for name in _comma_list(method).split(","):
        if name.strip():
            artifacts += [a for a in resolve_method(name.strip()).requires() if a not in artifacts]
    return IndexPlan([str(s) for s in paths], wanted_graphs, artifacts)


def _comma_list(names: str | Sequence[str] | None) -> str:
    return names if isinstance(names, str) else ",".join(names or [])


def estimate_plan(workspace: Workspace | None, plan: IndexPlan, settings: Settings, chat: ChatModel,
                  fmt: str = "auto", rebuild: bool = False) -> CostEstimate | None:
    """What the index run ``plan`` asks would spend, said before it calls a paid model; None when
    it calls none (:func:`charges_for_calls`). ``workspace`` None: one not created yet."""
    if not charges_for_calls(settings):
        return None
    return estimate_index(workspace, plan.sources, settings, chat, fmt, rebuild, plan.graphs, plan.artifacts)


def refuse_paid_build(workspace: Workspace, settings: Settings, chat: ChatModel, needed: list[str],
                      method: str | None = None) -> None:
    """Raise :class:`PaidBuildError` (one line with the estimate) when building ``needed`` would
    call a paid chat model; return when the build is free. ``method`` names the query's
    method, for the ``index --for`` command the line suggests."""
    if not charges_for_calls(settings):
        return
    estimate = estimate_index_cost(workspace, settings, chat, needed, [])
    if not estimate.calls:
        return
    build_first = f"--for {method}" if method else f"--index {','.join(needed)}"
    raise PaidBuildError(
        f"building {', '.join(needed)} needs about {estimate.calls} LLM calls / {estimate.prompt_tokens} "
        f"prompt tokens to {estimate.model}",
        f"query with build=True (CLI: --build), or build first with 'unirag index -w {workspace.root} {build_first}'",
        estimate)


@dataclass
class DeleteReport:
    documents_removed: int
    chunks_removed: int
    rebuilt: list[str]
    ledger: UsageLedger
    timings: dict[str, float] = field(default_factory=dict)
    # targets an earlier, interrupted delete removed: this run finished refreshing for them
    finished: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        total = self.ledger.total()
        return {
            "documents_removed": self.documents_removed,
            "finished_interrupted_delete": self.finished,
            "chunks_removed": self.chunks_removed,
            "rebuilt": self.rebuilt,
            "llm_calls": total.llm_calls,
            "embedding_calls": total.embedding_calls,
            "usage_by_stage": self.ledger.to_json(),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }


def _drop_derived(workspace: Workspace) -> None:
    """An emptied corpus: no graph, communities, tree or index files remain."""
    GraphStore(workspace).clear_derived()
    CommunityStore(workspace).clear()
    workspace.manifest.drop_artifacts()


def resolve_targets(workspace: Workspace, targets: Sequence[str]) -> tuple[set[str], list[str]]:
    """The documents ``targets`` name (ids, files, directories, ``file#record``), and the
    targets an earlier delete removed but did not finish refreshing for (a killed run: this
    one finishes it). One line naming the first target that matches neither, before
    anything is changed."""
    pending = workspace.manifest.pending_delete() or {}
    gone_before = {*pending.get("targets", ()), *pending.get("doc_ids", ())}
    doc_ids: set[str] = set()
    finishing: list[str] = []
    for target in targets:
        found = workspace.corpus.find_documents(target)
        if found:
            doc_ids |= found
        elif delete_target_keys(target) & gone_before:
            finishing.append(target)
        else:
            raise SourceError(
                f"no document '{target}' in {workspace.root}: give a document id, an indexed file or "
                f"directory, or FILE#RECORD_ID (see 'unirag documents -w {workspace.root}'); nothing was deleted"
            )
    return doc_ids, finishing


def forget_pending_chunks(workspace: Workspace) -> None:
    """Drop the extractions of every chunk deleted by a run that may have died before it
    did (idempotent): a deleted document's words never reach a refreshed graph."""
    pending = workspace.manifest.pending_delete()
    if pending and pending.get("chunk_ids"):
        GraphStore(workspace).forget_chunks(list(pending["chunk_ids"]))


def run_delete(
    workspace: Workspace,
    targets: Sequence[str],
    settings: Settings,
    stack: ModelStack,
    progress: Progress | None = None,
) -> DeleteReport:
    """Delete the documents ``targets`` name, with their chunks and extractions, then
    refresh every built artifact on the corpus that remains (the model cache answers
    every prompt that did not change). Unknown targets change nothing.

    Resumable: the deletion is recorded as pending in the transaction that removes the
    documents, and cleared once every artifact is refreshed. A kill in between leaves
    stale artifacts, which the next index or delete refreshes (a query refreshes what
    it reads); rerunning the same delete finishes it (``finished`` names its targets).
    """
    progress = progress or Progress()
    ledger = workspace.usage.ledger("delete")
    timings: dict[str, float] = {}
    rebuilt: list[str] = []
    with workspace.writing():
        named, finishing = resolve_targets(workspace, targets)
        doc_ids = release_sources(workspace, targets, named)
        tick = time.perf_counter()
        chunk_ids = workspace.corpus.delete_documents(doc_ids, targets)
        forget_pending_chunks(workspace)
        timings["delete.documents"] = time.perf_counter() - tick
        try:
            if workspace.corpus.chunk_ids():
                models = run_by(stack, settings, workspace.cache(), executor_for(settings)).accounted(ledger)
                ctx = BuildContext(workspace, settings, models, progress, timings=timings, rebuilt=rebuilt)
                ensure_artifacts(ctx, built_artifacts(workspace), index_job=True)
            else:
                _drop_derived(workspace)
            workspace.manifest.finish_delete()
        finally:
            ledger.flush()
    return DeleteReport(len(doc_ids), len(chunk_ids), rebuilt, ledger, timings, finishing)


def prepare_query(
    workspace: Workspace,
    settings: Settings,
    stack: ModelStack,
    names: Sequence[str],
    progress: Progress | None = None,
    build: bool | None = True,
    ledger: UsageLedger | None = None,
    note: Callable[[str], None] | None = None,
    method: str | None = None,
) -> dict[str, str]:
    """Make the artifacts ``names`` (with what they need) current before a query runs:
    build the missing, refresh those built on an older corpus or damaged (a file lost or
    cut). Returns what was done (artifact -> why); the model calls are charged to
    ``ledger`` (the query's own).

    With ``build=False`` (``--no-build``) nothing is built: an artifact that is missing,
    behind its corpus or damaged is one line naming it and the command that brings it up to date.
    With ``build=None`` only a free build runs (the zero-LLM path, the embedded model, or one
    that asks the model nothing); one that would call a paid chat endpoint raises
    :class:`PaidBuildError` with its estimate: a query never spends money unasked.
    A query never answers from an artifact built on an older corpus.

    Concurrent queries that need the same missing artifact build it once: the others
    wait for the write lock (up to ``retrieval.build_wait`` seconds, said once through
    ``note``), then find it built and answer.
    """
    needed = outdated(workspace, list(names))
    if not needed:
        return {}
    if not workspace.corpus.chunk_ids():
        raise WorkspaceError(
            f"{workspace.root} has no indexed corpus: run 'unirag index SOURCE -w {workspace.root}' first"
        )
    if build is False:
        name, why = next(iter(needed.items()))
        state = why if why == "missing" or why.startswith("damaged") else f"stale ({why})"
        raise WorkspaceError(
            f"artifact '{name}' is {state}: run "
            f"'unirag index -w {workspace.root} --index {name}' or query without --no-build"
        )
    if build is None:
        refuse_paid_build(workspace, settings, stack.chat, list(needed), method)
    ledger = ledger if ledger is not None else UsageLedger()
    models = run_by(stack, settings, workspace.cache(), executor_for(settings)).accounted(ledger)
    ctx = BuildContext(workspace, settings, models, progress or Progress())
    with workspace.writing(wait=settings.retrieval.build_wait, on_wait=note):
        needed = outdated(workspace, list(names))  # what another process built meanwhile is done
        if not needed:
            return {}
        try:
            ensure_artifacts(ctx, list(needed))
        finally:
            if ledger.stages:
                workspace.usage.record("query.refresh", ledger)
    return needed
