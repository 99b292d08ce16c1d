"""The RAPTOR tree artifact: built, or carried through a corpus change, by the artifact registry.

The clustering and summary loop is :mod:`unirag.hierarchy.tree`; this module
reads the chunk vectors, decides whether the stored tree is current (its
inputs' fingerprint), carries it through an update (``index.update: attach``)
and stores the result. It sits above the hierarchy package, so the graph
layer (extraction and merging) never imports a clustering module.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from unirag.config import Settings, config_hash
from unirag.graph.graph_store import GraphStore
from unirag.hierarchy.attach import PreviousNode
from unirag.hierarchy.incremental import plan_update
from unirag.hierarchy.layered import BuildModels
from unirag.hierarchy.tree import TreeConfig, TreeNode, build_tree, leaves_beneath
from unirag.llm.factory import Models
from unirag.llm.sentence_mean import long_text_embedder
from unirag.progress import Progress
from unirag.prompts.prompt import PromptLibrary
from unirag.workspace import Workspace, atomic_write_bytes


def build_tree_artifact(
    workspace: Workspace, store: GraphStore, settings: Settings, models: Models, progress: Progress,
    name: str = "tree", preset: dict[str, Any] | None = None,
) -> bool:
    """RAPTOR tree ``name`` over the chunk vectors; returns False when up to date.

    ``preset`` fixes tree settings for a variant built beside the default tree
    (``tree:kmeans`` is the survey's RAPTOR-K: K-means instead of the Gaussian
    mixture); it wins over ``graph.tree`` for the keys it names.
    """

    ts = settings.graph.tree.model_copy(update=preset or {})
    config = TreeConfig(
        method=ts.method, max_layers=ts.max_layers, min_layer_size=ts.min_layer_size, threshold=ts.threshold,
        cluster_size=ts.cluster_size, summary_max_tokens=ts.summary_max_tokens, bic_patience=ts.bic_patience,
    )
    vectors_entry = workspace.manifest.entry("chunk_vectors") or {}
    # Cluster summaries follow ``index.summarizer``: the chat model, or (without a chat
    # endpoint, by default) extractive summaries from the children's first sentences.
    chat = models.chat if settings.index.resolved_summarizer(settings.chat) == "llm" else None
    embedder = long_text_embedder(models, settings)  # the summaries; leaves are the chunk vectors
    fingerprint = {"vectors": vectors_entry.get("inputs"), "config": ts.model_dump(),
                   "chat": chat.name if chat is not None else "extractive"}
    if embedder is not models.embedder:  # summaries embedded as sentence means: their own vectors
        fingerprint["summaries"] = embedder.name
    prompts = PromptLibrary.of_workspace(workspace.root).overridden("summarize_cluster") if chat is not None else {}
    if prompts:
        fingerprint["prompts"] = prompts
    inputs = config_hash(fingerprint)
    if workspace.manifest.is_current(name, inputs):
        return False
    workspace.manifest.checkout("chunk_vectors")
    vectors = np.load(workspace.artifact_path("chunk_vectors.npy"))
    leaves = [(chunk.id, chunk.indexed_text, vectors[i]) for i, chunk in enumerate(workspace.corpus.iter_chunks())]
    stored = store.load_tree(name) if workspace.manifest.entry(name) else []
    basis_path = workspace.artifact_path(f"{name.replace(':', '.')}.written_from.json")
    if stored:
        workspace.manifest.checkout(name)
    written = _read_written_from(basis_path) if stored else {}
    previous = _previous_tree(stored, written or {})
    identity = {"config": ts.model_dump(), "chat": chat.name if chat is not None else "extractive",
                "embedder": embedder.name}
    plan = plan_update(workspace, settings, name, identity, [leaf[0] for leaf in leaves], lambda: previous,
                       known=[node_id for node_id, layer, *_ in stored if layer == 0])
    if plan.carrier is not None and written is None:
        # without the bases of the summaries kept last time, drift could only be measured against
        # the last update: every changed upper node is re-summarised instead (the bases restart)
        plan.carrier.resummarize_share = 0.0
    result = build_tree(leaves, BuildModels(chat, embedder, settings.concurrency, settings.chat.temperature,
                                            progress, prompts=PromptLibrary.of_workspace(workspace.root)),
                        config, plan.carrier)
    store.save_tree(((n.id, n.layer, n.text, n.children, n.vector) for n in result.nodes), tree=name,
                    stored=stored or None)
    _write_written_from(basis_path, result.nodes)
    layers: dict[int, int] = {}
    for node in result.nodes:
        layers[node.layer] = layers.get(node.layer, 0) + 1
    workspace.manifest.set_entry(name, {
        "config": ts.model_dump(), "inputs": inputs, "count": len(result.nodes),
        "layers": {str(k): v for k, v in sorted(layers.items())}, "stats": result.stats, "identity": identity,
        "update": plan.to_json(),
    }, files=[basis_path])
    return True


def _previous_tree(stored: Sequence[tuple[str, int, str, list[str], np.ndarray]],
                   written: dict[str, list[str]]) -> dict[int, list[PreviousNode]]:
    """The stored tree's summary nodes by layer as an update carries them: each with the leaves
    beneath it and, where its summary was kept across an update, the leaves it was written from."""
    beneath = leaves_beneath([(node_id, layer, children) for node_id, layer, _, children, _ in stored])
    previous: dict[int, list[PreviousNode]] = {}
    for node_id, layer, text, children, vector in stored:
        if layer > 0:
            basis = written.get(node_id)
            record = TreeNode(node_id, layer, text, list(children), vector,
                              payload={"written_from": basis} if basis else {})
            previous.setdefault(layer, []).append(
                PreviousNode(node_id, tuple(children), text, record, beneath=beneath[node_id]))
    return previous


def _read_written_from(path: Path) -> dict[str, list[str]] | None:
    """Node id -> the leaves its kept summary was written from; None when the file is lost or damaged."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        return None
    return data


def _write_written_from(path: Path, nodes: Sequence[Any]) -> None:
    """Record the bases of summaries that no longer match the leaves beneath them (a node whose
    basis is its leaves needs no entry, so an insert undone by a delete leaves the file as a
    fresh build writes it)."""
    beneath = leaves_beneath([(node.id, node.layer, node.children) for node in nodes])
    drifted = {node.id: sorted(node.payload["written_from"]) for node in nodes
               if node.payload.get("written_from") and tuple(sorted(node.payload["written_from"])) != beneath[node.id]}
    atomic_write_bytes(path, json.dumps(drifted, sort_keys=True).encode("utf-8"))
