"""Benchmark: index one large text file and report peak memory (issue 17: memory must stay flat).

Generates a text file of ``--mb`` megabytes from real passages (the dataset samples
under ``tests/data``, repeated in paragraphs), then indexes it in a fresh subprocess
(chunks, chunk vectors and BM25, no graph) with an instant hashing embedder, so the
figures are the framework's own: loading, chunking, the store, the indices. The child
reports its seconds and peak RSS (``resource.getrusage``); the interpreter's RSS after
imports is reported apart, as the constant the target excludes (peak <= 3x file + a constant).

Run from the repository root::

    .venv/bin/python bench/big_file.py [--mb 50] [--stage ingest|index]

One markdown row goes to stdout; progress lines of the run go to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT / "tests" / "data" / "datasets"


def passages() -> list[str]:
    """Texts of the sample corpora (HotpotQA, MuSiQue, 2Wiki), in a stable order."""
    texts: list[str] = []
    for path in sorted(DATASETS.glob("*/*corpus.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):  # HotpotQA: {title: [sentences]}
            texts += ["".join(sentences) for _, sentences in sorted(data.items())]
        else:
            texts += [record.get("text") or record.get("paragraph_text", "") for record in data]
    return [text.strip() for text in texts if text.strip()]


def write_big_file(path: Path, megabytes: float) -> int:
    """Paragraphs of real passages until ``megabytes`` is reached; returns the size in bytes."""
    pool, target, size = passages(), int(megabytes * 1_000_000), 0
    with path.open("w", encoding="utf-8") as out:
        round_ = 0
        while size < target:
            for text in pool:
                paragraph = f"{text} (part {round_})\n\n"
                out.write(paragraph)
                size += len(paragraph.encode("utf-8"))
                if size >= target:
                    break
            round_ += 1
    return path.stat().st_size


class InstantEmbedder:
    """Bag of words hashed (crc32) into 64 buckets: no model, so only the framework costs."""

    name = "bench-crc32-bow-64"
    dim = 64

    def embed(self, texts: list[str], stage: str = "embed") -> Any:
        from unirag.llm.base import EmbeddingBatch, normalise_rows

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                out[row, zlib.crc32(word.encode("utf-8")) % self.dim] += 1.0
        return EmbeddingBatch(normalise_rows(out), prompt_tokens=0, calls=1)


def child(file: Path, workspace: Path, stage: str) -> dict[str, Any]:
    """Index ``file`` into a new workspace in this process; seconds and peak RSS."""
    from unirag.config import load_settings
    from unirag.ingest import ingest
    from unirag.llm.factory import build_stack
    from unirag.pipeline import run_index
    from unirag.progress import Progress
    from unirag.text.tokenizer import get_tokenizer
    from unirag.workspace import Workspace

    ws = Workspace.init(workspace)
    settings = load_settings(workspace)
    get_tokenizer(settings.chunking.encoding)  # its ranks are part of the constant
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    progress = Progress(enabled=True, lines=True)
    started = time.perf_counter()
    with ws.writing():
        pass
    if stage == "ingest":
        with ws.writing():
            report = ingest(ws, [file], settings, progress=progress)
        chunks = report.chunks_added
    else:
        stack = build_stack(settings, ws.cache(), embedder=InstantEmbedder())
        chunks = run_index(ws, [file], settings, stack, progress=progress, graphs=[]).ingest.chunks_added
    seconds = time.perf_counter() - started
    ws.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": round(seconds, 1), "peak_rss_mb": round(peak / 1024, 1),
            "baseline_rss_mb": round(baseline / 1024, 1), "chunks": chunks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the generated file")
    parser.add_argument("--stage", choices=("ingest", "index"), default="index",
                        help="ingest: load and chunk only; index: also chunk vectors and BM25")
    parser.add_argument("--child", nargs=2, metavar=("FILE", "WORKSPACE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), Path(args.child[1]), args.stage)))
        return
    with tempfile.TemporaryDirectory(prefix="unirag-big-file-") as tmp:
        file = Path(tmp) / "big.txt"
        size = write_big_file(file, args.mb)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the checkout this script sits in
        run = subprocess.run([sys.executable, __file__, "--stage", args.stage, "--child", str(file),
                              str(Path(tmp) / "ws")], stdout=subprocess.PIPE, text=True, check=True, cwd=ROOT,
                             env=env)
        figures = json.loads(run.stdout.strip().splitlines()[-1])
    file_mb = size / 1_048_576
    over = figures["peak_rss_mb"] - figures["baseline_rss_mb"]
    print("| file | stage | chunks | seconds | peak RSS | RSS after imports | peak - imports | per file size |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {file_mb:.1f} MiB | {args.stage} | {figures['chunks']:,} | {figures['seconds']} | "
          f"{figures['peak_rss_mb']:.0f} MiB | {figures['baseline_rss_mb']:.0f} MiB | {over:.0f} MiB | "
          f"{over / file_mb:.2f}x |")


if __name__ == "__main__":
    main()
