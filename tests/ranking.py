"""Comparing two rankings whose scores were computed on two paths (a test helper).

Why: numpy's OpenBLAS picks its kernel by CPU and by the matrices' shapes, so one cosine
computed in a product of another shape (an update's few rows against a whole build's
blocks, a brute-force oracle against an index) may differ in its last float32 bits
(about 1e-7). Rankings then agree everywhere except where two scores are that close: such
a pair may come in either order, and at a cut (top k) either one may be the one kept.
Comparing rounded scores exactly does not help: a score on a rounding boundary rounds
differently. :func:`assert_same_ranking` states what does hold on every kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

# Far above float32 rounding of a cosine (~6e-8 per operation, a few operations per sum) and
# far below any difference a ranking is meant to show.
SCORE_TOLERANCE = 1e-5


def assert_same_ranking(got: Sequence[tuple[object, float]], want: Sequence[tuple[object, float]],
                        tol: float = SCORE_TOLERANCE, past: float | None = None, label: object = "") -> None:
    """``got`` ranks as ``want`` does: as many hits, scores equal within ``tol`` place by
    place, and ids equal place by place except among scores within ``tol`` of each other,
    where the same ids must hold those places in any order. ``past`` is the score of ``want``'s
    first hit past a cut (lists that are the top of longer rankings): when it is within ``tol``
    of the last group, either path may have kept another id there, so only scores are compared."""
    assert len(got) == len(want), (label, got, want)
    for place, ((_, g), (_, w)) in enumerate(zip(got, want, strict=True)):
        assert abs(g - w) <= tol, (label, place, got, want)
    start = 0
    while start < len(want):
        end = start + 1  # a run of scores each within tol of the next: a group whose order is open
        while end < len(want) and abs(want[end - 1][1] - want[end][1]) <= tol:
            end += 1
        at_cut = end == len(want) and past is not None and abs(want[-1][1] - past) <= tol
        if not at_cut:
            got_ids = sorted(map(repr, (item for item, _ in got[start:end])))
            want_ids = sorted(map(repr, (item for item, _ in want[start:end])))
            assert got_ids == want_ids, (label, start, got, want)
        start = end
