"""Aggregating verdicts: win-rate matrices, position bias, unparsed counts, mean scores."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from unirag.eval.judge.parse import TIE
from unirag.eval.judge.verdicts import ALL_CRITERIA, OVERALL, PairVerdict, ScoreVerdict



def _tally(verdicts: Iterable[PairVerdict], methods: Sequence[str], criterion: str) -> tuple[np.ndarray, np.ndarray]:
    """(wins, judgments): wins[i, j] = judgments where i beat j (ties 0.5), over parsed verdicts."""
    index = {m: i for i, m in enumerate(methods)}
    rows = [(index[v.method_a], index[v.method_b], 1.0 if v.winner == v.method_a else 0.5 if v.winner == TIE else 0.0)
            for v in verdicts
            if v.criterion == criterion and v.parsed and v.winner is not None
            and v.method_a in index and v.method_b in index and v.method_a != v.method_b]
    n = len(methods)
    wins, counts = np.zeros((n, n)), np.zeros((n, n))
    if rows:
        a, b, s = (np.asarray(col) for col in zip(*rows))
        a, b = a.astype(np.intp), b.astype(np.intp)
        np.add.at(wins, (a, b), s)
        np.add.at(wins, (b, a), 1.0 - s)
        np.add.at(counts, (a, b), 1.0)
        np.add.at(counts, (b, a), 1.0)
    return wins, counts


def win_rates(verdicts: Iterable[PairVerdict], methods: Sequence[str], criterion: str = OVERALL) -> np.ndarray:
    """M[i, j]: the share of parsed judgments (both orders, all replicates, ties 0.5) in
    which ``methods[i]`` beat ``methods[j]``. Diagonal and pairs without data: NaN.
    M[i, j] + M[j, i] = 1 wherever there is data."""
    wins, counts = _tally(verdicts, methods, criterion)
    rates = np.full(wins.shape, np.nan)
    np.divide(wins, counts, out=rates, where=counts > 0)
    np.fill_diagonal(rates, np.nan)
    return rates


def judgement_counts(verdicts: Iterable[PairVerdict], methods: Sequence[str], criterion: str = OVERALL) -> np.ndarray:
    """N[i, j]: how many parsed judgments :func:`win_rates` averaged for that pair."""
    return _tally(verdicts, methods, criterion)[1].astype(np.int64)


def win_rate_matrices(
    verdicts: Iterable[PairVerdict], methods: Sequence[str], criteria: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """:func:`win_rates` per criterion (default: every criterion the verdicts hold, in
    :data:`ALL_CRITERIA` order)."""
    verdicts = list(verdicts)
    if criteria is None:
        present = {v.criterion for v in verdicts}
        criteria = [c for c in ALL_CRITERIA if c in present] + sorted(present - set(ALL_CRITERIA))
    return {c: win_rates(verdicts, methods, c) for c in criteria}


def position_bias(verdicts: Iterable[PairVerdict], criterion: str | None = None) -> float:
    """Share of decisive parsed verdicts (ties excluded) that chose the answer shown first;
    0.5 is an unbiased judge, NaN when there is none."""
    decisive = [v for v in verdicts
                if v.parsed and v.winner not in (None, TIE) and (criterion is None or v.criterion == criterion)]
    if not decisive:
        return math.nan
    return sum(v.winner == v.first_shown for v in decisive) / len(decisive)


def unparsed_counts(verdicts: Iterable[PairVerdict | ScoreVerdict]) -> dict[str, int]:
    """Criterion -> how many verdicts could not be read (every criterion seen appears)."""
    counts: Counter[str] = Counter()
    for v in verdicts:
        counts[v.criterion] += 0 if v.parsed else 1
    return dict(counts)


def mean_scores(scores: Iterable[ScoreVerdict]) -> dict[str, dict[str, float]]:
    """Method -> criterion -> mean parsed score (over questions and replicates); NaN when
    every score of that method and criterion was unparsed."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for s in scores:
        values = groups[(s.method, s.criterion)]
        if s.parsed and s.score is not None:
            values.append(s.score)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (method, criterion), values in sorted(groups.items()):
        out[method][criterion] = float(np.mean(values)) if values else math.nan
    return dict(out)
