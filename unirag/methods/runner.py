"""The one method runner: conversions, operators in order, then generation.

Every method, shipped or user-written, goes through :meth:`MethodRunner.run`, or,
for a caller that makes the final model call itself (streamed, async: ``unirag.api``),
through its three steps :meth:`~MethodRunner.retrieve`, :meth:`~MethodRunner.plan` and
:meth:`~MethodRunner.result`. Indices are loaded once per runner (per process) and
reused across queries; concurrent queries share them read-only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unirag.config import Settings
from unirag.generate.modes import plan_answer
from unirag.generate.plan import AnswerPlan
from unirag.generate.standalone import standalone_question
from unirag.llm.base import UsageLedger
from unirag.llm.factory import ModelStack
from unirag.llm.rerank import missing_reranker
from unirag.methods.spec import MethodSpec, OperatorCall, RepeatBlock, Rounds
from unirag.methods.stopping import context_suffices
from unirag.operators.context import ContextItem, QueryState, Resources
from unirag.operators.question import check_question, conversions_to_run
from unirag.operators.registry import conversion_registry, operator_registry
from unirag.progress import Progress
from unirag.workspace import Workspace


#: Characters of each citation's text (a snippet to show, not the passage).
CITATION_SNIPPET = 400


@dataclass
class QueryResult:
    question: str
    method: str
    answer: str
    raw_answer: str
    context: list[ContextItem]
    ledger: UsageLedger
    timings: dict[str, float] = field(default_factory=dict)
    rounds: dict[str, int] = field(default_factory=dict)
    # Artifacts brought up to date before the query ran (artifact -> why) and their usage.
    refreshed: dict[str, str] = field(default_factory=dict)
    refresh_ledger: UsageLedger | None = None
    # One line each for what the user should know (a prompt cut to fit the window, an empty answer).
    warnings: list[str] = field(default_factory=list)
    # The model was asked for an answer and gave none (only whitespace).
    empty_answer: bool = False
    # The question conversions that ran, in order: ``entities_nlp`` where the spec's
    # ``entities`` was read without the chat model (retrieval.question_path).
    conversions: list[str] = field(default_factory=list)
    # A multi-turn chat (``history`` given): the last message as asked, and the rule that turned it
    # into ``question`` (none, llm, previous, as_asked: ``unirag.generate.standalone``).
    asked: str = ""
    rewrite: str = ""

    def citations(self, snippet: int = CITATION_SNIPPET) -> list[dict[str, Any]]:
        """The context as numbered sources, ``index`` = the ``[N]`` the answer prompt gave the
        item (``unirag.generate.direct.format_context`` numbers ``context`` from 1 in this
        order), so an answer's ``[2]`` is ``citations[1]``. Each: index, kind, source, title
        (the chunk's document title for a chunk, else the source), chunk_id (the chunk itself,
        else the first chunk it was drawn from, or None), score and the start of its text.
        One builder for every door that returns sources (chat APIs, MCP)."""
        out = []
        for number, item in enumerate(self.context, start=1):
            chunk_ids = item.provenance.get("chunk_ids") or []
            chunk_id = item.id if item.kind == "chunk" else (str(chunk_ids[0]) if chunk_ids else None)
            text = " ".join(item.text.split())
            out.append({"index": number, "kind": item.kind, "source": item.provenance.get("path") or item.source,
                        "title": item.source, "chunk_id": chunk_id, "score": round(item.score, 6),
                        "text": text if len(text) <= snippet else text[:snippet].rstrip() + "…"})
        return out

    def usage(self) -> dict[str, Any]:
        total = self.ledger.total()
        return {
            "llm_calls": total.llm_calls,
            "cache_hits": total.cache_hits,
            "prompt_tokens": total.prompt_tokens,
            "completion_tokens": total.completion_tokens,
            "cut_replies": total.cut_replies,
            "embedding_calls": total.embedding_calls,
            "embedding_cache_hits": total.embedding_cache_hits,
            "rerank_calls": total.rerank_calls,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "method": self.method,
            "answer": self.answer,
            "raw_answer": self.raw_answer,
            "context": [item.to_json() for item in self.context],
            "usage": self.usage(),
            "usage_by_stage": self.ledger.to_json(),
            "timings": {name: round(seconds, 4) for name, seconds in self.timings.items()},
            "rounds": self.rounds,
            "warnings": self.warnings,
            "empty_answer": self.empty_answer,
            "conversions": self.conversions,
            **({"asked": self.asked, "rewrite": self.rewrite} if self.rewrite else {}),
            **({"refreshed": {"artifacts": self.refreshed,
                              "usage_by_stage": self.refresh_ledger.to_json() if self.refresh_ledger else {}}}
               if self.refreshed else {}),
        }


def chat_seconds(ledger: UsageLedger) -> float:
    """Seconds spent in chat-model calls (cache hits included) so far, over every stage."""
    return sum(usage.seconds for usage in ledger.stages.values() if usage.llm_calls or usage.cache_hits)


class MethodRunner:
    def __init__(self, workspace: Workspace, settings: Settings, stack: ModelStack,
                 progress: Progress | None = None, resources: Resources | None = None) -> None:
        """``resources``: indices another runner already loaded (a per-query ``top_k`` shares them)."""
        self.settings = settings
        self.stack = stack
        self.progress = progress
        self.resources = resources if resources is not None else Resources(workspace, settings)

    def run(self, spec: MethodSpec, question: str, generate: bool = True) -> QueryResult:
        """Answer ``question``; ``generate=False`` stops after retrieval (for evaluation)."""
        state = self.retrieve(spec, question)
        answer = raw = ""
        if generate:
            tick = time.perf_counter()
            answer, raw = self.plan(state, spec).complete(state.models.chat)
            state.timings["generate"] = time.perf_counter() - tick
        return self.result(state, spec, answer, raw, generated=generate)

    def retrieve(self, spec: MethodSpec, question: str,
                 history: Sequence[Mapping[str, Any]] = ()) -> QueryState:
        """Conversions and operators: the state holds the context (``items``), the query's
        ledger (``models.ledger``) and its timings so far. ``history``: the earlier messages
        of a chat ({"role", "content"}); the question is first made self-contained
        (:mod:`unirag.generate.standalone`, a model call charged to ``query.rewrite``)."""
        question = check_question(question, self.settings)
        ledger = UsageLedger()
        state = QueryState(question=question, resources=self.resources, models=self.stack.accounted(ledger),
                           progress=self.progress)
        if state.models.reranker is None and any(operator_registry()[call.op].needs_reranker
                                                  for call in spec.calls()):
            raise missing_reranker(spec.name)
        if history:
            tick = time.perf_counter()
            rewritten, state.rewrite = standalone_question(state, history)
            state.asked, state.question = question, check_question(rewritten, self.settings)
            state.timings["question.rewrite"] = time.perf_counter() - tick
        conversions = conversion_registry()
        state.conversions = conversions_to_run(spec.question, self.settings)
        for name in state.conversions:
            tick = time.perf_counter()
            conversions[name].fn(state)
            state.timings[f"question.{name}"] = time.perf_counter() - tick
        for position, step in enumerate(spec.operators):
            if isinstance(step, RepeatBlock):
                self._run_rounds(state, step.repeat, f"operator.{position}")
            else:
                self._run_call(state, step, f"operator.{position}")
        # Retrieval time, and the part of it spent waiting for the chat model (agent
        # operators, question entities/keywords): the survey's Table 7 compares the rest.
        state.timings["retrieval"] = sum(
            seconds for name, seconds in state.timings.items() if name.startswith(("question.", "operator.")))
        state.timings["retrieval.llm"] = chat_seconds(ledger)
        return state

    def plan(self, state: QueryState, spec: MethodSpec) -> AnswerPlan:
        """The generation up to its final call (map / filter calls included), that call prepared.
        The caller times the whole generation into ``state.timings["generate"]``."""
        return plan_answer(state, spec.generation)

    @staticmethod
    def result(state: QueryState, spec: MethodSpec, answer: str, raw: str, generated: bool = True) -> QueryResult:
        """The query's result; ``generated``: an answer was asked for (an empty one is flagged)."""
        state.timings["total"] = time.perf_counter() - state.started
        empty = generated and not answer.strip()
        if empty:
            state.warn("the model returned an empty answer; try again, another method, or a larger model")
        return QueryResult(state.question, spec.name, answer, raw, state.items, state.models.ledger, state.timings,
                           state.rounds, warnings=list(state.warnings), empty_answer=empty,
                           conversions=list(state.conversions), asked=state.asked, rewrite=state.rewrite)

    def _run_call(self, state: QueryState, call: OperatorCall, key: str) -> None:
        """One operator: its items join the context (unless ``emit: false``); its seconds go to ``key.op``."""
        tick = time.perf_counter()
        spec = operator_registry()[call.op]
        params = {"top_k": self.settings.retrieval.top_k} if "top_k" in dict(spec.params) else {}
        params.update(call.params)
        # ``emit: false``: the operator only feeds later ones (its candidates), not the context.
        emit = bool(params.pop("emit", True))
        found = spec.fn(state, **params)
        for item in found:  # who found each item (an operator that names none: the call's own name)
            item.operator = item.operator or call.op
        state.ranked_lists.append((call.op, found))
        if emit:
            seen = {(item.kind, item.id) for item in state.items}
            # An element found by two operators appears once, where it was first found.
            state.items.extend(item for item in found if (item.kind, item.id) not in seen)
        state.timings[f"{key}.{call.op}"] = time.perf_counter() - tick

    def _run_rounds(self, state: QueryState, rounds: Rounds, key: str) -> None:
        """A ``repeat`` block: its operators round after round, stopping early when
        ``rounds.until`` says the context suffices (not asked after the last round)."""
        for number in range(1, rounds.rounds + 1):
            for position, call in enumerate(rounds.operators):
                self._run_call(state, call, f"{key}.r{number}.{position}")
            state.rounds[key] = number
            if rounds.until and number < rounds.rounds:
                tick = time.perf_counter()
                enough = context_suffices(state, rounds.until)
                state.timings[f"{key}.r{number}.until"] = time.perf_counter() - tick
                if enough:
                    break
