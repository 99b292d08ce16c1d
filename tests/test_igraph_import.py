"""igraph and leidenalg are imported plainly (no module-table trick hides matplotlib from them)
and cluster as the hierarchies use them."""

from __future__ import annotations

import igraph as ig
import leidenalg


def test_igraph_and_leidenalg_cluster_two_components() -> None:
    graph = ig.Graph(n=4, edges=[(0, 1), (2, 3)])
    parts = leidenalg.find_partition(graph, leidenalg.ModularityVertexPartition, seed=1)
    assert sorted(len(p) for p in parts) == [2, 2]
