"""Map-reduce generation: GraphRAG's global answer (Edge et al. 2024 §3.1.6).

1. **Prepare**: the context items (community reports for GGraphRAG) are
   shuffled with a seeded generator (GraphRAG's own ``random_state`` 86 by
   default) and packed, in that order, into batches of at most
   ``batch_tokens`` tokens, so relevant material is spread over batches
   rather than concentrated (and lost) in one.
2. **Map**: one request per batch (stage ``query.map``, concurrently through
   :func:`unirag.llm.batch.complete_all`) asks for key points, each with a
   helpfulness score 0-100 (prompt ``map_answer``). Points scoring
   ``score_floor`` (0) or less are dropped.
3. **Reduce**: the surviving points, sorted by score (best first; ties in
   batch and reply order), are added to the reduce context until the next one
   would pass ``reduce_tokens`` (GraphRAG stops there; only a first point
   that alone is too long is cut to fit). One request (stage
   ``query.reduce``, prompt ``reduce_answer``) gives the answer.

Decisions (see :func:`unirag.text.replies.read_points`):

* A map reply with no readable points list (prose, or JSON broken beyond
  repair) is not thrown away, as GraphRAG does with a score of 0: small
  models often answer well in prose. The whole reply becomes one point scored
  by an explicit score it states (``<ANSWER_HELPFULNESS>80</...>`` or a
  ``score: 80`` line), else ``unparsed_score`` (50, the middle of the scale,
  so scored points sort around it). Such replies are counted
  (:attr:`StagedAnswer.unparsed`). ``unparsed_score=0`` gives GraphRAG's rule.
  A valid empty list (``{"points": []}``) is a reply with no points, not an
  unparsed one.
* When no point survives, no reduce call is made and the answer is
  :data:`NO_DATA_ANSWER` with an empty raw output, as GraphRAG returns its
  no-data answer; ``allow_general_knowledge=True`` asks the reduce prompt
  anyway, with no reports.

Every request respects the chat context window: the context budget of a
prompt is the window (less ``chat.count_margin``, since the model's own
tokenizer may count more tokens than ours) minus the prompt's own text, the
reply's ``max_tokens`` and a margin, and a ``batch_tokens`` / ``reduce_tokens`` given as a
parameter is capped at that budget. Tokens are counted with the tokenizer of
``settings.chunking.encoding``; every packed context is checked by counting
its exact joined text. An item longer than a whole batch is cut to fit.

The shared machinery (packing, asking for points, the final call) is used by
:mod:`unirag.generate.adaptive_filter` as well.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from unirag.errors import MethodError
from unirag.generate.direct import MARGIN
from unirag.generate.plan import AnswerPlan, extract_answer
from unirag.llm.base import ChatRequest
from unirag.llm.batch import complete_all
from unirag.operators.context import ContextItem, QueryState
from unirag.prompts.prompt import Prompt
from unirag.text.replies import read_points
from unirag.text.tokenizer import Tokenizer, get_tokenizer

NO_DATA_ANSWER = "I don't know: the retrieved information does not answer the question."
SEPARATOR = "\n\n"
# A prompt whose context budget is below this cannot carry any context worth sending.
MIN_ROOM = 32
# A point cut to fit the final context keeps at least this many tokens, else it is left out.
MIN_CUT = 16

# Every parameter of generate_map_reduce with its default (None: derived from settings).
PARAMS: tuple[tuple[str, Any], ...] = (
    ("batch_tokens", None), ("max_points", 5), ("reduce_tokens", None), ("seed", 86), ("shuffle", True),
    ("map_max_tokens", None), ("score_floor", 0.0), ("unparsed_score", 50.0),
    ("allow_general_knowledge", False), ("map_prompt", "map_answer"), ("reduce_prompt", "reduce_answer"),
)


@dataclass(frozen=True)
class Point:
    """One scored point of a map (or filter) reply."""

    description: str
    score: float
    call: int  # which map/filter request produced it
    parsed: bool  # False: the reply was prose, read as one point


@dataclass
class StagedAnswer:
    """What a two-stage generation did: the answer plus the trace the tests and logs read."""

    answer: str
    raw: str
    packs: list[list[int]] = field(default_factory=list)  # state.items positions per map/filter request
    labels: list[str] = field(default_factory=list)  # the group of each pack (adaptive filtering)
    replies: list[str] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)  # every point read, in request order
    kept: list[Point] = field(default_factory=list)  # above the floor, best first
    used: int = 0  # how many of ``kept`` went into the final context
    unparsed: int = 0  # replies without a readable points list
    final_context: str = ""
    final_called: bool = False

    def as_pair(self) -> tuple[str, str]:
        return self.answer, self.raw


# -- token budgets and packing ---------------------------------------------------------------------


def prompt_room(template: Prompt, fields: dict[str, str], slot: str, tokenizer: Tokenizer, window: int,
                answer_tokens: int) -> int:
    """Tokens left for the ``slot`` field of ``template`` within ``window``."""
    overhead = sum(tokenizer.count(m["content"]) for m in template.messages(**{**fields, slot: ""}))
    return window - answer_tokens - overhead - MARGIN


def context_budget(requested: int | None, room: int, name: str, mode: str, window: int) -> int:
    """``requested`` capped at ``room``; ``room`` when not given."""
    if room < MIN_ROOM:
        raise MethodError(
            f"{mode}: the chat context window ({window} tokens once chat.count_margin is kept free) leaves "
            f"{room} tokens for context in the '{name}' prompt; raise chat.context_window or lower chat.max_tokens"
        )
    if requested is None:
        return room
    if not isinstance(requested, int) or isinstance(requested, bool) or requested <= 0:
        raise MethodError(f"{mode}: {name} must be a positive number of tokens, not {requested!r}")
    return min(requested, room)


def item_block(position: int, item: ContextItem) -> str:
    """An item as the prompts show it (as direct generation numbers them)."""
    return f"[{position + 1}] ({item.kind}: {item.source})\n{item.text.strip()}"


def pack_texts(texts: Sequence[str], budget: int, tokenizer: Tokenizer) -> list[list[tuple[int, str]]]:
    """Greedy packing of ``texts``, in order, into groups whose joined text
    (``SEPARATOR`` between them) is at most ``budget`` tokens.

    A pack closes when the next text would pass the budget; each pack's exact
    joined count is then checked, and texts that a tokenizer merge pushed over
    go back to the next pack. A text longer than the budget is cut to it and
    packed alone. Returns (index in ``texts``, text as packed) per pack.
    """
    if budget <= 0:
        raise ValueError(f"budget must be positive, got {budget}")
    separator = tokenizer.count(SEPARATOR)
    queue = deque(zip(range(len(texts)), texts, tokenizer.count_many(list(texts)) if texts else []))
    packs: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str, int]] = []
    used = 0

    def flush() -> None:
        nonlocal current, used
        while len(current) > 1 and tokenizer.count(SEPARATOR.join(t for _, t, _ in current)) > budget:
            queue.appendleft(current.pop())
        packs.append([(i, t) for i, t, _ in current])
        current, used = [], 0

    while queue:
        index, text, count = queue.popleft()
        if count > budget:
            text = tokenizer.truncate(text, budget)
            count = tokenizer.count(text)
        cost = count + (separator if current else 0)
        if current and used + cost > budget:
            queue.appendleft((index, text, count))
            flush()
            continue
        current.append((index, text, count))
        used += cost
    if current:
        flush()
    return packs


def ask_points(
    state: QueryState, template: Prompt, fields: list[dict[str, str]], stage: str, max_tokens: int,
    max_points: int, unparsed_score: float, trace: StagedAnswer,
) -> None:
    """One request per ``fields`` (concurrently); the scored points go into ``trace``."""
    settings = state.resources.settings
    requests = [state.request(template, stage, max_tokens=max_tokens, temperature=settings.chat.temperature,
                              json_mode=True, **f) for f in fields]
    responses = complete_all(state.models.chat, requests, settings.concurrency, state.progress,
                             f"{stage} over {len(requests)} batches")
    for call, response in enumerate(responses):
        trace.replies.append(response.text)
        points, parsed = read_points(response.text, max_points, float(unparsed_score))
        trace.unparsed += 0 if parsed else 1
        trace.points.extend(Point(text, score, call, parsed) for text, score in points)


def keep_points(points: list[Point], score_floor: float) -> list[Point]:
    """Points above the floor, best first; ties keep request and reply order (a stable sort)."""
    return sorted((p for p in points if p.score > score_floor), key=lambda p: -p.score)


def point_block(number: int, point: Point, label: str) -> str:
    return f"[{number}] ({label} {point.score:g})\n{point.description}"


def fill_points(points: list[Point], limit: int, tokenizer: Tokenizer, label: str,
                cut_overflow: bool) -> tuple[str, int]:
    """The final context: points in order until the next would pass ``limit``.

    ``cut_overflow`` (ArchRAG) cuts that next point to the tokens left; else
    (GraphRAG) it and every later point are left out — except a first point
    that alone is too long, which is always cut to fit. Returns (context,
    points used, the last possibly cut).
    """
    separator = tokenizer.count(SEPARATOR)
    blocks: list[str] = []
    used = 0
    for number, point in enumerate(points, start=1):
        block = point_block(number, point, label)
        cost = tokenizer.count(block) + (separator if blocks else 0)
        if used + cost > limit:
            left = limit - used - (separator if blocks else 0)
            if (cut_overflow or not blocks) and left >= MIN_CUT:
                blocks.append(tokenizer.truncate(block, left))
            break
        blocks.append(block)
        used += cost
    text = SEPARATOR.join(blocks)
    while blocks and tokenizer.count(text) > limit:
        blocks.pop()
        text = SEPARATOR.join(blocks)
    return text, len(blocks)


def final_request(
    state: QueryState, template: Prompt, trace: StagedAnswer, limit: int, tokenizer: Tokenizer, stage: str,
    label: str, cut_overflow: bool, allow_general_knowledge: bool,
) -> ChatRequest | None:
    """The reduce / merge request over ``trace.kept``; ``None`` (and the no-data answer in
    ``trace``) when nothing survived."""
    settings = state.resources.settings
    if not trace.kept and not allow_general_knowledge:
        trace.answer, trace.raw = NO_DATA_ANSWER, ""
        return None
    context, trace.used = fill_points(trace.kept, limit, tokenizer, label, cut_overflow)
    trace.final_context = context
    return state.request(template, stage, max_tokens=settings.chat.max_tokens, temperature=settings.chat.temperature,
                         question=state.question, reports=context or "(none)")


def complete_final(state: QueryState, trace: StagedAnswer, request: ChatRequest | None) -> StagedAnswer:
    """Send the final request (if any) in one piece; the answer goes into ``trace``."""
    if request is not None:
        trace.raw = state.models.chat.complete(request).text
        trace.final_called = True
        trace.answer = extract_answer(trace.raw)
    return trace


def staged_plan(trace: StagedAnswer, request: ChatRequest | None) -> AnswerPlan:
    """The final call of a two-stage mode for a caller that makes it (streamed, async)."""
    return AnswerPlan(request, fixed_answer=trace.answer)


# -- the mode --------------------------------------------------------------------------------------


def prepare_map_reduce(
    state: QueryState,
    batch_tokens: int | None = None,
    max_points: int = 5,
    reduce_tokens: int | None = None,
    seed: int = 86,
    shuffle: bool = True,
    map_max_tokens: int | None = None,
    score_floor: float = 0.0,
    unparsed_score: float = 50.0,
    allow_general_knowledge: bool = False,
    map_prompt: str = "map_answer",
    reduce_prompt: str = "reduce_answer",
) -> tuple[StagedAnswer, ChatRequest | None]:
    """GraphRAG global answer over ``state.items`` up to the reduce call: the trace and the
    reduce request (``None``: nothing survived, the no-data answer is in the trace).

    ``batch_tokens``: context tokens per map request (default and cap: what
    the window leaves); ``max_points``: points asked for and kept per map
    reply; ``reduce_tokens``: context tokens of the reduce request (default
    and cap likewise); ``seed``/``shuffle``: the shuffle of the items;
    ``map_max_tokens``: reply length of a map request (``chat.max_tokens``);
    ``score_floor``: points scoring this or less are dropped;
    ``unparsed_score``: the score of a reply without a points list.
    """
    settings = state.resources.settings
    tokenizer = get_tokenizer(settings.chunking.encoding)
    window = settings.chat.prompt_window
    map_template, reduce_template = state.prompt(map_prompt), state.answer_prompt(reduce_prompt)
    map_tokens = int(map_max_tokens or settings.chat.max_tokens)
    base = {"question": state.question, "max_points": str(max_points)}
    batch = context_budget(batch_tokens, prompt_room(map_template, base, "context", tokenizer, window, map_tokens),
                           "batch_tokens", "map_reduce", window)
    reduce_room = prompt_room(reduce_template, {"question": state.question}, "reports", tokenizer, window,
                              settings.chat.max_tokens)
    limit = context_budget(reduce_tokens, reduce_room, "reduce_tokens", "map_reduce", window)

    order = list(range(len(state.items)))
    if shuffle:
        random.Random(seed).shuffle(order)
    blocks = [item_block(position, state.items[position]) for position in order]
    trace = StagedAnswer("", "")
    fields = []
    for pack in pack_texts(blocks, batch, tokenizer):
        trace.packs.append([order[index] for index, _ in pack])
        trace.labels.append("batch")
        fields.append({**base, "context": SEPARATOR.join(text for _, text in pack)})
    ask_points(state, map_template, fields, "query.map", map_tokens, max_points, unparsed_score, trace)
    trace.kept = keep_points(trace.points, score_floor)
    request = final_request(state, reduce_template, trace, limit, tokenizer, "query.reduce", "helpfulness",
                            cut_overflow=False, allow_general_knowledge=allow_general_knowledge)
    return trace, request


def map_reduce(state: QueryState, **params: Any) -> StagedAnswer:
    """GraphRAG global answer over ``state.items``, with its trace (module docstring); ``params``
    as :func:`prepare_map_reduce`."""
    return complete_final(state, *prepare_map_reduce(state, **params))


def check_params(params: dict[str, Any], known: tuple[tuple[str, Any], ...], mode: str) -> None:
    """A clear error for a parameter the mode does not have (a typo in a spec)."""
    unknown = sorted(set(params) - {name for name, _ in known})
    if unknown:
        raise MethodError(f"generation mode {mode} has no parameter {', '.join(unknown)} "
                          f"(known: {', '.join(name for name, _ in known)})")


def plan_map_reduce(state: QueryState, **params: Any) -> AnswerPlan:
    """The map step done and the reduce call prepared, for a caller that makes it itself."""
    check_params(params, PARAMS, "map_reduce")
    return staged_plan(*prepare_map_reduce(state, **params))


def generate_map_reduce(state: QueryState, **params: Any) -> tuple[str, str]:
    """(answer, raw reduce output) — the ``map_reduce`` generation mode; ``params`` as :func:`map_reduce`."""
    check_params(params, PARAMS, "map_reduce")
    return map_reduce(state, **params).as_pair()
