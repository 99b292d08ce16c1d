from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No UNIRAG_* variable of the developer's shell reaches a test."""
    for name in list(os.environ):
        if name.startswith("UNIRAG_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def shared_datasets() -> Path:
    path = Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not path.is_dir():
        pytest.skip(f"shared datasets not present at {path}")
    return path
