"""Cold `unirag query` per method: a new process per question, as a command-line user pays it.

Every method whose retrieval asks no chat model (the agents of ToG, DALK and KGP do; they
are left out) runs ``unirag query QUESTION -w WS -m METHOD --retrieve-only`` with the
zero-LLM question path (``retrieval.question_path: nlp``), once to build anything missing
and warm the OS file cache, then ``--runs`` times with a new question each time (so the
embedding cache does not answer). Reported per method: the best wall seconds, and the
process's CPU seconds (user + system) of that run and the median over the runs, which a
machine shared with other jobs disturbs far less than wall time.

The measured checkout's bytecode is compiled first: an installed package has it (pip
compiles at install), while a checkout run with ``PYTHONDONTWRITEBYTECODE=1`` (set on the VM
these figures come from) would compile every unirag module again in every process (~0.1
CPU s), a cost no user pays.

    .venv/bin/python bench/cold_query.py -w WORKSPACE [--methods a,b] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENT_METHODS = {"tog", "dalk", "kgp"}  # their retrieval calls the chat model
QUESTIONS = ["Who was the father of the director of the film?", "When did the composer of the opera die?",
             "Which country is the author of the novel from?", "Where was the founder of the company born?",
             "What is the nationality of the performer of the song?"]


def local_methods() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from unirag.methods.spec import builtin_methods

    return sorted(name for name in builtin_methods() if name not in AGENT_METHODS)


def one_query(workspace: Path, method: str, question: str, code: Path = ROOT) -> dict[str, float]:
    env = {**os.environ, "UNIRAG_RETRIEVAL_QUESTION_PATH": "nlp", "PYTHONPATH": str(code)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "unirag", "query", question, "-w", str(workspace), "-m", method,
                           "--retrieve-only"], capture_output=True, text=True, env=env, cwd=code)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{method}: {done.stderr.strip().splitlines()[-1:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}


def compile_bytecode(code: Path) -> None:
    """Write ``__pycache__`` for the checkout's package, as ``pip install`` does."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "unirag")], check=True,
                   capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workspace", type=Path, required=True)
    parser.add_argument("--methods", help="comma-separated (default: every method without a retrieval agent)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--code", type=Path, default=ROOT, help="the unirag checkout to run (another commit: before)")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "out" / "cold_query.json")
    args = parser.parse_args()
    methods = args.methods.split(",") if args.methods else local_methods()
    figures: dict[str, Any] = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "workspace": str(args.workspace),
                               "code": str(args.code),
                               "load_average": os.getloadavg()[0], "methods": {}}
    compile_bytecode(args.code)
    print("| method | best wall s | CPU s of that run | median CPU s |\n|---|---:|---:|---:|")
    for method in methods:
        one_query(args.workspace, method, "warm-up: who wrote it?", args.code)
        nonce = time.time_ns()  # a question never asked before: its embedding is computed
        runs = [one_query(args.workspace, method, f"{QUESTIONS[i % len(QUESTIONS)]} ({nonce + i})", args.code)
                for i in range(args.runs)]
        best = min(runs, key=lambda run: run["wall_s"])
        figures["methods"][method] = {"best": best, "runs": runs}
        median_cpu = statistics.median(run["cpu_s"] for run in runs)
        figures["methods"][method]["median_cpu_s"] = median_cpu
        print(f"| {method} | {best['wall_s']:.2f} | {best['cpu_s']:.2f} | {median_cpu:.2f} |", flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
