"""Adaptive filtering-based generation: ArchRAG (Wang et al. 2025, "Adaptive filtering-based generation").

ArchRAG retrieves per layer of its hierarchy (R_0 .. R_L) and then

    A_i = LLM(P_filter || R_i)                       (eq. 1)
    Output = LLM(P_merge || Sort({A_0, ..., A_n}))   (eq. 2)

1. **Group**: the context items are grouped by layer — an item's
   ``provenance["level"]`` (per hierarchy) when it has one, else one group per
   item kind (entities, relationships, chunks) — in order of first appearance.
2. **Filter**: each group is packed, in retrieval order, into packs of at most
   ``pack_tokens`` tokens ("multiple retrieved contents are combined ...
   provided the total token count does not exceed the token size limit"); a
   group too big for one pack becomes several requests. One request per pack
   (stage ``query.filter``, prompt ``filter_points``, concurrently) returns
   points with a relevance score 0-100 — the analysis report A_i.
3. **Merge**: the points of every pack, sorted by score (best first; ties in
   request and reply order), fill the merge context up to ``merge_tokens``;
   the point that crosses the limit is cut to the tokens left ("content
   exceeding the text limit being truncated") and later ones are left out.
   One request (stage ``query.merge``, prompt ``merge_points``) answers.

Shared rules with :mod:`unirag.generate.map_reduce`: points scoring
``score_floor`` (0) or less are dropped (set it to -1 to keep every point); a
reply without a readable points list is one point scored ``unparsed_score``
(50) unless it states a score, and is counted; when no point survives there is
no merge call and the answer is the no-data answer; every request respects the
chat context window, counted with ``settings.chunking.encoding``.
"""

from __future__ import annotations

from typing import Any

from unirag.generate.map_reduce import (
    SEPARATOR,
    StagedAnswer,
    ask_points,
    check_params,
    complete_final,
    context_budget,
    final_request,
    item_block,
    keep_points,
    pack_texts,
    prompt_room,
    staged_plan,
)
from unirag.generate.plan import AnswerPlan
from unirag.llm.base import ChatRequest
from unirag.operators.context import ContextItem, QueryState
from unirag.text.tokenizer import get_tokenizer

# Every parameter of generate_adaptive_filter with its default (None: derived from settings).
PARAMS: tuple[tuple[str, Any], ...] = (
    ("pack_tokens", None), ("max_points", 5), ("merge_tokens", None), ("filter_max_tokens", None),
    ("score_floor", 0.0), ("unparsed_score", 50.0), ("allow_general_knowledge", False),
    ("filter_prompt", "filter_points"), ("merge_prompt", "merge_points"),
)


def group_key(item: ContextItem) -> tuple[tuple[Any, ...], str]:
    """(key, label) of the group an item is filtered with: its layer, else its kind."""
    level = item.provenance.get("level")
    if level is not None:
        hierarchy = str(item.provenance.get("hierarchy", ""))
        return ("level", hierarchy, str(level)), f"layer {level}" + (f" of {hierarchy}" if hierarchy else "")
    return ("kind", item.kind), f"{item.kind} items"


def group_items(items: list[ContextItem]) -> list[tuple[str, list[int]]]:
    """(label, item positions) per group, groups and members in order of first appearance."""
    groups: dict[tuple[Any, ...], tuple[str, list[int]]] = {}
    for position, item in enumerate(items):
        key, label = group_key(item)
        groups.setdefault(key, (label, []))[1].append(position)
    return list(groups.values())


def prepare_adaptive_filter(
    state: QueryState,
    pack_tokens: int | None = None,
    max_points: int = 5,
    merge_tokens: int | None = None,
    filter_max_tokens: int | None = None,
    score_floor: float = 0.0,
    unparsed_score: float = 50.0,
    allow_general_knowledge: bool = False,
    filter_prompt: str = "filter_points",
    merge_prompt: str = "merge_points",
) -> tuple[StagedAnswer, ChatRequest | None]:
    """ArchRAG's adaptive filtering over ``state.items`` up to the merge call: the trace and
    the merge request (``None``: nothing survived, the no-data answer is in the trace).

    ``pack_tokens``: context tokens per filter request (default and cap: what
    the window leaves); ``max_points``: points asked for and kept per filter
    reply; ``merge_tokens``: context tokens of the merge request (default and
    cap likewise); ``filter_max_tokens``: reply length of a filter request
    (``chat.max_tokens``); ``score_floor`` / ``unparsed_score`` as in
    :func:`unirag.generate.map_reduce.map_reduce`.
    """
    settings = state.resources.settings
    tokenizer = get_tokenizer(settings.chunking.encoding)
    window = settings.chat.prompt_window
    filter_template, merge_template = state.prompt(filter_prompt), state.answer_prompt(merge_prompt)
    reply_tokens = int(filter_max_tokens or settings.chat.max_tokens)
    merge_room = prompt_room(merge_template, {"question": state.question}, "reports", tokenizer, window,
                             settings.chat.max_tokens)
    limit = context_budget(merge_tokens, merge_room, "merge_tokens", "adaptive_filter", window)

    trace = StagedAnswer("", "")
    fields = []
    for label, positions in group_items(state.items):
        base = {"question": state.question, "max_points": str(max_points), "group": label}
        room = prompt_room(filter_template, base, "context", tokenizer, window, reply_tokens)
        budget = context_budget(pack_tokens, room, "pack_tokens", "adaptive_filter", window)
        blocks = [item_block(position, state.items[position]) for position in positions]
        for pack in pack_texts(blocks, budget, tokenizer):
            trace.packs.append([positions[index] for index, _ in pack])
            trace.labels.append(label)
            fields.append({**base, "context": SEPARATOR.join(text for _, text in pack)})
    ask_points(state, filter_template, fields, "query.filter", reply_tokens, max_points, unparsed_score, trace)
    trace.kept = keep_points(trace.points, score_floor)
    request = final_request(state, merge_template, trace, limit, tokenizer, "query.merge", "relevance",
                            cut_overflow=True, allow_general_knowledge=allow_general_knowledge)
    return trace, request


def adaptive_filter(state: QueryState, **params: Any) -> StagedAnswer:
    """ArchRAG's adaptive filtering over ``state.items``, with its trace (module docstring);
    ``params`` as :func:`prepare_adaptive_filter`."""
    return complete_final(state, *prepare_adaptive_filter(state, **params))


def plan_adaptive_filter(state: QueryState, **params: Any) -> AnswerPlan:
    """The filter step done and the merge call prepared, for a caller that makes it itself."""
    check_params(params, PARAMS, "adaptive_filter")
    return staged_plan(*prepare_adaptive_filter(state, **params))


def generate_adaptive_filter(state: QueryState, **params: Any) -> tuple[str, str]:
    """(answer, raw merge output) — the ``adaptive_filter`` generation mode; ``params`` as :func:`adaptive_filter`."""
    check_params(params, PARAMS, "adaptive_filter")
    return adaptive_filter(state, **params).as_pair()
