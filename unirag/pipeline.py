"""Indexing end to end: ingest (build) -> chunk vectors and BM25 -> requested graphs and indices.

Kept apart from the CLI so tests, benchmarks and the evaluator call the same
function. Usage is charged to named stages and stored in the workspace.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unirag.graph.corpus import IngestReport, ingest
from unirag.config import Settings
from unirag.errors import SourceError, WorkspaceError
from unirag.index.artifacts import BuildContext, ensure_artifacts
from unirag.llm.base import UsageLedger
from unirag.llm.factory import ModelStack
from unirag.progress import Progress
from unirag.text.types import Document
from unirag.workspace import Workspace


@dataclass
class IndexReport:
    ingest: IngestReport
    rebuilt: list[str]
    ledger: UsageLedger
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        report = self.ingest
        total = self.ledger.total()
        return {
            "documents_seen": report.documents_seen,
            "documents_added": report.documents_added,
            "already_indexed": report.already_indexed,
            "duplicates_skipped": report.duplicates,
            "chunks_added": report.chunks_added,
            "warnings": report.warnings,
            "rebuilt": self.rebuilt,
            "llm_calls": total.llm_calls,
            "embedding_calls": total.embedding_calls,
            "usage_by_stage": self.ledger.to_json(),
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
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
) -> IndexReport:
    """Add the sources to the workspace and bring the chunk artifacts, the
    requested graphs (default: ``graph.graphs``) and ``artifacts`` (names or
    aliases of :mod:`unirag.index.artifacts`) up to date.

    ``rebuild`` re-chunks from scratch, but only once a first batch of the new
    sources has loaded: a mistyped path never wipes the corpus. ``documents``
    (already loaded, e.g. a benchmark's passages) are added like sources.
    """
    progress = progress or Progress()
    ledger = UsageLedger()
    models = stack.accounted(ledger)
    timings: dict[str, float] = {}
    rebuilt: list[str] = []
    with workspace.writing():
        try:
            tick = time.perf_counter()
            if sources or rebuild or documents is not None:
                report = ingest(workspace, sources, settings, fmt, progress, warn, rebuild, documents)
            else:  # build on the corpus already stored
                report = IngestReport()
                if not workspace.chunk_ids():
                    raise SourceError(f"{workspace.root} has no corpus yet: give the files or directories to index")
            timings["build.chunks"] = time.perf_counter() - tick
            wanted = graphs if graphs is not None else list(settings.graph.graphs)
            ctx = BuildContext(workspace, settings, models, progress, timings=timings, rebuilt=rebuilt)
            ensure_artifacts(ctx, ["chunk_vectors", "chunk_bm25", *wanted, *(artifacts or [])])
        finally:
            # Usage is kept even when the run dies: the calls were made (and cached).
            if ledger.stages:
                workspace.record_usage("index", ledger)
    return IndexReport(report, rebuilt, ledger, timings)


def build_missing(
    workspace: Workspace, settings: Settings, stack: ModelStack, names: Sequence[str], progress: Progress | None = None
) -> list[str]:
    """Build the artifacts in ``names`` that the workspace lacks (with what they
    need), as a query does before it runs a method: lazily, once. Staleness is
    ``unirag index``'s business; this only fills what is missing."""
    missing = [name for name in names if workspace.manifest_entry(name) is None]
    if not missing:
        return []
    if not workspace.chunk_ids():
        raise WorkspaceError(
            f"{workspace.root} has no indexed corpus: run 'unirag index SOURCE -w {workspace.root}' first"
        )
    ledger = UsageLedger()
    ctx = BuildContext(workspace, settings, stack.accounted(ledger), progress or Progress())
    with workspace.writing():
        try:
            ensure_artifacts(ctx, missing)
        finally:
            if ledger.stages:
                workspace.record_usage("index", ledger)
    return ctx.rebuilt
