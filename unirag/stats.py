"""What ``unirag stats`` (and ``UniRAG.stats``, ``GET /stats``) reports about a workspace.

Beside the pipeline, below the entry points: the CLI, the API and the server
read one function, so the three cannot report different numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from unirag.graph.graph_store import GraphStore

if TYPE_CHECKING:
    from unirag.workspace import Workspace


def workspace_stats(workspace: Workspace) -> dict[str, Any]:
    """Counts of documents and chunks, graphs, communities per level, artifacts, usage per stage,
    the last paid index run's estimate and actual usage (what ``unirag stats --json`` prints)."""
    store = GraphStore(workspace)
    manifest = workspace.manifest.entries()
    usage = workspace.usage.by_stage()
    extractor = manifest.get("graph", {}).get("config", {}).get("extractor", "")
    extracted = len(store.extracted_chunk_ids(extractor)) if extractor else 0
    extract_usage = usage.get("build.extract")
    return {
        "workspace": str(workspace.root),
        **workspace.corpus.counts(),
        "graphs": store.type_counts(),
        "extractor": extractor,
        "extraction_failures": dict(store.extraction_failures(extractor)) if extractor else {},
        "extract_prompt_tokens_per_chunk": (
            round(extract_usage.prompt_tokens / extracted, 1) if extract_usage and extracted else None
        ),
        "communities": {
            name.split(":", 1)[1]: {"level_order": entry.get("level_order"), "levels": entry.get("levels", {}),
                                    "update": entry.get("update")}
            for name, entry in manifest.items() if name.startswith("communities:")
        },
        "artifacts": manifest,
        "corpus_version": workspace.corpus.version(),
        "stale_artifacts": workspace.manifest.stale_artifacts(),
        "cache": workspace.cache().counts(),
        "usage_by_stage": {stage: u.to_json() for stage, u in sorted(usage.items())},
        "last_index_cost": workspace.usage.last_index_cost(),  # the estimate before a paid run, and its actual usage
    }
