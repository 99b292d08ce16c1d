"""Where the tests find real benchmark files: the samples in the repository, the shared dev sets beside it.

Why two: ``tests/data/datasets`` holds small cuts of the shared files (see
tests/data/README.md), present in every clone, so every test that needs only
some real passages and questions runs anywhere. The full shared files
(``../shared/datasets``, outside the repository) are there on the project's
machines only; tests that check their exact sizes run where they exist and are
listed as skipped (pytest ``-rs``) where they do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SAMPLE_DATASETS = Path(__file__).resolve().parent / "data" / "datasets"
SHARED_DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@dataclass(frozen=True)
class DevSets:
    """A folder laid out as ``../shared/datasets`` and the sizes of its files."""

    name: str
    root: Path
    hotpotqa_questions: int
    hotpotqa_passages: int
    musique_questions: int
    musique_passages: int
    twowiki_passages: int


SAMPLE = DevSets("sample", SAMPLE_DATASETS, 4, 40, 3, 60, 40)
SHARED = DevSets("shared", SHARED_DATASETS, 100, 994, 100, 1890, 6119)
