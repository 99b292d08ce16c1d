"""The RAPTOR tree (unirag.hierarchy.tree): clustering, summaries, recursion, determinism, caching.

Fast tests use ``reducer="pca"`` for the GMM path: UMAP's numba kernels take
~30 s to compile in every new process. The one UMAP test is opt-in
(``-m slow``) for that reason.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEmbedder, RecordingProgress, ScriptedChat

from unirag.hierarchy.layered import BuildModels
from unirag.hierarchy.tree import (
    EMBED_STAGE,
    SUMMARY_STAGE,
    TreeConfig,
    TreeNode,
    TreeResult,
    _gmm_soft,
    build_tree,
    cluster_layer,
    node_id,
)
from unirag.errors import LLMError
from unirag.prompts.prompt import load_prompt
from unirag.llm.base import ChatRequest, EmbeddingBatch
from unirag.llm.cache import ResponseCache
from unirag.llm.layers import CachedChat
from unirag.text.tokenizer import get_tokenizer

GMM = TreeConfig(method="gmm", reducer="pca", max_clusters=8)  # a short BIC sweep keeps tests fast
KMEANS = TreeConfig(method="kmeans")


class EchoChat(ScriptedChat):
    """Summarises by quoting the first words of each ``- `` line: distinct, deterministic summaries."""

    def answer_for(self, request: ChatRequest) -> str:
        lines = [line[2:] for line in self.user_message(request).splitlines() if line.startswith("- ")]
        return "Summary: " + "; ".join(" ".join(line.split()[:4]) for line in lines) + "."


class BlankChat(ScriptedChat):
    def answer_for(self, request: ChatRequest) -> str:
        return "  \n "


class StageEmbedder(HashEmbedder):
    """Records the stage of each embedding call."""

    def __init__(self) -> None:
        super().__init__()
        self.stages: list[str] = []

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        self.stages.append(stage)
        return super().embed(texts, stage)


def blob_leaves(
    blobs: int = 3, size: int = 8, dim: int = 32, seed: int = 0, sentences: int = 1
) -> list[tuple[str, str, np.ndarray]]:
    """``blobs`` tight, well-separated groups of unit vectors; leaf ids say which blob."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(blobs, dim))
    leaves = []
    for b in range(blobs):
        for i in range(size):
            vector = centres[b] + 0.05 * rng.normal(size=dim)
            text = " ".join(f"Leaf {i} of blob {b} states fact {j} about topic {b}." for j in range(sentences))
            leaves.append((f"b{b}-c{i}", text, (vector / np.linalg.norm(vector)).astype(np.float32)))
    return leaves


def random_leaves(count: int, dim: int = 4, seed: int = 0) -> list[tuple[str, str, np.ndarray]]:
    """Unstructured unit vectors: clusters come out balanced enough to build several layers."""
    vectors = np.random.default_rng(seed).normal(size=(count, dim))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [(f"c{i}", f"Chunk {i} says something.", vectors[i].astype(np.float32)) for i in range(count)]


def blob_of(node_id: str) -> str:
    return node_id.split("-")[0]


def children_sets(result: TreeResult, layer: int) -> list[set[str]]:
    return [set(node.children) for node in result.layer(layer)]


def run(leaves, config: TreeConfig, chat: ScriptedChat | None = None, **kwargs) -> TreeResult:
    return build_tree(leaves, BuildModels(chat or EchoChat(), StageEmbedder(), **kwargs), config)


# -- clustering recovers known structure --------------------------------------------


@pytest.mark.numeric  # clusters fitted with BLAS products
def test_kmeans_layer_one_is_exactly_the_blobs_then_one_root() -> None:
    leaves = blob_leaves()
    chat = EchoChat()
    result = run(leaves, KMEANS, chat)
    blobs = [{leaf_id for leaf_id, _, _ in leaves if leaf_id.startswith(f"b{b}-")} for b in range(3)]
    assert sorted(children_sets(result, 1), key=sorted) == blobs
    [root] = result.layer(2)
    assert set(root.children) == {node.id for node in result.layer(1)}
    assert result.depth == 2 and chat.calls == 4
    assert result.stats["summaries"] == 4 and result.stats["levels"] == 2 and result.stats["singletons"] == 0


@pytest.mark.numeric  # clusters fitted with BLAS products
def test_gmm_layer_one_is_exactly_the_blobs() -> None:
    leaves = blob_leaves()
    result = run(leaves, GMM)
    blobs = [{leaf_id for leaf_id, _, _ in leaves if leaf_id.startswith(f"b{b}-")} for b in range(3)]
    assert sorted(children_sets(result, 1), key=sorted) == blobs
    assert len(result.layer(2)) == 1  # three summaries: a tiny layer is one cluster, the root


@pytest.mark.numeric  # clusters fitted with BLAS products
def test_gmm_soft_assignment_puts_an_ambiguous_point_in_both_clusters() -> None:
    spread = np.linspace(-1.0, 1.0, 100)[:, None]  # two mirror-image groups and their midpoint
    x = np.concatenate([spread - 2.0, spread + 2.0, [[0.0]]])
    clusters = _gmm_soft(x, TreeConfig(max_clusters=2))
    assert len(clusters) == 2
    assert all(200 in members for members in clusters)  # the midpoint has ~0.5 posterior in each
    assert sorted(len(members) for members in clusters) == [101, 101]
    # Above the midpoint's posterior, it still keeps its most likely cluster: no node is dropped.
    clusters = _gmm_soft(x, TreeConfig(max_clusters=2, threshold=0.9))
    assert sorted(i for members in clusters for i in members) == list(range(201))


@pytest.mark.numeric  # clusters fitted with BLAS products
def test_gmm_local_pass_keeps_clusters_inside_their_blob() -> None:
    # Two blobs of 16: each global cluster is bigger than n_components + 1, so it is clustered again locally.
    leaves = blob_leaves(blobs=2, size=16)
    vectors = np.stack([vector for _, _, vector in leaves])
    clusters = cluster_layer(vectors, [10] * len(leaves), GMM)
    assert {i for cluster in clusters for i in cluster} == set(range(32))
    assert all(len({i // 16 for i in cluster}) == 1 for cluster in clusters)
    assert clusters == sorted(set(clusters)) and all(list(c) == sorted(c) for c in clusters)


def test_bic_patience_stops_the_sweep_without_changing_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three blobs: BIC is lowest at 3 and rises after, so patience 2 fits 5 mixtures, not 20."""
    import sklearn.mixture

    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(centre, 0.05, size=(20, 2)) for centre in (-3.0, 0.0, 3.0)])
    fitted: list[int] = []
    real = sklearn.mixture.GaussianMixture.fit

    def counting_fit(self, data, y=None):  # type: ignore[no-untyped-def]
        fitted.append(self.n_components)
        return real(self, data, y)

    monkeypatch.setattr(sklearn.mixture.GaussianMixture, "fit", counting_fit)
    full = _gmm_soft(x, TreeConfig(max_clusters=20, bic_patience=0))
    assert len(fitted) == 20
    fitted.clear()
    bounded = _gmm_soft(x, TreeConfig(max_clusters=20, bic_patience=2))
    assert bounded == full and len(full) == 3 and fitted == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError):
        TreeConfig(bic_patience=-1).validate()


def test_cached_umap_turns_on_numbas_disk_cache() -> None:
    from numba.core.caching import NullCache

    from unirag.hierarchy.jit_cache import cached_umap

    umap = cached_umap()
    from umap import layouts

    assert hasattr(umap, "UMAP")
    assert not isinstance(layouts._nb_optimize_layout_euclidean_single_epoch._cache, NullCache)


@pytest.mark.slow
def test_gmm_with_umap_is_pure_and_deterministic(request: pytest.FixtureRequest) -> None:
    if "slow" not in (request.config.option.markexpr or ""):
        pytest.skip("compiles UMAP's numba kernels (~30 s); run with -m slow")
    leaves = blob_leaves()
    first = run(leaves, TreeConfig())
    second = run(leaves, TreeConfig())
    assert [n.id for n in first.nodes] == [n.id for n in second.nodes]
    # UMAP + BIC on 8-point blobs may split a blob, but never mixes two.
    assert all(len({blob_of(c) for c in children}) == 1 for children in children_sets(first, 1))
    assert set().union(*children_sets(first, 1)) == {leaf_id for leaf_id, _, _ in leaves}


# -- structure ----------------------------------------------------------------------


@pytest.mark.parametrize("config", [GMM, KMEANS], ids=["gmm", "kmeans"])
def test_every_node_records_its_layer_and_children(config: TreeConfig) -> None:
    leaves = blob_leaves()
    result = run(leaves, TreeConfig(method=config.method, reducer=config.reducer, cluster_size=3))
    by_id = {node.id: node for node in result.nodes}
    assert len(by_id) == len(result.nodes)
    assert [n.id for n in result.nodes[: len(leaves)]] == [leaf_id for leaf_id, _, _ in leaves]
    assert [n.layer for n in result.nodes] == sorted(n.layer for n in result.nodes)
    for node in result.nodes:
        assert isinstance(node, TreeNode)
        assert node.vector.dtype == np.float32 and abs(np.linalg.norm(node.vector) - 1.0) < 1e-5
        if node.layer == 0:
            assert node.children == []
        else:
            assert len(node.children) >= 2
            assert all(by_id[child].layer == node.layer - 1 for child in node.children)
            assert node.id == node_id(node.layer, node.children)
            assert node.id.startswith(f"tree-{node.layer}-") and len(node.id) == len("tree-1-") + 12
            assert node.text.startswith("Summary:")
    assert result.depth >= 2


def test_summary_requests_are_well_formed(tmp_path: Path) -> None:
    leaves = blob_leaves()
    chat, embedder = EchoChat(), StageEmbedder()
    config = TreeConfig(method="kmeans", summary_max_words=77, summary_max_tokens=99)
    result = build_tree(leaves, BuildModels(chat, embedder, temperature=0.3), config)
    prompt = load_prompt("summarize_cluster")
    assert all(r.stage == SUMMARY_STAGE and r.prompt_version == prompt.cache_version for r in chat.requests)
    assert all(r.max_tokens == 99 and r.temperature == 0.3 for r in chat.requests)
    first = result.layer(1)[0]
    texts = {leaf_id: text for leaf_id, text, _ in leaves}
    expected = prompt.messages(max_words="77", texts="\n\n".join("- " + texts[c] for c in first.children))
    assert expected in [r.messages for r in chat.requests]
    assert "at most 77 words" in ScriptedChat.user_message(chat.requests[0])
    assert embedder.stages == [EMBED_STAGE, EMBED_STAGE]  # one call per layer
    assert [len(batch) for batch in embedder.batches] == [3, 1]


def test_progress_has_one_task_per_layer() -> None:
    progress = RecordingProgress()
    run(blob_leaves(), KMEANS, progress=progress)
    assert progress.tasks == [("tree layer 1: summarising clusters", 3), ("tree layer 2: summarising clusters", 1)]
    assert progress.advanced == {"tree layer 1: summarising clusters": 3, "tree layer 2: summarising clusters": 1}


# -- LLM calls: once per cluster of two or more, never again with a cache -----------------


def test_singletons_get_no_parent_and_no_llm_call() -> None:
    leaves = blob_leaves(blobs=2)
    rng = np.random.default_rng(99)
    outlier = rng.normal(size=32)
    leaves.append(("outlier", "A lone fact about nothing else.", (outlier / np.linalg.norm(outlier)).astype(np.float32)))
    chat = EchoChat()
    result = run(leaves, KMEANS, chat)  # k = ceil(17 / 8) = 3: the two blobs and the outlier alone
    assert chat.calls == 2 and len(result.layer(1)) == 2
    assert all("outlier" not in node.children for node in result.nodes)
    assert all("lone fact" not in ScriptedChat.user_message(r) for r in chat.requests)
    assert result.stats["singletons"] == 1
    assert result.depth == 1  # two summaries < min_layer_size 3


def test_calls_once_per_cluster() -> None:
    chat = EchoChat()
    result = run(blob_leaves(), TreeConfig(method="kmeans", cluster_size=3), chat)
    summaries = [node for node in result.nodes if node.layer > 0]
    assert chat.calls == len(summaries) == result.stats["summaries"]
    assert len({str(r.messages) for r in chat.requests}) == chat.calls


@pytest.mark.parametrize("config", [GMM, KMEANS], ids=["gmm", "kmeans"])
def test_node_ids_and_texts_are_stable_across_runs(config: TreeConfig) -> None:
    leaves = blob_leaves(blobs=3, size=8, seed=5)
    first = run(leaves, config, concurrency=1)
    slow_chat = EchoChat(delay=0.02)
    second = run(leaves, config, slow_chat, concurrency=4)
    assert slow_chat.max_in_flight > 1
    assert [(n.id, n.text, n.children) for n in first.nodes] == [(n.id, n.text, n.children) for n in second.nodes]
    assert all(np.array_equal(a.vector, b.vector) for a, b in zip(first.nodes, second.nodes))


@pytest.mark.parametrize("config", [GMM, KMEANS], ids=["gmm", "kmeans"])
def test_rebuild_with_cached_chat_makes_no_new_calls(tmp_path: Path, config: TreeConfig) -> None:
    leaves = blob_leaves()
    cache = ResponseCache(tmp_path / "cache.sqlite")
    try:
        inner = EchoChat()
        first = build_tree(leaves, BuildModels(CachedChat(inner, cache), HashEmbedder()), config)
        assert inner.calls == first.stats["summaries"] > 0 and first.stats["summary_cache_hits"] == 0
        again = EchoChat()
        second = build_tree(leaves, BuildModels(CachedChat(again, cache), HashEmbedder()), config)
        assert again.calls == 0
        assert second.stats["summary_cache_hits"] == second.stats["summaries"] == first.stats["summaries"]
        assert [(n.id, n.text) for n in first.nodes] == [(n.id, n.text) for n in second.nodes]
    finally:
        cache.close()


def test_failed_summary_call_propagates() -> None:
    chat = EchoChat(fail_on={2: LLMError("endpoint down")})
    with pytest.raises(LLMError, match="endpoint down"):
        run(blob_leaves(), KMEANS, chat, concurrency=1)


def test_empty_summary_falls_back_to_first_sentences() -> None:
    leaves = blob_leaves(sentences=3)
    result = run(leaves, KMEANS, BlankChat())
    node = result.layer(1)[0]
    texts = {leaf_id: text for leaf_id, text, _ in leaves}
    assert node.text == " ".join(texts[c].split(". ")[0] + "." for c in node.children)
    assert result.stats["fallback_summaries"] == result.stats["summaries"] == 4


# -- stopping -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "config", [TreeConfig(reducer="pca", max_clusters=15), TreeConfig(method="kmeans", cluster_size=3)], ids=["gmm", "kmeans"]
)
def test_max_layers_stops_the_recursion(config: TreeConfig) -> None:
    leaves = random_leaves(30)
    unlimited = run(leaves, config)
    assert unlimited.depth == 3 and len(unlimited.layer(3)) == 1  # 30 -> 10-12 -> 3-4 -> root
    capped = run(leaves, replace(config, max_layers=2))
    assert capped.depth == 2 and capped.stats["levels"] == 2
    assert [n.id for n in capped.nodes] == [n.id for n in unlimited.nodes if n.layer <= 2]


def test_min_layer_size_stops_the_recursion() -> None:
    leaves = blob_leaves()
    chat = EchoChat()
    assert run(leaves, TreeConfig(method="kmeans", min_layer_size=25), chat).depth == 0 and chat.calls == 0
    result = run(leaves, TreeConfig(method="kmeans", min_layer_size=4))
    assert result.depth == 1 and len(result.layer(1)) == 3  # three nodes < 4: layer 2 is not built


@pytest.mark.parametrize("config", [GMM, KMEANS], ids=["gmm", "kmeans"])
@pytest.mark.parametrize("count", [0, 1, 2])
def test_one_or_two_leaves_are_returned_alone(config: TreeConfig, count: int) -> None:
    leaves = blob_leaves(blobs=1, size=count)
    chat = EchoChat()
    result = run(leaves, config, chat)
    assert [n.id for n in result.nodes] == [leaf_id for leaf_id, _, _ in leaves]
    assert chat.calls == 0 and result.stats["leaves"] == count and result.stats["levels"] == 0


@pytest.mark.parametrize("config", [GMM, KMEANS], ids=["gmm", "kmeans"])
def test_three_leaves_get_one_root(config: TreeConfig) -> None:
    leaves = blob_leaves(blobs=3, size=1)
    chat = EchoChat()
    # min_layer_size=1 would let a one-node layer be clustered: the root must end the tree by itself.
    result = run(leaves, replace(config, min_layer_size=1), chat)
    [root] = result.layer(1)
    assert set(root.children) == {leaf_id for leaf_id, _, _ in leaves} and result.depth == 1
    assert chat.calls == 1 and result.stats["levels"] == 1 and result.stats["singletons"] == 0


@pytest.mark.parametrize("method", ["gmm", "kmeans"])
def test_max_cluster_tokens_splits_an_oversize_cluster(method: str) -> None:
    leaves = blob_leaves(blobs=1, size=8, sentences=6)  # one blob: a single cluster without the budget
    tokens = {leaf_id: get_tokenizer().count(text) for leaf_id, text, _ in leaves}
    budget = 3 * max(tokens.values())
    assert sum(tokens.values()) > budget
    unlimited = run(leaves, TreeConfig(method=method, reducer="pca"))
    assert len(unlimited.layer(1)) == 1 and unlimited.stats["oversize_splits"] == 0
    result = run(leaves, TreeConfig(method=method, reducer="pca", max_cluster_tokens=budget))
    layer1 = result.layer(1)
    assert len(layer1) > 1 and result.stats["oversize_splits"] >= 1 and result.stats["forced_bisections"] >= 1
    for node in layer1:
        assert len(node.children) <= 2 or sum(tokens[c] for c in node.children) <= budget
    # Halving 8 equal-size texts: 8 -> 4 + 4 -> four pairs, nobody left without a parent.
    assert set().union(*(node.children for node in layer1)) == set(tokens)
    assert result.stats["singletons"] == 0


# -- input checks -------------------------------------------------------------------


def test_duplicate_leaf_ids_and_bad_config_are_refused() -> None:
    leaves = blob_leaves(blobs=1, size=3)
    with pytest.raises(ValueError, match="duplicate leaf ids"):
        run(leaves + [leaves[0]], KMEANS)
    with pytest.raises(ValueError, match="threshold"):
        run(leaves, TreeConfig(threshold=1.5))
    with pytest.raises(ValueError, match="method"):
        run(leaves, TreeConfig(method="spectral"))  # type: ignore[arg-type]


# -- upper-level drift in an incremental update ---------------------------------------------------


def _carrier_after(result: TreeResult, share: float) -> "LevelCarrier":
    """What an update carries from ``result``, as the tree artifact builds it (leaves beneath each
    node, and each node's payload with the leaves a kept summary was written from)."""
    from unirag.hierarchy.attach import LevelCarrier, PreviousNode
    from unirag.hierarchy.tree import leaves_beneath

    beneath = leaves_beneath([(n.id, n.layer, n.children) for n in result.nodes])
    previous: dict[int, list[PreviousNode]] = {}
    for n in result.nodes:
        if n.layer > 0:
            previous.setdefault(n.layer, []).append(PreviousNode(n.id, tuple(n.children), n.text, n,
                                                                 beneath=beneath[n.id]))
    return LevelCarrier(previous, {n.id for n in result.nodes if n.layer == 0}, share)


def _drift_leaves(count: int, start: int = 0) -> list[tuple[str, str, np.ndarray]]:
    embedder = HashEmbedder()
    texts = [f"Passage {i} tells of topic {i % 5} and item {i}." for i in range(start, start + count)]
    vectors = np.asarray(embedder.embed(texts).vectors, dtype=np.float32)
    return [(f"c{i:03d}", text, vectors[k]) for k, (i, text) in enumerate(zip(range(start, start + count), texts))]


@pytest.mark.numeric  # clusters fitted with BLAS products
def test_an_insert_keeps_upper_summaries_within_the_drift_share_and_never_lets_drift_creep() -> None:
    from unirag.hierarchy.tree import leaves_beneath

    config = TreeConfig(method="kmeans", cluster_size=4, max_layers=3)
    base = _drift_leaves(48)
    first = build_tree(base, BuildModels(EchoChat(), HashEmbedder()), config)
    assert max(n.layer for n in first.nodes) >= 2
    one_more = base + _drift_leaves(1, start=48)

    def update(previous: TreeResult, leaves: list, share: float) -> tuple[TreeResult, EchoChat]:
        chat = EchoChat()
        return build_tree(leaves, BuildModels(chat, HashEmbedder()), config, _carrier_after(previous, share)), chat

    kept, kept_chat = update(first, one_more, 0.1)
    strict, strict_chat = update(first, one_more, 0.0)
    # With no drift allowed every ancestor of the changed cluster is asked again; within 10 % they keep
    # their text, and record the leaves it was written from.
    assert len(kept_chat.requests) < len(strict_chat.requests)
    assert kept.stats["update"]["kept_within_drift"] > 0 and strict.stats["update"].get("kept_within_drift", 0) == 0
    old_text = {n.text for n in first.nodes if n.layer >= 2}
    beneath = leaves_beneath([(n.id, n.layer, n.children) for n in kept.nodes])
    drifted = [n for n in kept.nodes if n.payload.get("written_from")]
    assert drifted and all(n.text in old_text for n in drifted)
    for node in drifted:
        basis = set(node.payload["written_from"])
        assert "c048" in beneath[node.id] and "c048" not in basis
        assert len(set(beneath[node.id]) ^ basis) / len(set(beneath[node.id]) | basis) <= 0.1
    # The level-1 cluster the new leaf joined changed members: it is always summarised anew.
    joined = next(n for n in kept.nodes if n.layer == 1 and "c048" in n.children)
    assert joined.text not in {n.text for n in first.nodes}
    # Drift is measured against the text's basis, not the last update: leaves added one at a time
    # eventually re-ask every ancestor, however small each step.
    current, leaves, asked_again = kept, one_more, set()
    for step in range(1, 12):
        leaves = leaves + _drift_leaves(1, start=48 + step)
        current, _ = update(current, leaves, 0.1)
        beneath = leaves_beneath([(n.id, n.layer, n.children) for n in current.nodes])
        for node in current.nodes:
            basis = set(node.payload.get("written_from") or beneath[node.id])
            now = set(beneath[node.id])
            assert len(now ^ basis) / len(now | basis) <= 0.1 + 1e-9, (step, node.id)
        asked_again.update(level["level"] for level in current.stats["per_level"]
                           if level["level"] >= 2 and level["summaries"] > 0)
    assert 2 in asked_again
