"""Export a graph type from the workspace: GraphML or Parquet node/edge tables."""

from __future__ import annotations

from pathlib import Path

from unirag.graph.graph_store import GraphStore
from unirag.graph.projections import GRAPH_TYPES, GraphView, project
from unirag.errors import UniragError, WorkspaceError
from unirag.workspace import Workspace, atomic_path

FORMATS = ("graphml", "parquet")


def load_view(workspace: Workspace, kind: str) -> GraphView:
    """The ``kind`` projection of what the workspace holds; a clear error if it was not built."""
    if kind not in GRAPH_TYPES:
        raise UniragError(f"unknown graph type '{kind}' (known: {', '.join(GRAPH_TYPES)})")
    manifest = workspace.manifest.entries()
    needed = {"pg": "chunk_links:pg", "hybrid": "chunk_links:hybrid", "tree": "tree"}.get(kind, "graph")
    if needed not in manifest:
        raise WorkspaceError(
            f"{workspace.root} has no {kind} graph: run 'unirag index SOURCE -w {workspace.root} --graph {kind}'"
        )
    store = GraphStore(workspace)
    chunks = {chunk.id: chunk.title for chunk in workspace.corpus.iter_chunks()} if kind in ("pg", "hybrid") else None
    links = store.load_chunk_links(kind) if kind in ("pg", "hybrid") else None
    tree = store.load_tree() if kind == "tree" else None
    graph = store.load_graph()
    return project(kind, graph, chunks, links, tree)


def export_graph(workspace: Workspace, kind: str, fmt: str, out: Path | None = None) -> Path:
    if fmt not in FORMATS:
        raise UniragError(f"unknown export format '{fmt}' (known: {', '.join(FORMATS)})")
    view = load_view(workspace, kind)
    if fmt == "graphml":
        import networkx as nx

        path = Path(out) if out else workspace.root / "exports" / f"{kind}.graphml"
        with atomic_path(path) as tmp:
            nx.write_graphml(view.to_networkx(), tmp)
        return path
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = Path(out) if out else workspace.root / "exports" / kind
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in (("nodes", view.nodes), ("edges", view.edges)):
        with atomic_path(directory / f"{name}.parquet") as tmp:
            pq.write_table(pa.Table.from_pylist(rows), tmp)
    return directory
