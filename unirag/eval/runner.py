"""``unirag eval``: every method on every question of a benchmark, resumable.

One run = one workspace (the benchmark's corpus, indexed once), a list of
methods and a list of questions. Each (method, question) answer is one JSONL
row in ``answers.jsonl``, appended and flushed as soon as it exists, so a
killed run resumes where it stopped: rows already written are kept and not
asked again (their LLM calls are also in the response cache). Rows that
failed (a model error after its retries) carry ``error`` and are retried on
the next run.

Each row has the answer-level metrics of the question's kind
(:func:`unirag.eval.metrics.score_answer`), the retrieval-level ones
(:func:`unirag.eval.budget.retrieval_figures`: grounded recall, gold evidence
recall over the provenance of the retrieved items, whether a gold answer
appears in the context, the context size in tokens), the usage and
the seconds split into retrieval, the chat time inside retrieval (agent
operators) and generation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unirag.config import Settings
from unirag.errors import UniragError
from unirag.eval.budget import budget_figures, recall_at, retrieval_figures
from unirag.eval.datasets import Dataset, Question, question_type
from unirag.eval.jsonl import end_cut_line, read_rows
from unirag.eval.metrics import normalize_answer, score_answer
from unirag.llm.factory import ModelStack
from unirag.methods.runner import MethodRunner, QueryResult
from unirag.methods.spec import MethodSpec
from unirag.pipeline import prepare_query, run_index
from unirag.progress import Progress
from unirag.text.tokenizer import get_tokenizer
from unirag.workspace import Workspace

ANSWERS_FILE = "answers.jsonl"


def metric_kind(question: Question) -> str:
    """The :func:`score_answer` kind of a dataset question."""
    if question.kind == "factoid":
        return "short"
    if question.kind == "long_form":
        return "asqa" if question.answer_sets else "long"
    return question.kind  # multiple_choice, abstract


def row_key(method: str, question_id: str) -> str:
    return f"{method}\x00{question_id}"


def latest_rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The last row per (method, question): a retried error is superseded by its answer."""
    return {row_key(row["method"], row["question_id"]): row for row in rows}


def run_rows(out: Path, methods: Collection[str], question_ids: Collection[str] | None = None) -> list[dict[str, Any]]:
    """The latest row per (method, question) of ``out/answers.jsonl`` for ``methods`` (and questions)."""
    return [row for row in all_rows(out) if row["method"] in methods
            and (question_ids is None or row["question_id"] in question_ids)]


def all_rows(out: Path) -> list[dict[str, Any]]:
    """The latest row per (method, question) of ``out/answers.jsonl``, every method ever
    answered there: reports are of these, so a resumed run with fewer methods keeps the
    others in the tables."""
    return list(latest_rows(read_rows(out / ANSWERS_FILE)[0]).values())


@dataclass
class EvalPlan:
    """What one ``unirag eval`` run does."""

    dataset: Dataset
    methods: list[MethodSpec]
    out: Path
    generate: bool = True
    budgets: list[int] = field(default_factory=list)  # token budgets the context is also scored at


@dataclass
class EvalProgress:
    done: int = 0
    skipped: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


class PassageLookup:
    """Maps retrieved items to the passages (document ids and titles) they came from."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._chunks: dict[str, tuple[str, str]] = {}

    def _load(self, chunk_ids: set[str]) -> None:
        missing = [c for c in chunk_ids if c not in self._chunks]
        for chunk_id, chunk in self.workspace.corpus.get_chunks(missing).items():
            self._chunks[chunk_id] = (chunk.doc_id, chunk.title)

    def ranked_documents(self, chunk_ids: list[str]) -> list[str]:
        """The distinct documents of ``chunk_ids``, in the order they first appear."""
        self._load(set(chunk_ids))
        return list(dict.fromkeys(self._chunks[c][0] for c in chunk_ids if c in self._chunks))

    def passages(self, items: list[Any]) -> tuple[set[str], set[str]]:
        """(document ids, titles) of the passages quoted in the context (chunks, tree
        leaves) or that its entities and relationships were extracted from.
        Community reports and tree summaries have no passage of their own."""
        chunk_ids: set[str] = set()
        for item in items:
            if item.kind == "chunk":
                chunk_ids.add(item.id)
            elif item.kind in ("entity", "relationship"):
                chunk_ids.update(item.provenance.get("chunk_ids", ()))
        self._load(chunk_ids)
        found = [self._chunks[c] for c in chunk_ids if c in self._chunks]
        return {doc for doc, _ in found}, {title for _, title in found if title}


def answer_row(
    dataset: str, question: Question, result: QueryResult, passages: PassageLookup,
    count_tokens: Callable[[str], int], generated: bool, budgets: Sequence[int] = (),
) -> dict[str, Any]:
    """One JSONL row: the answer, its metrics, the retrieval-level figures (of the whole
    context, and of the context cut to each of ``budgets``), cost and time."""
    kind = metric_kind(question)
    metrics: dict[str, float] = {}
    if generated:
        metrics = score_answer(
            kind, result.answer, question.answers, qa_pairs=question.gold_sets if kind == "asqa" else None,
            choices=question.choices or None, gold_index=question.gold_choice,
        )
    timings = result.timings
    usage = result.usage()
    row = {
        "dataset": dataset, "method": result.method, "question_id": question.id, "question": question.question,
        "kind": kind, "question_type": question_type(question), "gold": question.answers[:5],
        "answer": result.answer, "metrics": metrics,
        "retrieval": {**retrieval_figures(result.context, question, passages, count_tokens),
                      "recall_at": recall_at(result.context, question, passages)},
        "conversions": result.conversions,
        "usage": {key: usage[key] for key in ("llm_calls", "cache_hits", "prompt_tokens", "completion_tokens",
                                              "cut_replies")},
        "seconds": {
            "retrieval": round(timings.get("retrieval", 0.0), 4),
            "retrieval_llm": round(timings.get("retrieval.llm", 0.0), 4),
            "generate": round(timings.get("generate", 0.0), 4),
            "total": round(timings.get("total", 0.0), 4),
        },
        "context": [{"kind": i.kind, "id": i.id, "source": i.source, "operator": i.operator,
                     "score": round(i.score, 6)} for i in result.context],
        "error": None,
    }
    if budgets:
        row["budgets"] = budget_figures(result.context, question, passages, count_tokens, budgets)
    return row


def error_row(dataset: str, method: str, question: Question, error: BaseException) -> dict[str, Any]:
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    return {"dataset": dataset, "method": method, "question_id": question.id, "question": question.question,
            "kind": metric_kind(question), "error": f"{type(error).__name__}: {message}"}


def pending(plan: EvalPlan, done: dict[str, dict[str, Any]]) -> list[tuple[Question, MethodSpec]]:
    """The (question, method) pairs without a successful row yet, question by question:
    a run stopped early leaves every method with about as many answers."""
    return [(question, spec) for question in plan.dataset.questions for spec in plan.methods
            if (row := done.get(row_key(spec.name, question.id))) is None or row.get("error")]


def answer_all(
    workspace: Workspace, settings: Settings, stack: ModelStack, plan: EvalPlan, progress: Progress,
    warn: Callable[[str], None],
) -> EvalProgress:
    """Answer every pending (question, method), appending one row each to ``answers.jsonl``.

    A failure of one question (the model gave up after its retries, a malformed
    artifact) is written as an error row and the run goes on; Ctrl-C stops it,
    and the next run starts from the first missing row.
    """
    plan.out.mkdir(parents=True, exist_ok=True)
    path = plan.out / ANSWERS_FILE
    done = latest_rows(read_rows(path)[0])
    runner = MethodRunner(workspace, settings, stack)
    passages = PassageLookup(workspace)
    count = get_tokenizer(settings.chunking.encoding).count
    todo = pending(plan, done)
    report = EvalProgress(skipped=len(plan.dataset.questions) * len(plan.methods) - len(todo))
    end_cut_line(path)
    warm: set[str] = set()  # methods that already answered in this process (their indices are loaded)
    with open(path, "a", encoding="utf-8") as out, progress.task("answering", total=len(todo)) as advance:
        for question, spec in todo:
            try:
                result = runner.run(spec, question.question, generate=plan.generate)
                row = answer_row(plan.dataset.name, question, result, passages, count, plan.generate, plan.budgets)
                row["cold"] = spec.name not in warm  # its retrieval time includes loading indices
                warm.add(spec.name)
                report.done += 1
            except UniragError as exc:
                row = error_row(plan.dataset.name, spec.name, question, exc)
                report.failed += 1
                report.errors.append(f"{spec.name} / {question.id}: {row['error']}")
                warn(f"{spec.name} on {question.id}: {row['error']}")
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            out.flush()
            advance(1)
    return report


def required_artifacts(methods: list[MethodSpec]) -> list[str]:
    return sorted({name for spec in methods for name in spec.requires()})


def prepare_workspace(
    workspace: Workspace, settings: Settings, stack: ModelStack, dataset: Dataset, methods: list[MethodSpec],
    progress: Progress, warn: Callable[[str], None],
) -> dict[str, Any]:
    """Index the benchmark's passages when the workspace has no corpus, then build
    what the methods need, once. Returns what was done (for the run log)."""
    started = time.perf_counter()
    info: dict[str, Any] = {}
    if not workspace.corpus.chunk_ids():
        report = run_index(workspace, [], settings, stack, progress=progress, warn=warn, graphs=[],
                           documents=dataset.documents())
        info["indexed"] = report.to_json()
    else:
        gold = {doc for q in dataset.questions for doc in q.evidence_ids}
        missing = len(gold - workspace.corpus.document_ids()) if gold else 0
        # questions with gold titles only (generic, MultiHop-RAG, ALCE): recall compares titles
        titled = {normalize_answer(t) for q in dataset.questions if not q.evidence_ids for t in q.evidence} - {""}
        if titled:
            stored = {normalize_answer(title) for title in workspace.corpus.document_titles()}
            missing += len(titled - stored)
        total = len(gold) + len(titled)
        if missing:
            warn(f"{missing} of {total} gold evidence passages are not in {workspace.root}: "
                 "evidence recall will be low (index the benchmark's corpus, or use an empty workspace)")
    info["built"] = list(prepare_query(workspace, settings, stack, required_artifacts(methods), progress,
                                       note=warn))
    info["seconds"] = round(time.perf_counter() - started, 2)
    return info
