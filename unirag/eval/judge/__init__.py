"""LLM-as-judge for abstract questions: pairwise win rates and absolute 1-10 scores.

Abstract (sensemaking) questions have no gold answer, so answers are compared
by an LLM judge:

* **Pairwise** (GraphRAG, Edge et al. 2024 §3.3 and appendix F; the survey, Zhou et al. 2025
  §7.1, appendix A.4, Figure 19): the judge sees the question and two answers
  and names the better one, or a tie, on comprehensiveness, diversity,
  empowerment, directness (GraphRAG's control criterion) and overall. Every
  pair is asked in both orders, so a judge that favours the first position
  cancels out, and ``replicates`` times each (GraphRAG repeats each comparison
  five times "to account for the inherent stochasticity of LLM generation").
  A win rate counts a tie as half a win (GraphRAG appendix G: winner 100,
  loser 0, tie 50).
* **Absolute** (LeanRAG, Zhang et al. 2025 §4 and appendix D.3): the judge scores one
  answer 1-10 on comprehensiveness, diversity, empowerment and overall, with
  LeanRAG's rubric bands, ``replicates`` times (LeanRAG: 5).

The package's parts, each importable alone, their public names re-exported here:

* :mod:`~unirag.eval.judge.verdicts`: criteria, items, verdicts, their keys and rows;
* :mod:`~unirag.eval.judge.asking`: the pairwise and absolute prompts, requests and runs;
* :mod:`~unirag.eval.judge.parse`: reading the judge's replies, never trusting their shape;
* :mod:`~unirag.eval.judge.aggregate`: win rates, position bias, mean scores;
* :mod:`~unirag.eval.judge.questions`: abstract question generation (GraphRAG's personas);
* :mod:`~unirag.eval.judge.claims`: claim-based comprehensiveness and diversity;
* :mod:`~unirag.eval.judge.shared`: what every judge task shares (keys, JSONL rows, clipping);
* :mod:`~unirag.eval.judge.eval_run`: the judge applied to an eval run (``unirag eval --judge``).

Decisions:

* One request per (pair, order, replicate) asks for every criterion, as the
  survey's prompt does; it yields one :class:`PairVerdict` per criterion.
* A criterion the reply does not give readably is recorded with
  ``winner=None, parsed=False`` (absolute: ``score=None``), never guessed;
  rates and means exclude those and :func:`unparsed_counts` reports them.
* Replicates differ only in the prompt's cache identity
  (``prompt_version`` ends in ``#seed=S;r=R``), never in the text the judge
  sees. With one replicate the judge decodes greedily (temperature 0); with
  several, ``REPLICATE_TEMPERATURE`` (0.7) so that they can differ at all. A
  rerun is still deterministic: the cache answers every finished request.
* Methods are put in canonical (sorted) order, so ``(A, B)`` and ``(B, A)``
  are the same comparison with the same keys; ``order`` says which one was
  shown first (``"ab"``: ``method_a`` was Answer 1).
* Each answer is cut to ``answer_tokens`` tokens, and further so that the
  whole prompt and the reply fit ``context_window`` (both answers alike).
"""

from __future__ import annotations

from unirag.eval.judge.aggregate import (
    judgement_counts,
    mean_scores,
    position_bias,
    unparsed_counts,
    win_rate_matrices,
    win_rates,
)
from unirag.eval.judge.asking import (
    JudgeConfig,
    PairRequest,
    ScoreRequest,
    judge_pairs,
    pair_requests,
    pending_pairs,
    pending_scores,
    run_pair_requests,
    run_score_requests,
    score_absolute,
    score_requests,
)
from unirag.eval.judge.claims import (
    DEFAULT_THRESHOLDS,
    AnswerClaims,
    ClaimItem,
    ClaimScore,
    claim_summary,
    claims_key,
    cluster_counts,
    extract_claims,
    rouge_l_matrix,
    score_claims,
    unique_claims,
)
from unirag.eval.judge.parse import TIE
from unirag.eval.judge.questions import (
    GeneratedQuestion,
    QuestionSet,
    describe_corpus,
    generate_questions,
    sample_texts,
)
from unirag.eval.judge.shared import append_rows, done_keys, to_row
from unirag.eval.judge.verdicts import (
    ABSOLUTE_CRITERIA,
    ALL_CRITERIA,
    CRITERIA,
    ORDERS,
    OVERALL,
    PairItem,
    PairVerdict,
    ScoreItem,
    ScoreVerdict,
    from_row,
    read_records,
    score_key,
    verdict_key,
)
from unirag.eval.jsonl import read_rows

__all__ = [
    "ABSOLUTE_CRITERIA", "ALL_CRITERIA", "CRITERIA", "DEFAULT_THRESHOLDS", "ORDERS", "OVERALL", "TIE",
    "AnswerClaims", "ClaimItem", "ClaimScore", "GeneratedQuestion", "JudgeConfig", "PairItem", "PairRequest",
    "PairVerdict", "QuestionSet", "ScoreItem", "ScoreRequest", "ScoreVerdict",
    "append_rows", "claim_summary", "claims_key", "cluster_counts", "describe_corpus", "done_keys", "extract_claims",
    "from_row", "generate_questions", "judge_pairs", "judgement_counts", "mean_scores", "pair_requests",
    "pending_pairs", "pending_scores", "position_bias", "read_records", "read_rows", "rouge_l_matrix",
    "run_pair_requests", "run_score_requests", "sample_texts", "score_absolute", "score_claims", "score_key",
    "score_requests", "to_row", "unique_claims", "unparsed_counts", "verdict_key", "win_rate_matrices",
    "win_rates",
]