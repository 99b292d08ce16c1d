"""bench/results_tables.py: docs/results.md's tables and goal check come from eval output
directories (a real ``unirag eval --budget`` run, and hand-made rows whose differences are
known), and writing them between the page's markers is idempotent."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "results.md"
PROVENANCE = ["--date", "2026-01-02", "--commit", "abc1234", "--machine", "test box",
              "--command", "unirag eval -d DATA -o OUT --retrieve-only"]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("results_tables", ROOT / "bench" / "results_tables.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real retrieve-only eval with budgets on the examples' three questions (one typed bridge)."""
    tmp = tmp_path_factory.mktemp("real")
    out = tmp / "out"
    env = {name: value for name, value in os.environ.items() if not name.startswith("UNIRAG_")}
    done = subprocess.run([sys.executable, "-m", "unirag", "eval", "-d", str(ROOT / "examples" / "eval"),
                           "-w", str(tmp / "ws"), "-o", str(out), "--methods", "vanilla,hybrid,bm25,hipporag",
                           "--retrieve-only", "--budget", "100,500", "--extractor", "nlp", "-q"],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return out


def page_with(script: ModuleType, tmp_path: Path, *keys: str) -> Path:
    """docs/results.md with marker pairs for ``keys`` appended (the shipped ones are kept)."""
    page = tmp_path / "results.md"
    extra = "".join(f"\n## {key}\n\n<!-- results:{key}:start -->\n_Not yet measured with the grounded metric._\n"
                    f"<!-- results:{key}:end -->\n" for key in keys)
    page.write_text(blank_copy(script, page).read_text(encoding="utf-8") + extra, encoding="utf-8")
    return page


def blank_copy(script: ModuleType, page: Path) -> Path:
    """docs/results.md as it ships, with every dataset section back to its placeholder and the
    goal paragraph to match (the shipped page holds measured tables; these tests write their own)."""
    text = PAGE.read_text(encoding="utf-8")
    for key in ("hotpotqa", "musique"):
        text = script.replace_between(text, key, "_Not yet measured with the grounded metric._", "the page")
    page.write_text(script.replace_between(text, "goal", script.goal_summary(text), "the page"), encoding="utf-8")
    return page


def between(page: str, key: str) -> str:
    return page.split(f"<!-- results:{key}:start -->")[1].split(f"<!-- results:{key}:end -->")[0]


def table_rows(text: str, first_header: str) -> list[list[str]]:
    """The rows (cells) of the Markdown table whose header starts with ``first_header``."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return [rows[0], *rows[2:]]


def test_a_real_run_gives_the_table_the_goal_check_and_an_idempotent_page(
        script: ModuleType, real_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = page_with(script, tmp_path, "eval")
    before = page.read_text(encoding="utf-8")
    args = [str(real_run), "--at", "500", "--write", str(page), *PROVENANCE]
    assert script.main(args) == 0
    written = page.read_text(encoding="utf-8")
    section = between(written, "eval")
    assert "Not yet measured" not in section
    assert "Measured 2026-01-02 on test box, commit `abc1234`" in section
    assert "<!-- docs-test: not-run" in section and "unirag eval -d DATA -o OUT --retrieve-only" in section
    table = table_rows(section, "method")
    assert table[0] == ["method", "grounded recall @100", "@500", "bridge @500", "evidence recall @500",
                        "answer in context @500", "context tokens @500", "R@2", "R@5"]
    assert sorted(row[0] for row in table[1:]) == ["bm25", "hipporag", "hybrid", "vanilla"]
    grounded = [float(row[2].split()[0]) for row in table[1:]]
    assert grounded == sorted(grounded, reverse=True)  # best first at the focus budget
    assert all(row[2].endswith("(n=2)") for row in table[1:])  # the third question has no gold passage
    assert all(row[-2:] == ["—", "—"] for row in table[1:])  # no passage ids in the generic format
    goal = table_rows(section, "graph method")
    assert [row[0] for row in goal[1:]] == ["hipporag"]  # bm25, vanilla, hybrid are not graph methods
    assert "**Goal met on eval:**" in section or "**Goal not met on eval:**" in section
    assert "Baseline: **" in section and "<!-- results-verdict:eval:" in section
    # outside the markers nothing changed
    assert written.split("<!-- results:eval:start -->")[0] == before.split("<!-- results:eval:start -->")[0]
    assert script.main(args) == 0
    assert page.read_text(encoding="utf-8") == written  # a second run gives the same page
    capsys.readouterr()
    assert script.main([str(real_run), "--at", "500", *PROVENANCE]) == 0  # no --write: printed
    printed = capsys.readouterr().out
    assert printed.split("```")[2].strip() == section.split("```")[2].strip()  # the same after its commands


def row(dataset: str, method: str, qid: str, grounded: float, kind: str | None = None,
        ranks: bool = True) -> dict[str, Any]:
    figures = {"grounded_recall": grounded, "evidence_recall": grounded, "evidence_recall_with_passage": grounded,
               "answer_in_context": grounded, "context_tokens": 900}
    return {"dataset": dataset, "method": method, "question_id": qid, "question_type": kind, "error": None,
            "retrieval": {**figures, "recall_at": {"2": grounded, "5": grounded} if ranks else {}},
            "budgets": {str(b): figures for b in (500, 1000, 2000)}}


def write_run(path: Path, rows: Sequence[dict[str, Any]]) -> Path:
    path.mkdir(parents=True)
    (path / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def dataset_rows(dataset: str, graph_gain: Callable[[int], float], typed: bool,
                 questions: int = 40) -> list[dict[str, Any]]:
    """``questions`` questions: vanilla at 0.5, hybrid at 0.6 (the better baseline), BM25 at 0.55, a reranker
    far above every method (not a graph method), ``graphy`` at hybrid + ``graph_gain(i)``."""
    rows = []
    for i in range(questions):
        qid, kind = f"q{i}", ("bridge" if i % 4 else "comparison") if typed else None
        rows += [row(dataset, "vanilla", qid, 0.5, kind), row(dataset, "hybrid", qid, 0.6, kind),
                 row(dataset, "bm25", qid, 0.55, kind), row(dataset, "hybrid-rerank", qid, 1.0, kind),
                 row(dataset, "graphy", qid, 0.6 + graph_gain(i), kind, ranks=False)]
    return rows


def test_goal_met_not_met_and_the_goal_paragraph(script: ModuleType, tmp_path: Path) -> None:
    page = blank_copy(script, tmp_path / "results.md")
    hotpot = write_run(tmp_path / "hotpot", dataset_rows("hotpotqa", lambda i: 0.2, typed=True))
    hotpot_llm = write_run(tmp_path / "hotpot-llm", [row("hotpotqa", "graphy", f"q{i}", 0.3) for i in range(40)])
    assert script.main([str(hotpot), f"{hotpot_llm}=llm", "--write", str(page), *PROVENANCE]) == 0
    written = page.read_text(encoding="utf-8")
    section = between(written, "hotpotqa")
    assert "**HotpotQA** (40 questions; 30 bridge, 10 comparison)" in section
    table = table_rows(section, "method")
    assert table[0][4:6] == ["bridge @1,000", "comparison @1,000"]
    assert [r[0] for r in table[1:]] == ["hybrid-rerank", "graphy", "hybrid", "bm25", "vanilla", "graphy [llm]"]
    assert table[2][-2:] == ["—", "—"] and table[3][-2:] == ["0.600", "0.600"]
    goal = table_rows(section, "graph method")
    assert [r[0] for r in goal[1:]] == ["graphy", "graphy [llm]"]  # the reranker is no graph method
    assert goal[1][2] == "+0.200" and goal[1][-1] == "yes" and goal[2][-1] == "no"
    assert "Baseline: **hybrid** (grounded recall 0.600; vanilla 0.500)" in section
    assert "**Goal met on HotpotQA:** at 1,000 tokens graphy beats hybrid by +0.200" in section
    assert "HotpotQA: met; MuSiQue: not yet measured" in between(written, "goal")
    assert "not yet answered" in between(written, "goal")

    # MuSiQue: +0.10 on a third of the questions, 0 elsewhere: a mean of 0.033, under the margin
    musique = write_run(tmp_path / "musique", dataset_rows("musique", lambda i: 0.1 if i % 3 == 0 else 0.0,
                                                           typed=False))
    assert script.main([str(musique), "--write", str(page), *PROVENANCE]) == 0
    written = page.read_text(encoding="utf-8")
    section = between(written, "musique")
    assert table_rows(section, "method")[0][1:4] == ["grounded recall @500", "@1,000", "@2,000"]
    assert table_rows(section, "method")[0][4] == "evidence recall @1,000"  # untyped: no type columns
    assert "**Goal not met on MuSiQue:** at 1,000 tokens the best graph method, graphy, is +0.035" in section
    assert "below the 0.05 margin" in section
    assert "HotpotQA: met; MuSiQue: **not met**. **The goal is not met**" in between(written, "goal")
    assert "Not yet measured" not in between(written, "hotpotqa")  # the other section stays


def test_a_gain_whose_interval_touches_zero_does_not_meet_the_goal(script: ModuleType, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # +0.4 on one question of 8: a mean of 0.05, but a third of the resamples miss that question
    run = write_run(tmp_path / "run", dataset_rows("musique", lambda i: 0.4 if i == 0 else 0.0, typed=False,
                                                   questions=8))
    assert script.main([str(run), *PROVENANCE]) == 0
    out = capsys.readouterr().out
    assert "**Goal not met on MuSiQue:**" in out and "its interval does not exclude zero" in out
    assert "<!-- results-verdict:musique:not-met -->" in out


@pytest.mark.parametrize(("make", "args", "message"), [
    ("twice", [], "method vanilla is in both"),
    ("plain", ["--at", "300"], "--at 300: the rows have budgets 500, 1000, 2000 only"),
    ("plain", ["--dataset", "musique"], "--dataset musique: the rows are of hotpotqa"),
    ("plain", ["--write", "{tmp}/nowhere.md"], "has no <!-- results:hotpotqa:start -->"),
    ("empty", [], "no rows in answers.jsonl"),
])
def test_bad_input_is_one_line(script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               make: str, args: list[str], message: str) -> None:
    rows = [row("hotpotqa", "vanilla", "q1", 0.5)]
    dirs = [write_run(tmp_path / "a", rows)]
    if make == "twice":
        dirs.append(write_run(tmp_path / "b", rows))
    if make == "empty":
        dirs = [write_run(tmp_path / "e", [])]
    (tmp_path / "nowhere.md").write_text("# no markers\n", encoding="utf-8")
    argv = [*map(str, dirs), *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    assert script.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_the_shipped_page_has_the_markers_the_script_fills() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for key in ("goal", "hotpotqa", "musique"):
        assert text.count(f"<!-- results:{key}:start -->") == 1 and text.count(f"<!-- results:{key}:end -->") == 1
    for key in ("hotpotqa", "musique"):
        filled = between(text, key)
        assert filled.strip() == "_Not yet measured with the grounded metric._" or "<!-- results-verdict:" in filled
