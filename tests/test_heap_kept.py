"""Index jobs keep glibc's heap (:func:`unirag.store.bulk_load.heap_kept`): an array freed and
allocated again inside the block reuses its pages instead of faulting in fresh zeroed ones,
and afterwards the allocator is back to its defaults."""

from __future__ import annotations

import resource
import sys

import numpy as np
import pytest

from unirag.store.bulk_load import _glibc, heap_kept

SIZE = 64 * 1024 * 1024  # past every default mmap threshold


def _faults_of_a_second_array() -> int:
    first = np.ones(SIZE // 8)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = np.ones(SIZE // 8)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del second
    return faults


@pytest.mark.skipif(not sys.platform.startswith("linux") or _glibc() is None, reason="glibc's allocator only")
def test_a_freed_array_is_reused_inside_the_block_and_mapped_afresh_outside() -> None:
    outside = _faults_of_a_second_array()
    with heap_kept():
        _faults_of_a_second_array()  # the heap grows once
        inside = _faults_of_a_second_array()
    after = _faults_of_a_second_array()
    assert outside >= 16  # 64 MiB of fresh pages: at least 32 huge pages, or 16,384 small ones
    assert inside * 4 < outside and after >= outside // 2
