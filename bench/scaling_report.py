"""Fit the scaling benchmark's figures and project them: per stage time ~ a N^b, storage, LLM cost.

Reads the ``bench/scaling.py`` results (the files given; by default ``bench/out/scaling_<N>.json``,
or, where a checkout has run none, the committed ``docs/scaling-data/scaling_<N>.json`` that
docs/scaling.md reports) and prints markdown for docs/scaling.md:

* the measured figures per stage and corpus size (CPU s, wall s, peak RSS, LLM calls);
* the fitted exponent b of CPU s ~ a N^b per stage, N the corpus tokens (on the two largest
  sizes measured, so fixed start-up costs of small runs weigh least) and the projected CPU s
  at 10x, 100x and 1000x the 2Wiki corpus and at a 100 M-token corpus;
* bytes on disk per artifact, per passage, and projected to 100 M tokens (the same fit);
* the LLM calls and prompt tokens of a real LLM extractor (``--llm-estimate``): the code's
  own pre-run estimator (``unirag.artifacts.cost``) over 6,119 passages of the 2Wiki length, TKG
  extraction with one gleaning pass and the hierarchies' summaries, scaled to 100 M tokens
  (the estimator is linear in passages: 12,238 passages give exactly twice the calls).

Run from the repository root::

    .venv/bin/python bench/scaling_report.py [FILES...] [--llm-estimate]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Where the results come from when no file is named: a fresh run's, else the committed ones.
RESULT_DIRS = (ROOT / "bench" / "out", ROOT / "docs" / "scaling-data")
TWOWIKI = 6119
SCALES = (10, 100, 1000)
CORPUS_TOKENS = 100_000_000
#: A stage below this many CPU seconds at its largest measured size is not fitted: start-up
#: costs and the 0.1 s sampling make its exponent meaningless.
MIN_FIT_CPU_S = 1.0


def fit_power(points: Iterable[tuple[float, float]]) -> tuple[float, float] | None:
    """(a, b) of y = a x^b through the two largest x with y > 0 (None with fewer than two)."""
    usable = sorted((x, y) for x, y in points if x > 0 and y > 0)[-2:]
    if len(usable) < 2 or usable[0][0] == usable[1][0]:
        return None
    (x0, y0), (x1, y1) = usable
    b = math.log(y1 / y0) / math.log(x1 / x0)
    return y1 / x1**b, b


#: store.sqlite tables by the stages that write them: a table counts for a run only when all
#: of them finished in it (a run stopped during extraction holds part of its extractions; the
#: communities table holds every hierarchy's, so GraphRAG's alone is not its size).
TABLE_STAGES: dict[str, tuple[str, ...]] = {
    "documents": ("ingest",), "document_sources": ("ingest",), "chunks": ("ingest",),
    "extractions": ("extraction",), "entities": ("graph",), "relationships": ("graph",), "claims": ("graph",),
    "chunk_links": ("chunk_links:pg",), "tree_nodes": ("tree",),
    "communities": ("communities:graphrag", "communities:archrag", "communities:hygrag", "communities:leanrag"),
    "community_links": ("communities:leanrag",),  # one row per link, before schema 3 of the community tables
    "community_link_levels": ("communities:archrag", "communities:hygrag", "communities:leanrag"),
}


def _rows_by_stage(results: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """stage -> corpus tokens -> row. Tokens, not passages, are the x axis: synthetic passages
    are longer than real ones (a renamed name is one more token), and a 100 M-token corpus is
    the target."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for result in results:
        for row in result["rows"]:
            out.setdefault(row["stage"], {})[result["chunk_tokens"]] = row
    return out


def _human_seconds(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def _human_bytes(size: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size:.0f} B"


def _size_label(tokens: int, by_tokens: dict[int, int]) -> str:
    return f"{by_tokens[tokens]:,}" if tokens in by_tokens else f"{tokens:,} tokens"


def measured_table(results: list[dict[str, Any]]) -> list[str]:
    sizes = [r["chunk_tokens"] for r in results]
    head = "| stage | " + " | ".join(f"{r['passages']:,} passages" for r in results) + " |"
    lines = [head, "|---|" + "---:|" * len(sizes), "| (CPU s / wall s / peak RSS MiB / LLM calls) |"
             + " |" * len(sizes)]
    for stage, by_size in _rows_by_stage(results).items():
        cells = []
        for n in sizes:
            row = by_size.get(n)
            cells.append("—" if row is None else
                         f"{row['cpu_s']:,} / {row['wall_s']:,} / {row['peak_rss_mib']:,} / {row['llm_calls']:,}")
        lines.append(f"| {stage} | " + " | ".join(cells) + " |")
    return lines


def projection_table(results: list[dict[str, Any]], twowiki_tokens: int) -> list[str]:
    """Per stage: exponent over corpus tokens, CPU at 10x/100x/1000x 2Wiki and at 100 M tokens,
    and the LLM calls (summaries over the nlp graph) at 100 M tokens."""
    passages = {r["chunk_tokens"]: r["passages"] for r in results}
    targets = [twowiki_tokens * s for s in SCALES] + [CORPUS_TOKENS]
    lines = ["| stage | fitted on (passages) | b | " + " | ".join(
        [f"CPU at {s}x 2Wiki" for s in SCALES] + ["CPU at 100 M tokens", "LLM calls at 100 M tokens"]) + " |",
             "|---|---|---:|" + "---:|" * (len(targets) + 1)]
    for stage, by_size in _rows_by_stage(results).items():
        fit = fit_power((n, row["cpu_s"]) for n, row in by_size.items())
        calls = fit_power((n, row["llm_calls"]) for n, row in by_size.items())
        used = sorted(n for n, row in by_size.items() if row["cpu_s"] > 0)[-2:]
        label = " → ".join(f"{passages[n]:,}" for n in used) or "—"
        if fit is None or by_size[max(by_size)]["cpu_s"] < MIN_FIT_CPU_S:
            why = "one size only" if fit is None else "< 1 s at the largest size"
            lines.append(f"| {stage} | {label} | — | {why}, not fitted |" + " |" * len(targets))
            continue
        a, b = fit
        cpu = [_human_seconds(a * n**b) for n in targets]
        llm = f"{calls[0] * CORPUS_TOKENS ** calls[1]:,.0f}" if calls else "0"
        lines.append(f"| {stage} | {label} | {b:.2f} | " + " | ".join(cpu) + f" | {llm} |")
    return lines


def _storage_parts(result: dict[str, Any], most_stages: int) -> dict[str, int]:
    storage = result.get("storage", {})
    finished = {row["stage"] for row in result["rows"]}
    parts = {f"files: {name}": size for name, size in storage.get("artifact_files", {}).items()}
    for name, size in storage.get("store_tables", {}).items():
        if name in TABLE_STAGES and finished.issuperset(TABLE_STAGES[name]):
            parts[f"store.sqlite: {name}"] = size
    if "stopped_during" not in result and len(finished) >= most_stages:
        # totals only of a run that built as much as the fullest run: a total over fewer
        # artifacts (a large size measured for some stages) would bend the fit
        for key, label in (("workspace_bytes", "**workspace total**"), ("store_bytes", "**store.sqlite total**"),
                           ("cache_bytes", "**model cache (replies + vectors)**")):
            if key in storage:
                parts[label] = storage[key]
    return parts


def storage_table(results: list[dict[str, Any]]) -> list[str]:
    """Bytes per artifact's files and per store table, per passage, projected to 100 M tokens."""
    parts: dict[str, dict[int, int]] = {}
    most_stages = max((len({row["stage"] for row in r["rows"]}) for r in results), default=0)
    for result in results:
        for name, size in _storage_parts(result, most_stages).items():
            parts.setdefault(name, {})[result["chunk_tokens"]] = size
    lines = ["| part | " + " | ".join(f"{r['passages']:,}" for r in results)
             + " | bytes per corpus token (largest) | b | at 100 M tokens |",
             "|---|" + "---:|" * (len(results) + 3)]
    for name, by_size in sorted(parts.items(), key=lambda item: -max(item[1].values())):
        if max(by_size.values()) < 1_000_000 and name.startswith("store"):
            continue  # the workspace's own small tables
        fit = fit_power(by_size.items())
        largest = max(by_size)
        cells = " | ".join(_human_bytes(by_size[r["chunk_tokens"]]) if r["chunk_tokens"] in by_size else "—"
                           for r in results)
        tail = f"{fit[1]:.2f} | {_human_bytes(fit[0] * CORPUS_TOKENS ** fit[1])}" if fit else "— | —"
        lines.append(f"| {name} | {cells} | {by_size[largest] / largest:,.1f} | {tail} |")
    return lines


def llm_estimate(passages: int, tokens_per_passage: int, artifacts: list[str]) -> dict[str, Any]:
    """The code's own estimate (``unirag.artifacts.cost``) of an LLM-extractor run over ``passages``
    passages of ``tokens_per_passage`` tokens: TKG with the default gleaning pass, plus ``artifacts``."""
    from unirag.config import Settings
    from unirag.artifacts.registry import resolve_names
    from unirag.artifacts.cost import estimate_index_cost
    from unirag.pipeline import index_targets

    settings = Settings.model_validate({"chat": {"base_url": "http://127.0.0.1:1/v1", "model": "any"},
                                        "graph": {"extractor": "llm"}, "index": {"summarizer": "llm"}})

    class _Named:
        name = "any"

    incoming = [(str(i), tokens_per_passage) for i in range(passages)]
    names = index_targets(None, settings, ["tkg"], resolve_names(artifacts))
    return estimate_index_cost(None, settings, _Named(), names, incoming).to_json()  # type: ignore[arg-type]


def merge_runs(runs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per corpus size: runs of the same size (a long size measured in parts) are
    joined, a later run's row replacing an earlier one's for the same stage, its files and
    tables added; sorted by size."""
    by_size: dict[int, dict[str, Any]] = {}
    for run in runs:
        size = run["passages"]
        if size not in by_size:
            by_size[size] = run
            continue
        merged = by_size[size]
        later = {row["stage"]: row for row in run["rows"]}
        merged["rows"] = [later.pop(row["stage"], row) for row in merged["rows"]] + list(later.values())
        for key in ("artifact_files", "store_tables"):
            merged.setdefault("storage", {}).setdefault(key, {}).update(run.get("storage", {}).get(key, {}))
        merged["graph_counts"] = run.get("graph_counts") or merged.get("graph_counts")
        merged["stopped_during"] = run.get("stopped_during", merged.get("stopped_during"))
        merged["code"] = merged["code"] if merged["code"] == run["code"] else f"{merged['code']}; {run['code']}"
    return [by_size[size] for size in sorted(by_size)]


def _load_end(result: dict[str, Any]) -> str:
    """The 1-minute load average when the run ended ('?' for a run killed before it wrote one)."""
    end = result.get("load_average_end")
    return f"{end[0]:.1f}" if end else "?"


def default_files() -> list[Path]:
    """The first of ``RESULT_DIRS`` that holds results: a checkout's own runs win over the
    committed figures, never mixed with them (they may be of different code)."""
    for folder in RESULT_DIRS:
        found = sorted(folder.glob("scaling_*.json"))
        if found:
            return found
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--llm-estimate", action="store_true",
                        help="also print the LLM extractor's estimated calls/tokens at 2Wiki size and 100 M tokens")
    args = parser.parse_args()
    files = args.files or default_files()
    results = merge_runs(json.loads(f.read_text(encoding="utf-8")) for f in files)
    real = [r for r in results if not r.get("synthetic")]
    twowiki = (real or results)[-1]
    tokens_per_passage = twowiki["chunk_tokens"] / twowiki["passages"]
    for result in results:
        print(f"- {result['passages']:,} passages ({result.get('synthetic', 0):,} synthetic), "
              f"{result.get('chunk_tokens', 0):,} tokens, code {result['code']}, load average "
              f"{result['load_average_start'][0]:.1f} -> {_load_end(result)}, "
              f"graph {result.get('graph_counts')}")
    print("\n### Measured\n")
    print("\n".join(measured_table(results)))
    print(f"\n### Fitted on corpus tokens, projected (2Wiki: {twowiki['chunk_tokens']:,} tokens)\n")
    print("\n".join(projection_table(results, twowiki["chunk_tokens"])))
    print("\n### Storage\n")
    print("\n".join(storage_table(results)))
    if args.llm_estimate:
        scale = CORPUS_TOKENS / tokens_per_passage / TWOWIKI
        print(f"\n### LLM extractor, the code's estimate at 2Wiki size, and x{scale:.1f} for 100 M tokens\n")
        for artifacts in (["graphrag"], ["graphrag", "tree", "archrag", "hygrag", "leanrag"]):
            estimate = llm_estimate(TWOWIKI, round(tokens_per_passage), artifacts)
            steps = ", ".join(f"{s['step']} {s['llm_calls']:,} calls / {s['prompt_tokens']:,} tokens"
                              for s in estimate["steps"])
            print(f"- TKG + {'+'.join(artifacts)}: {estimate['llm_calls']:,} calls, {estimate['prompt_tokens']:,} "
                  f"prompt tokens ({steps}); at 100 M tokens {estimate['llm_calls'] * scale:,.0f} calls, "
                  f"{estimate['prompt_tokens'] * scale:,.0f} prompt tokens")


if __name__ == "__main__":
    main()
