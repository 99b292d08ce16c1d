"""What makes the ``numeric`` tests worth running under other BLAS kernels, checked in this run.

numpy's OpenBLAS picks its kernel by CPU, so a test comparing floats computed on two paths
may hold on the machine it was written on and fail on a user's (the synonym update against a
whole build did, under ``OPENBLAS_CORETYPE=Haswell`` and ``Zen``). CI therefore reruns the
tests marked ``numeric`` under those two kernels. This module guards that mechanism from
inside the suite: ``OPENBLAS_CORETYPE`` must really switch numpy's kernel (else CI's extra
runs test nothing), and the synonym tests, the case that failed, must hold under each kernel
even where the suite runs only once (a user's ``bash scripts/test.sh``). Each check is a
fresh interpreter, as the variable is read when OpenBLAS loads: about 2 s per kernel.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.numeric

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ("Haswell", "Zen")  # what .ci/run reruns the numeric tests under

_REPORT_BLAS = """
import json, numpy
from threadpoolctl import threadpool_info
print(json.dumps([i.get("architecture") for i in threadpool_info() if i["internal_api"] == "openblas"]))
"""


def _run(kernel: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def _can_run_haswell_kernels() -> bool:
    """Haswell's and Zen's kernels need AVX2 (an x86-64 CPU of 2013 or later)."""
    if platform.machine().lower() not in {"x86_64", "amd64"}:
        return False
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


needs_avx2 = pytest.mark.skipif(not _can_run_haswell_kernels(), reason="OPENBLAS_CORETYPE=Haswell needs an AVX2 x86-64 CPU")


@needs_avx2
@pytest.mark.parametrize("kernel", KERNELS)
def test_openblas_coretype_switches_numpys_kernel(kernel: str) -> None:
    done = _run(kernel, "-c", _REPORT_BLAS)
    assert done.returncode == 0, done.stderr
    architectures = json.loads(done.stdout.strip().splitlines()[-1])
    if not architectures:
        pytest.skip("numpy's BLAS is not OpenBLAS here: OPENBLAS_CORETYPE changes nothing")
    # OpenBLAS builds without separate Zen kernels give Zen Haswell's (as numpy's wheels do).
    assert {a.lower() for a in architectures} <= {"haswell", "zen"}, architectures


@needs_avx2
@pytest.mark.parametrize("kernel", KERNELS)
def test_the_synonym_update_equals_a_whole_build_under(kernel: str) -> None:
    done = _run(kernel, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                "tests/test_synonym_search.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
