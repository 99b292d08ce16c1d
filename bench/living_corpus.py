"""Benchmark: what inserting and deleting 1 % of a corpus costs, next to a full build.

Three workspaces over the 2Wiki passages (``../shared/datasets``), each with its
own model cache so nothing is shared between them:

* full   -- index every passage: every graph (kg, pg, hybrid, tree) and every
  hierarchy (GraphRAG, ArchRAG, HyGRAG, LeanRAG) with its vector indices;
* grow   -- index all but the last 1 % the same way, then **insert** the 1 %
  (a second file) and afterwards **delete** it again.

The extractor is the zero-LLM ``nlp`` one; community summaries and reports are
asked of an OpenAI-compatible endpoint. The endpoint is a local stand-in that
answers instantly (a deterministic short reply, hashed 384-d vectors for
embeddings), started in its own process, so the figures are unirag's own CPU
and the model calls it makes, not a model's speed.

Printed per step: LLM calls, prompt tokens, embedding calls, CPU seconds of this
process (user + system) and wall seconds; the insert and delete rows as a share
of the full build; the delete row also counts the communities whose member set
changed (what it must re-summarise at most).

Run from the repository root::

    .venv/bin/python bench/living_corpus.py [--limit 6119] [--share 0.01] [--keep DIR]
                                            [--no-full [--snapshot DIR [--warm-process]]]

The markdown table goes to stdout, the figures to ``bench/out/living_corpus.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "datasets" / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
GRAPHS = ["kg", "pg", "hybrid", "tree"]
DIM = 384


def _vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(DIM)
    return (v / np.linalg.norm(v)).round(6).tolist()


class _Handler(BaseHTTPRequestHandler):
    """An instant OpenAI-compatible endpoint: chat replies quote the prompt's first words."""

    def do_POST(self) -> None:  # noqa: N802 — the http.server hook name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/embeddings"):
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            reply: dict[str, Any] = {
                "data": [{"index": i, "embedding": _vector(t)} for i, t in enumerate(texts)],
                "usage": {"prompt_tokens": sum(len(t) // 4 + 1 for t in texts)},
            }
        else:
            prompt = " ".join(m["content"] for m in body["messages"])
            words = prompt.split()[-40:]
            digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8]
            text = json.dumps({"title": f"Community {digest}", "summary": " ".join(words),
                               "rating": 5, "rating_explanation": "stand-in", "findings": [
                                   {"summary": "stand-in", "explanation": " ".join(words[:20])}]})
            reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": len(prompt) // 4 + 1, "completion_tokens": len(text) // 4 + 1}}
        data = json.dumps(reply).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — silence per-request lines
        return


def _serve(port_queue: Any) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    port_queue.put(server.server_address[1])
    server.serve_forever()


def start_stand_in() -> tuple[multiprocessing.process.BaseProcess, str]:
    """The instant endpoint in its own process (its CPU is not the benchmark's) and its base URL;
    the caller terminates the process. Shared with ``bench/scaling.py``."""
    context = multiprocessing.get_context("spawn")
    queue: Any = context.Queue()
    server = context.Process(target=_serve, args=(queue,), daemon=True)
    server.start()
    return server, f"http://127.0.0.1:{queue.get(timeout=30)}/v1"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stand_in_settings(base_url: str) -> str:
    """unirag.yaml for a workspace on the stand-in: the zero-LLM extractor, LLM summaries."""
    return (
        "chat:\n"
        f"  base_url: {base_url}\n  model: stand-in\n"
        "embedding:\n"
        f"  base_url: {base_url}\n  model: stand-in-embedding\n  batch_size: 256\n"
        "graph:\n  extractor: nlp\n"
        "index:\n  summarizer: llm\n"
    )


def _measure(label: str, action: Any) -> dict[str, Any]:
    cpu, wall = _cpu(), time.perf_counter()
    report = action()
    total = report.ledger.total()
    row = {
        "step": label, "llm_calls": total.llm_calls, "cache_hits": total.cache_hits,
        "prompt_tokens": total.prompt_tokens, "embedding_calls": total.embedding_calls,
        "cpu_s": round(_cpu() - cpu, 1), "wall_s": round(time.perf_counter() - wall, 1),
        "rebuilt": list(report.rebuilt),
        "llm_calls_by_stage": {stage: u.llm_calls for stage, u in sorted(report.ledger.stages.items()) if u.llm_calls},
    }
    print(f"{label}: {row['llm_calls']} LLM calls, {row['cpu_s']} CPU s, {row['wall_s']} s; by stage: "
          f"{row['llm_calls_by_stage']}", file=sys.stderr)
    return row


def _point_at(root: Path, base_url: str) -> None:
    """A copied workspace's settings, pointed at this run's stand-in endpoint."""
    import re

    settings = root / "unirag.yaml"
    settings.write_text(re.sub(r"base_url: \S+", f"base_url: {base_url}", settings.read_text(encoding="utf-8")),
                        encoding="utf-8")


def _forget_chat_replies(root: Path) -> None:
    """Empty the workspace's cached chat replies (embeddings stay): a measured step then pays
    for every summary it asks, even one a warm-up asked before."""
    import sqlite3

    db = sqlite3.connect(root / "cache" / "llm.sqlite")
    with db:
        db.execute("DELETE FROM chat")
    db.close()


def _members(workspace: Any) -> dict[str, set[frozenset[str]]]:
    from unirag.hierarchy.community_store import CommunityStore

    store = CommunityStore(workspace)
    return {name: {frozenset(c.entities) for c in store.load(name)}
            for name in ("graphrag", "archrag", "hygrag", "leanrag")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--limit", type=int, default=0, help="first N passages (0: all)")
    parser.add_argument("--share", type=float, default=0.01, help="the share of passages inserted and deleted")
    parser.add_argument("--keep", type=Path, help="keep the workspaces under this new directory")
    parser.add_argument("--no-full", action="store_true",
                        help="skip the separate full build and compare with the base build (the other 99 %%), "
                             "halving the time on a big corpus")
    parser.add_argument("--snapshot", type=Path,
                        help="with --no-full: keep the base build (workspace and its row) in this directory, "
                             "or start from it when it is there, to measure insert and delete again")
    parser.add_argument("--warm-process", action="store_true",
                        help="with --snapshot: before measuring, insert and delete the same passages in a separate "
                             "copy of the base (not measured), so the measured insert runs in a process that has "
                             "loaded its libraries and models already, as a server or a library caller does; the "
                             "measured workspace is untouched by it")
    parser.add_argument("--warm-up", action="store_true",
                        help="with --snapshot: insert and delete the same passages once before measuring (so "
                             "files a newer version of the code keeps for updates exist). Flatters the "
                             "measured insert: links re-summarised in the warm-up were written from these "
                             "passages' relations. Without it the measured insert is the first update after "
                             "the base build. Either way the chat replies of the model cache are forgotten "
                             "first, so the measured steps ask every call they need")
    args = parser.parse_args()

    from unirag.config import load_settings
    from unirag.artifacts.registry import resolve_names
    from unirag.llm.factory import build_stack
    from unirag.pipeline import run_delete, run_index
    from unirag.progress import Progress
    from unirag.workspace import Workspace

    passages = json.loads(args.corpus.read_text(encoding="utf-8"))
    if args.limit:
        passages = passages[: args.limit]
    n_new = max(1, round(len(passages) * args.share))
    server, base_url = start_stand_in()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="unirag-living-"))
    root.mkdir(parents=True, exist_ok=True)
    everything, base, new = root / "all.json", root / "base.json", root / "new.json"
    everything.write_text(json.dumps(passages), encoding="utf-8")
    base.write_text(json.dumps(passages[:-n_new]), encoding="utf-8")
    new.write_text(json.dumps(passages[-n_new:]), encoding="utf-8")

    def index(name: str, sources: list[Path]) -> Any:
        ws = Workspace.init(root / name, stand_in_settings(base_url))
        settings = load_settings(ws.root)
        try:
            return run_index(ws, sources, settings, build_stack(settings, ws.cache()), progress=Progress(),
                             graphs=GRAPHS, artifacts=resolve_names(["all"]))
        finally:
            ws.close()

    rows = [] if args.no_full else [_measure(f"full build ({len(passages)} passages)",
                                             lambda: index("full", [everything]))]
    snapshot = args.snapshot if args.no_full else None
    if snapshot is not None and (snapshot / "base_row.json").exists():
        import shutil

        shutil.copytree(snapshot / "grow", root / "grow")
        _point_at(root / "grow", base_url)
        rows.append(json.loads((snapshot / "base_row.json").read_text(encoding="utf-8")))
        print(f"base build: from the snapshot in {snapshot}", file=sys.stderr)
    else:
        rows.append(_measure(f"base build ({len(passages) - n_new} passages)", lambda: index("grow", [base])))
        if snapshot is not None:
            import shutil

            shutil.copytree(root / "grow", snapshot / "grow")
            (snapshot / "base_row.json").write_text(json.dumps(rows[-1]), encoding="utf-8")
    if args.warm_process and snapshot is not None:
        import shutil

        shutil.copytree(snapshot / "grow", root / "warm")
        _point_at(root / "warm", base_url)
        _measure(f"unmeasured insert {n_new} passages into another copy (a warm process)", lambda: index("warm", [new]))
        ws = Workspace.open(root / "warm")
        settings = load_settings(ws.root)
        run_delete(ws, [str(new)], settings, build_stack(settings, ws.cache()), Progress())
        ws.close()
        shutil.rmtree(root / "warm")
    if args.warm_up:
        _measure(f"warm-up insert {n_new} passages", lambda: index("grow", [new]))
        ws = Workspace.open(root / "grow")
        settings = load_settings(ws.root)
        _measure(f"warm-up delete {n_new} passages",
                 lambda: run_delete(ws, [str(new)], settings, build_stack(settings, ws.cache()), Progress()))
        ws.close()
    # The measured steps pay for every summary they ask: the base build's (and a warm-up's)
    # cached replies would otherwise answer the prompts an update repeats.
    _forget_chat_replies(root / "grow")
    ws = Workspace.open(root / "grow")
    before = _members(ws)
    ws.close()
    rows.append(_measure(f"insert {n_new} passages", lambda: index("grow", [new])))
    ws = Workspace.open(root / "grow")
    grown = _members(ws)
    modes = {name: (entry.get("update") or {}).get("mode") for name, entry in ws.manifest.entries().items()
             if name.startswith("communities:") or name == "tree"}
    settings = load_settings(ws.root)
    rows.append(_measure(f"delete {n_new} passages",
                         lambda: run_delete(ws, [str(new)], settings, build_stack(settings, ws.cache()), Progress())))
    after = _members(ws)
    ws.close()
    server.terminate()
    touched = {name: len(grown[name] ^ after[name]) for name in grown}
    restored = {name: before[name] == after[name] for name in before}
    full = rows[0]
    out = {"passages": len(passages), "inserted": n_new, "warm_process": bool(args.warm_process and snapshot),
           "rows": rows, "insert_update_modes": modes,
           "touched_communities": touched,
           "delete_restores_communities": restored}
    (ROOT / "bench" / "out").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "out" / "living_corpus.json").write_text(json.dumps(out, indent=2), encoding="utf-8")

    def share(value: float, whole: float) -> str:
        return f"{100 * value / whole:.1f} %" if whole else "n/a"

    if args.no_full:
        print(f"(reference: the base build of {len(passages) - n_new} passages, not a separate full build)")
    print("| step | LLM calls | prompt tokens | embedding calls | CPU s | wall s | LLM calls vs full | CPU vs full |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['step']} | {row['llm_calls']} | {row['prompt_tokens']} | {row['embedding_calls']} | "
              f"{row['cpu_s']} | {row['wall_s']} | {share(row['llm_calls'], full['llm_calls'])} | "
              f"{share(row['cpu_s'], full['cpu_s'])} |")
    print()
    print("Communities whose member set the delete changed (new or gone): "
          + ", ".join(f"{name} {count}" for name, count in touched.items()))
    print("How the insert refreshed each hierarchy: " + ", ".join(f"{k} {v}" for k, v in sorted(modes.items())))
    print("Delete gives back the base build's communities: "
          + ", ".join(f"{name} {'yes' if same else 'no'}" for name, same in restored.items()))
    if not args.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
