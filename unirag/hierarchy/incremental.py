"""Update a hierarchy in place after a corpus change, or rebuild it: the decision and its record.

A hierarchy (ArchRAG, HyGRAG, LeanRAG, the RAPTOR tree) whose inputs changed
is rebuilt through its layered loop either way; what differs is whether each
level is clustered afresh or carried over from the last build with the new
leaves attached (:mod:`unirag.hierarchy.attach`). Carrying is chosen when

* ``index.update`` is ``attach`` (the default),
* the last build used the same hierarchy config and models, and its leaf list
  (``artifacts/<name>.leaves.json``) is whole, and
* the leaves added or removed since the last *full* build stay within
  ``index.rebuild_share`` of that build's leaves (default 0.2): attachment
  never re-clusters, so after much change the clusters drift from what the
  algorithm would find, and a full build restores them. The levels follow a
  full build's rules (see "Levels" in :mod:`unirag.hierarchy.attach`).

The decision and its figures go into the artifact's manifest entry
(``update``) and ``unirag stats``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unirag.config import Settings
from unirag.hierarchy.attach import LevelCarrier, PreviousNode
from unirag.workspace import Workspace, atomic_write_bytes


@dataclass
class UpdatePlan:
    """How one hierarchy build runs: ``carrier`` set means attach, None means cluster afresh.

    ``base_leaves`` is the leaf count of the last full build and ``changed``
    the leaves added or removed since then, this change included.
    """

    carrier: LevelCarrier | None
    reason: str
    base_leaves: int
    changed: int

    @property
    def mode(self) -> str:
        return "attach" if self.carrier is not None else "rebuild"

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "reason": self.reason, "base_leaves": self.base_leaves, "changed": self.changed}


def leaves_path(workspace: Workspace, name: str) -> Path:
    """The file listing the leaves the last build of ``name`` placed (or left out on purpose)."""
    return workspace.artifact_path(f"{name.replace(':', '.')}.leaves.json")


def _read_leaves(path: Path) -> list[str] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    leaves = data.get("leaves") if isinstance(data, dict) else None
    return leaves if isinstance(leaves, list) and all(isinstance(x, str) for x in leaves) else None


def plan_update(
    workspace: Workspace, settings: Settings, name: str, identity: dict[str, Any], leaves: Sequence[str],
    previous: Callable[[], dict[int, list[PreviousNode]]], known: Sequence[str] | None = None,
) -> UpdatePlan:
    """Decide how artifact ``name`` is built over ``leaves`` (see the module docstring).

    ``identity`` is what must not have changed for carrying to make sense
    (the hierarchy's config and the model names); ``previous`` loads the last
    build's records by level (called only when carrying); ``known`` gives the
    last build's leaves where the workspace keeps them itself (the RAPTOR
    tree stores every leaf), else they are read from the leaves file.
    """
    entry = workspace.manifest.entry(name)
    history = (entry or {}).get("update") or {}
    if entry is None:
        return UpdatePlan(None, "first build", len(leaves), 0)
    if settings.index.update == "rebuild":
        return UpdatePlan(None, "index.update is rebuild", len(leaves), 0)
    if entry.get("identity") != json.loads(json.dumps(identity)):  # as stored: tuples read back as lists
        return UpdatePlan(None, "settings or models changed", len(leaves), 0)
    if known is None:
        workspace.manifest.checkout(name)  # a PostgreSQL store's leaf list, fetched when built elsewhere
    before = list(known) if known is not None else _read_leaves(leaves_path(workspace, name))
    if before is None:
        return UpdatePlan(None, "no leaf list from the last build", len(leaves), 0)
    old, now = set(before), set(leaves)
    base = int(history.get("base_leaves") or len(old))
    changed = int(history.get("changed") or 0) + len(now - old) + len(old - now)
    if base == 0 or changed > settings.index.rebuild_share * base:
        return UpdatePlan(None, f"{changed} leaves changed since the last full build of {base} "
                                f"(over index.rebuild_share {settings.index.rebuild_share})", len(leaves), 0)
    nodes = previous()
    if not nodes:
        return UpdatePlan(None, "the last build has no records", len(leaves), 0)
    return UpdatePlan(LevelCarrier(nodes, old, settings.index.resummarize_share), "attached to the last build", base,
                      changed)


def record_leaves(workspace: Workspace, name: str, leaves: Sequence[str]) -> Path:
    """Write the leaves this build placed; returns the file (for the manifest's file record)."""
    path = leaves_path(workspace, name)
    atomic_write_bytes(path, json.dumps({"leaves": list(leaves)}).encode("utf-8"))
    return path
