from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.dev_sets import SAMPLE, SAMPLE_DATASETS, SHARED, DevSets


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No UNIRAG_* variable of the developer's shell reaches a test."""
    for name in list(os.environ):
        if name.startswith("UNIRAG_"):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def sample_datasets() -> Path:
    """Small real cuts of the shared dev sets, in their native layout (tests/data/README.md)."""
    return SAMPLE_DATASETS


@pytest.fixture(params=[SAMPLE, SHARED], ids=lambda sets: sets.name)
def dev_sets(request: pytest.FixtureRequest) -> DevSets:
    """The samples, then the full shared dev sets where they lie beside the repository (skipped, with reason, if not)."""
    sets: DevSets = request.param
    if not sets.root.is_dir():
        pytest.skip(f"shared datasets not present at {sets.root}")
    return sets
