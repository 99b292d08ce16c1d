"""bench/scaling_report.py: docs/scaling.md's tables come from the committed result files,
and a checkout's own runs are read instead of them, never mixed with them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scaling_report", ROOT / "bench" / "scaling_report.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result(passages: int) -> dict[str, object]:
    return {"passages": passages, "chunk_tokens": passages * 100, "code": "x", "load_average_start": [1.0],
            "rows": [{"stage": "ingest", "cpu_s": passages / 100, "wall_s": 1.0, "peak_rss_mib": 1, "llm_calls": 0}]}


def test_default_files_prefer_own_runs_then_committed(report: ModuleType, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    own, committed = tmp_path / "out", tmp_path / "data"
    own.mkdir()
    committed.mkdir()
    (committed / "scaling_1000.json").write_text(json.dumps(_result(1000)))
    monkeypatch.setattr(report, "RESULT_DIRS", (own, committed))
    assert [p.name for p in report.default_files()] == ["scaling_1000.json"]
    (own / "scaling_300.json").write_text(json.dumps(_result(300)))
    assert report.default_files() == [own / "scaling_300.json"]


def test_committed_data_give_the_measured_and_fitted_tables(report: ModuleType) -> None:
    files = sorted((ROOT / "docs" / "scaling-data").glob("scaling_*.json"))
    assert files, "docs/scaling-data holds the runs docs/scaling.md reports"
    results = report.merge_runs(json.loads(f.read_text(encoding="utf-8")) for f in files)
    measured = report.measured_table(results)
    assert any(line.startswith("| communities:leanrag |") for line in measured)
    fitted = report.projection_table(results, results[-1]["chunk_tokens"])
    ingest = next(line for line in fitted if line.startswith("| ingest |"))
    assert "not fitted" not in ingest


def test_fit_power_goes_through_the_two_largest_points(report: ModuleType) -> None:
    a, b = report.fit_power([(1, 5.0), (10, 10.0), (100, 1000.0)])
    assert b == pytest.approx(2.0)
    assert a * 100**b == pytest.approx(1000.0)
