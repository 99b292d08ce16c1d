"""Generation modes by name: the runner calls :func:`generate` (or :func:`plan_answer`, to make
the final call itself: streamed or async) with the spec's generation."""

from __future__ import annotations

from typing import Any

from unirag.generate.adaptive_filter import plan_adaptive_filter
from unirag.generate.direct import plan_direct
from unirag.generate.map_reduce import plan_map_reduce
from unirag.generate.plan import AnswerPlan
from unirag.operators.context import QueryState


def plan_answer(state: QueryState, generation: Any) -> AnswerPlan:
    """Everything of the spec's generation mode up to its final call (map or filter calls
    included), and that call prepared (:mod:`unirag.generate.plan`)."""
    if generation.mode == "direct":
        return plan_direct(state, generation.prompt, generation.use_context)
    if generation.mode == "map_reduce":
        return plan_map_reduce(state, **generation.params)

    return plan_adaptive_filter(state, **generation.params)


def generate(state: QueryState, generation: Any) -> tuple[str, str]:
    """(answer, raw model output) for the spec's generation mode."""
    return plan_answer(state, generation).complete(state.models.chat)
