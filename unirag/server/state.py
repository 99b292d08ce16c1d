"""What one server process holds: the workspace's reader, the job queue, loaded graph views.

The reader is one :class:`~unirag.api.UniRAG` shared by every request: its model
clients and indices load once and are read concurrently. Writes (index, delete)
run as jobs on their own ``UniRAG`` over the same workspace (its own SQLite
connection, the reader's model stack), so a query never waits for one: the reader
has ``stale_while_writing`` and answers from the artifacts as they are until the
job is done, then loads the new ones.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from unirag.server.catalog import MethodCatalog
from unirag.server.errors import ApiError
from unirag.server.graph_pages import GraphIndex
from unirag.server.jobs import JobQueue
from unirag.server.settings import ServerSettings

if TYPE_CHECKING:
    from unirag.api import UniRAG
    from unirag.methods.spec import MethodSpec

#: Graph types the graph routes serve.
PAGED_GRAPHS = ("kg", "tkg", "rkg", "pg", "hybrid", "tree")
#: The artifact each graph type is drawn from (every type reads the entity graph too).
GRAPH_ARTIFACT = {"pg": "chunk_links:pg", "hybrid": "chunk_links:hybrid", "tree": "tree"}


def graph_artifacts(kind: str) -> list[str]:
    """The artifacts a page of the ``kind`` graph shows (what ``load_view`` reads)."""
    return list(dict.fromkeys(["graph", GRAPH_ARTIFACT.get(kind, "graph")]))


@dataclass
class ServerState:
    rag: UniRAG
    settings: ServerSettings
    owns_rag: bool = False  # opened by create_app from a path: closed at shutdown
    jobs: JobQueue = field(default_factory=JobQueue)
    methods: MethodCatalog = field(default_factory=MethodCatalog)
    _graphs: dict[str, tuple[object, GraphIndex]] = field(default_factory=dict)
    _graph_lock: threading.Lock = field(default_factory=threading.Lock)

    def method(self, name: str | None) -> MethodSpec:
        """A shipped method by name or alias (default: the workspace's); never a spec file."""
        return self.methods.resolve(name or self.rag.settings.method)

    def graph(self, kind: str) -> GraphIndex:
        """The ``kind`` view with its paging index, loaded once per build of its artifact."""
        if kind not in PAGED_GRAPHS:
            raise ApiError(404, f"unknown graph type '{kind}' (known: {', '.join(PAGED_GRAPHS)})", "not_found")
        version = self.rag.built_version(GRAPH_ARTIFACT.get(kind, "graph"))
        with self._graph_lock:
            cached = self._graphs.get(kind)
            if cached is None or cached[0] != version:
                cached = (version, GraphIndex.of(self.rag.graph_view(kind)))
                self._graphs[kind] = cached
            return cached[1]

    def staleness(self, names: Iterable[str]) -> dict[str, Any]:
        """What a response drawn from the artifacts ``names`` says about them: ``stale`` and,
        per artifact behind the corpus or damaged, why. A graph route serves what was built
        (rebuilding a graph may mean model calls, not a GET's work) but never silently: after
        a delete that did not finish, the page says its entities may include deleted ones."""
        behind = self.rag.artifact_problems(names)
        return {"stale": bool(behind), "stale_artifacts": behind}

    def close(self) -> None:
        self.jobs.shutdown()
        if self.owns_rag:
            self.rag.close()
