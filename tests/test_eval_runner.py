"""``unirag eval`` end to end on a hand-made benchmark: answering, resume, reports, judge, CLI.

Six passages and three questions whose gold answers are passage titles, so every
figure is checkable by hand: ``ScriptedChat`` answers a question asked with context
by the title of the first passage shown, and BM25 only returns passages that share
a word with the question. No network, no real model.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result
from fakes import HashEmbedder, ScriptedChat, fake_stack, make_settings, small_corpus
from typer.testing import CliRunner

from unirag import cli
from unirag.config import Settings
from unirag.errors import ConfigError, LLMError
from unirag.eval.datasets import Dataset, Question, load_dataset
from unirag.eval.jsonl import read_rows
from unirag.eval.judge import read_records
from unirag.eval.judge import eval_run
from unirag.eval.judge.eval_run import JUDGE_FILE, ask_judge, judge_report
from unirag.eval.report import (
    TIME_COLUMNS,
    columns,
    plot_metric_vs_tokens,
    plot_win_rates,
    summarize,
    write_report,
    write_tables,
)
from unirag.eval.runner import (
    ANSWERS_FILE,
    EvalPlan,
    EvalProgress,
    PassageLookup,
    answer_all,
    latest_rows,
    metric_kind,
    prepare_workspace,
)
from unirag.llm import factory
from unirag.llm.base import ChatRequest, ChatResponse
from unirag.methods.spec import MethodSpec, resolve_method
from unirag.progress import Progress
from unirag.text.tokenizer import get_tokenizer
from unirag.workspace import Workspace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

PASSAGES: list[tuple[str, str]] = [
    ("Paris", "Paris is the capital of France and home of the Eiffel Tower."),
    ("Tokyo", "Tokyo is the capital of Japan and has the Shibuya crossing."),
    ("Nile", "The Nile river flows north through Egypt to the Mediterranean."),
    ("Sahara", "The Sahara desert is hot and dry."),
    ("Quokka", "The quokka is a small marsupial living on Rottnest Island."),
    ("Marie Curie", "Marie Curie won Nobel prizes in physics and chemistry."),
]
TEXT = dict(PASSAGES)
# BM25 (English stop words dropped, no stemming, positive scores only) retrieves:
#   q1 {city, capital, france}  -> Paris (france + capital), Tokyo (capital): gold Paris found, recall 1
#   q2 {quokka, live}           -> Quokka only: recall 1, but the answer "Quokka" is not "Rottnest Island"
#   q3 {river, flows, egypt}    -> Nile only: gold {Nile, Sahara}, recall 1/2
QUESTIONS: list[dict[str, Any]] = [
    {"id": "q1", "question": "Which city is the capital of France?", "answer": "Paris", "evidence": ["Paris"]},
    {"id": "q2", "question": "Where does the quokka live?", "answer": "Rottnest Island", "evidence": ["Quokka"]},
    {"id": "q3", "question": "Which river flows through Egypt?", "answer": "Nile", "evidence": ["Nile", "Sahara"]},
]
BM25_SOURCES = {"q1": ["Paris", "Tokyo"], "q2": ["Quokka"], "q3": ["Nile"]}
BM25_RECALL = {"q1": 1.0, "q2": 1.0, "q3": 0.5}
# the scripted answer is the first passage's title: right for q1 and q3, wrong for q2
BM25_ACCURACY = {"q1": 1.0, "q2": 0.0, "q3": 1.0}
ROW_FIELDS = {"dataset", "method", "question_id", "question", "kind", "question_type", "gold", "answer", "metrics",
              "retrieval", "conversions",
              "usage", "seconds", "context", "error", "cold"}


def write_dataset(root: Path, questions: list[dict[str, Any]] = QUESTIONS) -> Path:
    """A generic ``Question.jsonl`` + ``Corpus.jsonl`` pair in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "Corpus.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps({"title": title, "text": text}) + "\n" for title, text in PASSAGES)
    with open(root / "Question.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(question) + "\n" for question in questions)
    return root


def specs(*names: str) -> list[MethodSpec]:
    return [resolve_method(name) for name in names]


@dataclass
class Bench:
    """A workspace holding the benchmark's passages, and a way to run ``answer_all`` on it."""

    root: Path
    dataset: Dataset
    ws: Workspace
    settings: Settings
    warnings: list[str] = field(default_factory=list)

    @property
    def out(self) -> Path:
        return self.root / "out"

    def answer(self, methods: list[MethodSpec], chat: Any = None, generate: bool = True,
               budgets: list[int] | None = None) -> EvalProgress:
        stack = fake_stack(self.settings, self.ws, chat=chat)
        plan = EvalPlan(self.dataset, methods, self.out, generate=generate, budgets=budgets or [])
        return answer_all(self.ws, self.settings, stack, plan, Progress(), self.warnings.append)

    def rows(self) -> list[dict[str, Any]]:
        rows, bad = read_rows(self.out / ANSWERS_FILE)
        assert bad == 0
        return rows

    def latest(self) -> dict[tuple[str, str], dict[str, Any]]:
        return {(r["method"], r["question_id"]): r for r in latest_rows(self.rows()).values()}


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    dataset = load_dataset(write_dataset(tmp_path / "data"))
    ws = Workspace.init(tmp_path / "ws")
    settings = make_settings(ws.root)
    warnings: list[str] = []
    prepare_workspace(ws, settings, fake_stack(settings, ws), dataset, specs("vanilla", "bm25"), Progress(),
                      warnings.append)
    assert warnings == []
    yield Bench(tmp_path, dataset, ws, settings, warnings)
    ws.close()


def titles_of(ws: Workspace, row: dict[str, Any]) -> set[str]:
    """Titles of the passages behind a row's context chunks, read straight from the store."""
    chunks = ws.corpus.get_chunks([item["id"] for item in row["context"] if item["kind"] == "chunk"])
    return {chunk.title for chunk in chunks.values()}


# -- answering ----------------------------------------------------------------------------------


def test_metric_kind_maps_dataset_kinds() -> None:
    """Dataset kinds map onto score_answer's kinds; long-form with answer sets is ALCE's asqa."""
    assert metric_kind(Question("a", "?", ["x"])) == "short"
    assert metric_kind(Question("a", "?", ["x"], kind="long_form")) == "long"
    assert metric_kind(Question("a", "?", ["x"], kind="long_form", answer_sets=[["x"]])) == "asqa"
    assert metric_kind(Question("a", "?", ["x"], choices=["x", "y"], gold_choice=0,
                                kind="multiple_choice")) == "multiple_choice"
    assert metric_kind(Question("a", "?", kind="abstract")) == "abstract"


def test_answer_all_writes_one_row_per_method_and_question(bench: Bench) -> None:
    """Every (method, question) gets one complete row; BM25's recall, accuracy and context size
    match the hand-computed values; vanilla's recall matches the titles of its context chunks."""
    chat = ScriptedChat()
    report = bench.answer(specs("vanilla", "bm25", "zeroshot"), chat)
    assert (report.done, report.skipped, report.failed, report.errors) == (9, 0, 0, [])
    assert chat.calls == 9  # one generation per row
    rows = bench.rows()
    assert len(rows) == 9
    assert [(r["method"], r["question_id"]) for r in rows] == [  # question by question
        (m, q) for q in ("q1", "q2", "q3") for m in ("vanilla", "bm25", "zeroshot")]
    count = get_tokenizer(bench.settings.chunking.encoding).count
    for row in rows:
        assert set(row) == ROW_FIELDS, row["method"]
        assert row["error"] is None and row["dataset"] == "data" and row["kind"] == "short"
        assert set(row["metrics"]) == {"accuracy", "recall", "em", "f1"}
        assert set(row["seconds"]) == {"retrieval", "retrieval_llm", "generate", "total"}
        seconds = row["seconds"]
        assert seconds["total"] >= seconds["generate"] > 0 and seconds["total"] >= seconds["retrieval"] >= 0
        assert seconds["retrieval_llm"] == 0  # no agent operator asks the model while retrieving
        assert row["usage"]["llm_calls"] == 1 and row["usage"]["prompt_tokens"] > 0
        assert row["retrieval"]["items"] == len(row["context"])
        gold = QUESTIONS[int(row["question_id"][1]) - 1]
        assert row["gold"] == [gold["answer"]] and row["question"] == gold["question"]

    by = {(r["method"], r["question_id"]): r for r in rows}
    for qid in ("q1", "q2", "q3"):
        bm25 = by[("bm25", qid)]
        assert [item["source"] for item in bm25["context"]] == BM25_SOURCES[qid]
        assert bm25["answer"] == BM25_SOURCES[qid][0]
        assert bm25["retrieval"]["evidence_recall"] == BM25_RECALL[qid]
        assert bm25["retrieval"]["grounded_recall"] == BM25_RECALL[qid]  # its chunks quote whole passages
        assert bm25["metrics"]["accuracy"] == bm25["metrics"]["em"] == BM25_ACCURACY[qid]
        assert bm25["retrieval"]["answer_in_context"] == 1.0  # every gold answer is in its passage
        assert bm25["retrieval"]["passages"] == len(BM25_SOURCES[qid])
        context = "\n".join(f"{title}\n{TEXT[title]}" for title in BM25_SOURCES[qid])
        assert bm25["retrieval"]["context_tokens"] == count(context)

        vanilla = by[("vanilla", qid)]
        assert len(vanilla["context"]) == 4 and vanilla["retrieval"]["passages"] == 4
        gold = QUESTIONS[int(qid[1]) - 1]["evidence"]
        found = titles_of(bench.ws, vanilla)
        assert vanilla["retrieval"]["evidence_recall"] == len(found & set(gold)) / len(gold)
        assert vanilla["retrieval"]["grounded_recall"] == vanilla["retrieval"]["evidence_recall"]
        assert vanilla["retrieval"]["context_tokens"] > bm25["retrieval"]["context_tokens"]  # 4 passages, not 1-2

        zeroshot = by[("zeroshot", qid)]
        assert zeroshot["answer"] == "scripted answer" and zeroshot["context"] == []
        # no passage in the context: a miss in the headline, left out of the conditional mean
        assert zeroshot["retrieval"]["evidence_recall"] == 0.0
        assert zeroshot["retrieval"]["evidence_recall_with_passage"] is None
        assert zeroshot["retrieval"]["grounded_recall"] == 0.0
        assert zeroshot["retrieval"]["answer_in_context"] == 0.0
        assert zeroshot["retrieval"]["context_tokens"] == 0
        assert zeroshot["metrics"]["accuracy"] == 0.0


def test_passage_lookup_maps_entity_provenance_to_passages(bench: Bench) -> None:
    """Chunks count by id, entities and relationships by their provenance chunk ids, and
    community reports (no passage of their own) not at all."""

    @dataclass
    class Item:
        kind: str
        id: str
        provenance: dict[str, Any] = field(default_factory=dict)

    ids = {chunk.title: chunk.id for chunk in bench.ws.corpus.iter_chunks()}
    lookup = PassageLookup(bench.ws)
    items = [Item("chunk", ids["Paris"]), Item("entity", "e1", {"chunk_ids": [ids["Nile"]]}),
             Item("relationship", "r1", {"chunk_ids": [ids["Nile"], ids["Sahara"]]}),
             Item("community", "c1", {"chunk_ids": [ids["Tokyo"]]}), Item("chunk", "no-such-chunk")]
    doc_ids, titles = lookup.passages(items)
    assert titles == {"Paris", "Nile", "Sahara"}
    assert len(doc_ids) == 3 and doc_ids <= bench.ws.corpus.document_ids()
    assert lookup.passages([]) == (set(), set())


def test_resume_after_a_lost_last_row_answers_only_that_row(bench: Bench) -> None:
    """Deleting the last row (a kill before it was written) costs one answer on the rerun,
    which the response cache serves; nothing is duplicated."""
    methods = specs("vanilla", "bm25")
    bench.answer(methods)
    path = bench.out / ANSWERS_FILE
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 6
    path.write_text("".join(lines[:-1]), encoding="utf-8")

    chat = ScriptedChat()
    report = bench.answer(methods, chat)
    assert (report.done, report.skipped, report.failed) == (1, 5, 0)
    assert chat.calls == 0  # the lost answer's generation is in the response cache
    rows = bench.rows()
    assert len(rows) == 6 and len(latest_rows(rows)) == 6
    assert (rows[-1]["method"], rows[-1]["question_id"]) == ("bm25", "q3")
    assert rows[-1]["usage"]["cache_hits"] == 1 and rows[-1]["usage"]["llm_calls"] == 0

    again = bench.answer(methods, chat)
    assert (again.done, again.skipped) == (0, 6)
    assert len(bench.rows()) == 6


def test_resume_after_a_last_row_cut_mid_json(bench: Bench) -> None:
    """A kill in the middle of writing the last row leaves half a JSON line without a newline:
    the rerun answers that row again and its new row must be readable (not glued to the cut one)."""
    methods = specs("vanilla", "bm25")
    bench.answer(methods)
    path = bench.out / ANSWERS_FILE
    text = path.read_text(encoding="utf-8")
    last_start = text.rstrip("\n").rfind("\n") + 1
    path.write_text(text[: last_start + 40], encoding="utf-8")  # no trailing newline
    kept, bad = read_rows(path)
    assert len(kept) == 5 and bad == 1

    report = bench.answer(methods)
    assert (report.done, report.skipped) == (1, 5)
    rows, bad = read_rows(path)
    assert bad == 1  # the cut line stays, skipped
    latest = latest_rows(rows)
    assert len(rows) == 6 and len(latest) == 6
    assert latest["bm25\x00q3"]["answer"] == "Nile"

    again = bench.answer(methods)
    assert (again.done, again.skipped) == (0, 6)


def test_error_rows_are_written_and_retried_on_the_next_run(bench: Bench) -> None:
    """A model error on one question becomes an error row per method and the run goes on;
    the next run asks exactly those rows again, and latest_rows then holds the answers."""

    class FlakyChat(ScriptedChat):
        """ScriptedChat, except that the quokka question's generation fails."""

        def answer_for(self, request: ChatRequest) -> str:
            if "Question: Where does the quokka live?" in self.user_message(request):
                raise LLMError("model exploded\nsecond line of detail")
            return super().answer_for(request)

    failing = FlakyChat()
    methods = specs("vanilla", "bm25")
    first = bench.answer(methods, failing)
    assert (first.done, first.failed) == (4, 2)
    assert first.errors == ["vanilla / q2: LLMError: model exploded", "bm25 / q2: LLMError: model exploded"]
    assert len(bench.warnings) == 2 and all("q2" in w for w in bench.warnings)
    rows = bench.rows()
    errors = [r for r in rows if r["error"]]
    assert [(r["method"], r["question_id"]) for r in errors] == [("vanilla", "q2"), ("bm25", "q2")]
    assert all(r["error"] == "LLMError: model exploded" and r["kind"] == "short" for r in errors)
    assert all("metrics" not in r for r in errors)

    working = ScriptedChat()
    second = bench.answer(methods, working)
    assert (second.done, second.skipped, second.failed) == (2, 4, 0)
    assert working.calls == 2  # failed calls were not cached: asked again, once per method
    rows = bench.rows()
    assert len(rows) == 8
    latest = bench.latest()
    assert len(latest) == 6 and not any(r["error"] for r in latest.values())
    assert latest[("vanilla", "q2")]["answer"] == latest[("bm25", "q2")]["answer"] == "Quokka"
    assert (bench.answer(methods, working).done, working.calls) == (0, 2)


def test_retrieve_only_asks_no_model_and_scores_retrieval(bench: Bench) -> None:
    """``EvalPlan(generate=False)``: no chat call, empty answers and metrics, retrieval figures kept."""
    chat = ScriptedChat()
    report = bench.answer(specs("vanilla", "bm25", "zeroshot"), chat, generate=False)
    assert report.done == 9 and chat.calls == 0
    by = bench.latest()
    for row in by.values():
        assert row["metrics"] == {} and row["answer"] == ""
        assert row["usage"]["llm_calls"] == 0 and row["usage"]["prompt_tokens"] == 0
        assert row["seconds"]["generate"] == 0
        assert {"evidence_recall", "answer_in_context", "context_tokens"} <= set(row["retrieval"])
    for qid, recall in BM25_RECALL.items():
        assert by[("bm25", qid)]["retrieval"]["evidence_recall"] == recall
        assert by[("bm25", qid)]["retrieval"]["context_tokens"] > 0
    summaries = {s["method"]: s for s in summarize(bench.rows())}
    assert summaries["bm25"]["evidence_recall"] == pytest.approx(2.5 / 3)
    assert "accuracy" not in summaries["bm25"]
    assert plot_metric_vs_tokens(list(summaries.values()), "evidence_recall", bench.out) is not None


# -- workspace preparation ----------------------------------------------------------------------


def test_prepare_workspace_indexes_an_empty_workspace_and_builds_what_methods_need(tmp_path: Path) -> None:
    """An empty workspace gets the benchmark's passages (one document each) and the artifacts of
    the methods; a second call indexes nothing and builds nothing."""
    dataset = load_dataset(write_dataset(tmp_path / "data"))
    ws = Workspace.init(tmp_path / "ws")
    try:
        settings = make_settings(ws.root, graph__extractor="llm", graph__gleaning=0)
        stack = fake_stack(settings, ws)
        warnings: list[str] = []
        methods = specs("bm25", "fastgraphrag")
        info = prepare_workspace(ws, settings, stack, dataset, methods, Progress(), warnings.append)
        assert warnings == []
        assert info["indexed"]["documents_added"] == len(PASSAGES)
        assert ws.corpus.counts()["documents"] == ws.corpus.counts()["chunks"] == len(PASSAGES)
        assert {c.title for c in ws.corpus.iter_chunks()} == set(TEXT)
        assert {"graph", "entity_vectors"} <= set(info["built"])
        for name in ("chunk_bm25", "graph", "entity_vectors"):
            assert ws.manifest.entry(name) is not None, name
        again = prepare_workspace(ws, settings, stack, dataset, methods, Progress(), warnings.append)
        assert "indexed" not in again and again["built"] == [] and warnings == []

        # an entity-based method's recall comes from its entities' and relationships' chunks
        plan = EvalPlan(dataset, specs("fastgraphrag"), tmp_path / "out")
        assert answer_all(ws, settings, stack, plan, Progress(), warnings.append).done == 3
        for row in read_rows(tmp_path / "out" / ANSWERS_FILE)[0]:
            assert row["error"] is None and 0.0 <= row["retrieval"]["evidence_recall"] <= 1.0
            assert row["retrieval"]["passages"] >= 1
    finally:
        ws.close()


def test_prepare_workspace_warns_when_gold_passages_are_missing(tmp_path: Path) -> None:
    """A workspace indexed from another corpus lacks the gold passages (by title for a generic
    dataset): recall would be meaningless, so a warning says so; nothing is re-indexed."""
    dataset = load_dataset(write_dataset(tmp_path / "data"))
    ws = Workspace.init(tmp_path / "ws")
    try:
        settings = make_settings(ws.root)
        stack = fake_stack(settings, ws)
        from unirag.pipeline import run_index

        run_index(ws, [small_corpus(tmp_path)], settings, stack)
        before = ws.corpus.counts()
        warnings: list[str] = []
        info = prepare_workspace(ws, settings, stack, dataset, specs("bm25"), Progress(), warnings.append)
        assert "indexed" not in info and ws.corpus.counts() == before
        # stored titles: Zanzibar, Quokka, Marie Curie, nile, paris, tokyo; gold: Paris, Quokka, Nile, Sahara
        # (compared normalised, as evidence recall compares them): only Sahara is missing
        assert len(warnings) == 1 and "1 of 4 gold evidence passages are not in" in warnings[0], warnings
    finally:
        ws.close()


def test_prepare_workspace_warns_on_missing_gold_passage_ids(tmp_path: Path) -> None:
    """HotpotQA-style questions carry gold passage ids: a workspace without them is warned about,
    one holding them is not."""
    record = {"_id": "h1", "question": "Which city is the capital of France?", "answer": "Paris",
              "supporting_facts": [["Paris", 0]],
              "context": [["Paris", [TEXT["Paris"]]], ["Tokyo", [TEXT["Tokyo"]]]]}
    path = tmp_path / "hotpot_dev.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    dataset = load_dataset(path, fmt="hotpotqa")
    assert dataset.questions[0].evidence_ids
    other = Workspace.init(tmp_path / "other")
    own = Workspace.init(tmp_path / "own")
    try:
        for ws, expected in ((other, 1), (own, 0)):
            settings = make_settings(ws.root)
            stack = fake_stack(settings, ws)
            from unirag.pipeline import run_index

            if ws is other:
                run_index(ws, [small_corpus(tmp_path)], settings, stack)
            else:
                run_index(ws, [], settings, stack, documents=dataset.documents())
            warnings: list[str] = []
            prepare_workspace(ws, settings, stack, dataset, specs("bm25"), Progress(), warnings.append)
            assert len(warnings) == expected, warnings
            if expected:
                assert "1 of 1 gold evidence passages" in warnings[0]
    finally:
        other.close()
        own.close()


# -- summaries and plots ------------------------------------------------------------------------


def hand_row(method: str, qid: str, accuracy: float | None, recall: float | None, retrieval: float,
             retrieval_llm: float, prompt: int = 100, error: str | None = None) -> dict[str, Any]:
    if error:
        return {"method": method, "question_id": qid, "question": "?", "kind": "short", "error": error}
    metrics = {} if accuracy is None else {"accuracy": accuracy, "f1": accuracy / 2}
    return {"method": method, "question_id": qid, "question": "?", "kind": "short", "answer": "a",
            "metrics": metrics,
            "retrieval": {"evidence_recall": recall, "answer_in_context": 1.0, "context_tokens": 50},
            "usage": {"llm_calls": 1, "cache_hits": 0, "prompt_tokens": prompt, "completion_tokens": 5},
            "seconds": {"retrieval": retrieval, "retrieval_llm": retrieval_llm, "generate": 0.5,
                        "total": retrieval + 0.5},
            "error": None}


HAND_ROWS = [
    hand_row("a", "q1", 1.0, 1.0, 0.3, 0.2, prompt=100),   # own retrieval 0.1
    hand_row("a", "q2", 0.0, 0.5, 0.2, 0.0, prompt=200),   # 0.2
    hand_row("a", "q3", 1.0, None, 0.5, 0.2, prompt=300),  # 0.3; no gold evidence: out of the recall mean
    hand_row("a", "q4", 0.0, 0.0, 0.4, 0.0, prompt=400),   # 0.4
    hand_row("a", "q5", None, None, 0.0, 0.0, error="LLMError: boom"),
    hand_row("b", "q1", 0.5, 1.0, 0.1, 0.3),               # chat time above retrieval: clamped to 0
    hand_row("b", "q2", None, 1.0, 0.2, 0.0),              # no answer metrics (retrieve-only row)
]


def test_percentiles_leave_out_each_methods_cold_query() -> None:
    """The first query of a method in a process also loads its indices: p50/p95 are over the
    warm ones, and the cold ones are averaged apart."""
    rows = [dict(row, cold=(i == 0)) for i, row in enumerate(r for r in HAND_ROWS if r["method"] == "a"
                                                              and not r.get("error"))]
    rows[0] = dict(rows[0], seconds=dict(rows[0]["seconds"], retrieval=5.0, retrieval_llm=0.0))
    (a,) = summarize(rows)
    warm = sorted(max(0.0, r["seconds"]["retrieval"] - r["seconds"]["retrieval_llm"]) for r in rows[1:])
    assert a["retrieval_cold_s"] == pytest.approx(5.0)
    assert a["retrieval_p50_s"] == pytest.approx(float(np.percentile(warm, 50)))
    assert a["retrieval_p95_s"] < 5.0


def test_summarize_means_errors_and_retrieval_seconds() -> None:
    """Means over the rows that have a value; errors counted apart; retrieval seconds are the
    operators' own (retrieval minus chat time, never negative) with p50 / p95."""
    a, b = summarize(HAND_ROWS)
    assert a["method"] == "a" and b["method"] == "b"
    assert (a["questions"], a["errors"], b["questions"], b["errors"]) == (4, 1, 2, 0)
    assert a["accuracy"] == pytest.approx(0.5) and a["f1"] == pytest.approx(0.25)
    assert a["evidence_recall"] == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3
    assert a["prompt_tokens"] == pytest.approx(250.0) and a["llm_calls"] == 1.0
    assert a["retrieval_s"] == pytest.approx(0.25)  # mean of 0.1, 0.2, 0.3, 0.4
    assert a["retrieval_p50_s"] == pytest.approx(0.25)
    assert a["retrieval_p95_s"] == pytest.approx(0.1 + 0.95 * 3 * 0.1)  # linear interpolation
    assert a["retrieval_llm_s"] == pytest.approx(0.1) and a["generate_s"] == pytest.approx(0.5)
    assert a["total_s"] == pytest.approx((0.3 + 0.2 + 0.5 + 0.4) / 4 + 0.5)
    assert b["retrieval_s"] == pytest.approx(0.1)  # (0 + 0.2) / 2
    assert b["accuracy"] == pytest.approx(0.5)  # the row without metrics does not count as 0
    only_errors = summarize([hand_row("c", "q1", None, None, 0, 0, error="x")])[0]
    assert only_errors["questions"] == 0 and only_errors["errors"] == 1
    assert only_errors["retrieval_s"] is None and only_errors["retrieval_p95_s"] is None


def test_write_tables_csv_and_markdown_share_columns(tmp_path: Path) -> None:
    """summary.csv and summary.md have the same columns in the same order, one line per method."""
    summaries = summarize(HAND_ROWS)
    csv_path, md_path = write_tables(summaries, tmp_path / "report", title="Hand-made")
    names = columns(summaries)
    assert names[:3] == ["method", "questions", "errors"] and names[3:5] == ["accuracy", "f1"]
    assert names[-len(TIME_COLUMNS):] == list(TIME_COLUMNS)
    with open(csv_path, newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    # the CSV adds each mean's n right after it
    assert [name for name in table[0] if not name.startswith("n_")] == names and len(table) == 3
    first = dict(zip(table[0], table[1]))
    assert first["accuracy"] == "0.5000" and first["n_accuracy"] == "4"
    assert first["prompt_tokens"] == "250.0" and "n_prompt_tokens" not in first
    lines = md_path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# Hand-made"
    start = next(i for i, line in enumerate(lines) if line.startswith("| method"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    assert header == names
    body = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[start + 2:]]

    def shown(line: list[str], name: str) -> str:
        """The CSV's value, with its n where the mean is not over every question."""
        cells = dict(zip(table[0], line))
        n = cells.get(f"n_{name}")
        return cells[name] if n in (None, cells["questions"]) else f"{cells[name] or '–'} (n={n})"

    assert body == [[shown(line, name) for name in names] for line in table[1:]]
    assert dict(zip(names, body[0]))["evidence_recall"] == "0.5000 (n=3)"  # q3 has no gold evidence


def test_plots_write_png_files(tmp_path: Path) -> None:
    """The cost/quality scatter and the win-rate heat map (NaN cells included) are PNG files."""
    summaries = summarize(HAND_ROWS)
    path = plot_metric_vs_tokens(summaries, "accuracy", tmp_path)
    assert path == tmp_path / "accuracy_vs_tokens.png" and path.read_bytes()[:8] == PNG_MAGIC
    assert plot_metric_vs_tokens(summaries, "no_such_metric", tmp_path) is None
    matrix = np.array([[np.nan, 0.75, np.nan], [0.25, np.nan, 1.0], [np.nan, 0.0, np.nan]])
    heat = plot_win_rates(["a", "b", "c"], matrix, "overall", tmp_path)
    assert heat == tmp_path / "winrate_overall.png" and heat.read_bytes()[:8] == PNG_MAGIC
    empty = plot_win_rates(["a", "b"], np.full((2, 2), np.nan), "diversity", tmp_path)
    assert empty.read_bytes()[:8] == PNG_MAGIC


def test_write_report_adds_judge_columns_and_plots(tmp_path: Path) -> None:
    """Extra per-method columns (the judge's) land in the tables and get their own plot."""
    report = write_report(HAND_ROWS, tmp_path, "t", {"a": {"win_overall": 0.75}, "b": {"win_overall": 0.25}})
    files = {Path(f).name for f in report["files"]}
    assert {"summary.csv", "summary.md", "accuracy_vs_tokens.png", "win_overall_vs_tokens.png",
            "evidence_recall_vs_tokens.png"} <= files
    assert all(Path(f).is_file() for f in report["files"])
    assert [s["win_overall"] for s in report["summaries"]] == [0.75, 0.25]
    assert "win_overall" in (tmp_path / "summary.csv").read_text(encoding="utf-8").splitlines()[0]


# -- the LLM judge ------------------------------------------------------------------------------

_PAIR = re.compile(r"Answer 1:\n(.*?)\n\nAnswer 2:\n(.*?)\n\nCompare", re.DOTALL)
_SCORED = re.compile(r"Answer:\n(.*?)\n\nGrade", re.DOTALL)
_CLAIMED = re.compile(r"Text:\n(.*?)\n\nList every", re.DOTALL)
ALL_CRITERIA = ("comprehensiveness", "diversity", "empowerment", "directness", "overall")


def sentences(text: str) -> list[str]:
    return [s.strip() + "." for s in text.split(".") if s.strip()]


class LengthJudge:
    """A judge that likes length: pairwise it prefers the answer with more sentences (equal: tie),
    absolute it gives 3 points per sentence, and every sentence is one claim."""

    name = "length-judge"

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        user = request.messages[-1]["content"]
        prompt = request.prompt_version.split("@")[0]
        if prompt == "eval_pairwise":
            first, second = (len(sentences(a)) for a in _PAIR.search(user).groups())
            winner = "1" if first > second else "2" if second > first else "tie"
            return ChatResponse(text=json.dumps({c: {"winner": winner, "reason": "length"} for c in ALL_CRITERIA}))
        if prompt == "eval_absolute":
            score = 3 * len(sentences(_SCORED.search(user).group(1)))
            return ChatResponse(text=json.dumps({c: {"score": score, "reason": "length"} for c in ALL_CRITERIA
                                                 if c != "directness"}))
        if prompt == "eval_claims":
            return ChatResponse(text=json.dumps({"claims": sentences(_CLAIMED.search(user).group(1))}))
        raise AssertionError(f"unexpected prompt {prompt}")


ANSWERS = {
    "long": "Rivers flood every spring. Whales are mammals. Copper conducts electricity well.",
    "mid": "Mount Everest lies in Asia. Bees make honey from nectar.",
    "short": "Owls hunt at night.",
}


def judged_rows() -> list[dict[str, Any]]:
    rows = [{"method": m, "question_id": q, "question": f"What do we know about topic {q}?", "answer": a,
             "error": None} for q in ("q1", "q2") for m, a in ANSWERS.items()]
    rows.append({"method": "broken", "question_id": "q1", "question": "?", "error": "LLMError: boom"})
    rows.append({"method": "blank", "question_id": "q1", "question": "?", "answer": "  ", "error": None})
    return rows


def test_pairwise_judge_win_rates_heat_maps_and_resume(tmp_path: Path) -> None:
    """A length-loving judge: longer beats shorter in every criterion, both orders; error and
    blank rows are not judged; a second ask adds nothing and asks nothing."""
    judge = LengthJudge()
    args: dict[str, Any] = {"modes": ["pairwise"], "out": tmp_path, "replicates": 1, "concurrency": 2,
                            "progress": Progress(), "context_window": 8192}
    added = ask_judge(judge, judged_rows(), **args)
    # 3 method pairs x 2 questions x 2 orders = 12 requests, one record per criterion
    assert len(judge.requests) == 12 and added == 12 * len(ALL_CRITERIA)
    assert ask_judge(judge, judged_rows(), **args) == 0 and len(judge.requests) == 12

    methods = ["long", "mid", "short", "broken", "blank"]
    result = judge_report(tmp_path, methods)
    assert result["unreadable_lines"] == 0 and result["position_bias"] == 0.5
    assert set(result["win_rates"]) == set(ALL_CRITERIA)
    overall = result["win_rates"]["overall"]
    assert overall["methods"] == ["long", "mid", "short"]
    assert overall["matrix"] == [[None, 1.0, 1.0], [0.0, None, 1.0], [0.0, 0.0, None]]
    assert overall["judgements"] == [[0, 4, 4], [4, 0, 4], [4, 4, 0]]
    assert result["unparsed"] == {c: 0 for c in ALL_CRITERIA}
    assert result["columns"] == {
        "long": {f"win_{c}": 1.0 for c in ALL_CRITERIA},
        "mid": {f"win_{c}": 0.5 for c in ALL_CRITERIA},
        "short": {f"win_{c}": 0.0 for c in ALL_CRITERIA},
    }
    assert {Path(f).name for f in result["files"]} == {f"winrate_{c}.png" for c in ALL_CRITERIA}
    assert all(Path(f).read_bytes()[:8] == PNG_MAGIC for f in result["files"])
    # a report over a subset of the methods only uses their verdicts
    two = judge_report(tmp_path, ["mid", "short"])
    assert two["win_rates"]["overall"]["matrix"] == [[None, 1.0], [0.0, None]]
    assert two["columns"] == {"mid": {f"win_{c}": 1.0 for c in ALL_CRITERIA},
                              "short": {f"win_{c}": 0.0 for c in ALL_CRITERIA}}


def test_absolute_and_claims_judging_give_score_and_claim_columns(tmp_path: Path) -> None:
    """Absolute scores average per method and criterion; claims count per answer; a cut last
    line of judge.jsonl is re-asked, not lost."""
    judge = LengthJudge()
    args: dict[str, Any] = {"out": tmp_path, "replicates": 1, "concurrency": 2, "progress": Progress(),
                            "context_window": 8192}
    added = ask_judge(judge, judged_rows(), modes=["absolute", "claims"], **args)
    assert len(judge.requests) == 6 + 6  # one score and one claim request per answered row
    assert added == 6 * 4 + 6  # 4 absolute criteria per answer, one claim record per answer
    result = judge_report(tmp_path, ["long", "mid", "short"])
    assert "win_rates" not in result
    assert result["scores"]["long"]["overall"] == 9.0 and result["scores"]["short"]["comprehensiveness"] == 3.0
    assert result["claims"]["mid"]["comprehensiveness"] == 2.0 and result["claims"]["mid"]["answers"] == 2
    for method, n in (("long", 3), ("mid", 2), ("short", 1)):
        columns_ = result["columns"][method]
        assert columns_["score_overall"] == 3.0 * n
        assert set(columns_) == {"score_comprehensiveness", "score_diversity", "score_empowerment",
                                 "score_overall", "claims", "claim_clusters"}
        assert columns_["claims"] == float(n)
        assert 0 < columns_["claim_clusters"] <= n

    path = tmp_path / JUDGE_FILE
    text = path.read_text(encoding="utf-8")
    last_start = text.rstrip("\n").rfind("\n") + 1
    path.write_text(text[: last_start + 25], encoding="utf-8")  # the last claim record, cut by a kill
    assert ask_judge(judge, judged_rows(), modes=["absolute", "claims"], **args) == 1
    assert len(judge.requests) == 13
    records, bad = read_records(path)
    assert len(records) == added and bad == 1  # the re-asked record is readable, not glued to the cut line
    assert ask_judge(judge, judged_rows(), modes=["absolute", "claims"], **args) == 0
    again = judge_report(tmp_path, ["long", "mid", "short"])
    assert again["unreadable_lines"] == 1 and again["columns"] == result["columns"]

    with pytest.raises(ConfigError, match="unknown judge mode nope"):
        ask_judge(judge, judged_rows(), modes=["nope"], **args)


# -- command line -------------------------------------------------------------------------------

runner = CliRunner()


def question_answers() -> dict[str, Callable[[str], str]]:
    """Scripted replies to the three question-generation prompts: as many items as asked, each
    naming the user and task it was asked for (duplicates would be dropped)."""

    def items(kind: str, pattern: str) -> Callable[[str], str]:
        def reply(user: str) -> str:
            count = int(re.search(pattern, user).group(1))
            context = "|".join(re.findall(r"^(?:User|Task): (.*)$", user, re.MULTILINE))
            return json.dumps({kind: [f"{kind[:-1]} {n + 1} of [{context}]" for n in range(count)]})

        return reply

    return {"eval_users": items("users", r"Describe (\d+) different people"),
            "eval_tasks": items("tasks", r"List (\d+) different tasks"),
            "eval_questions": items("questions", r"Write (\d+) different questions")}


@pytest.fixture
def cli_fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """The CLI's stacks use ScriptedChat + HashEmbedder; the judge's stack a LengthJudge."""
    made: dict[str, list[Any]] = {"chats": [], "judges": []}
    real_build_stack = factory.build_stack

    def stack(settings: Any, ws: Any) -> Any:
        chat = ScriptedChat(answers=question_answers())
        made["chats"].append(chat)
        return real_build_stack(settings, ws.cache(), chat=chat, embedder=HashEmbedder())

    def judge_stack(settings: Any, cache: Any, chat: Any = None, embedder: Any = None) -> Any:
        judge = LengthJudge()
        made["judges"].append(judge)
        return real_build_stack(settings, cache, chat=judge, embedder=HashEmbedder())

    monkeypatch.setattr(cli, "_stack", stack)
    monkeypatch.setattr(eval_run, "build_stack", judge_stack)  # where the judge builds its stack
    return made


def invoke(*args: str | Path) -> Result:
    return runner.invoke(cli.app, [str(a) for a in args])


def ok(*args: str | Path) -> Result:
    result = invoke(*args)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def one_line_error(result: Result, needle: str) -> None:
    assert result.exit_code != 0
    assert "Traceback" not in result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if not line.startswith("unirag: warning:")]
    assert len(lines) == 1 and lines[0].startswith("unirag: error:") and needle in lines[0], result.stderr


def test_cli_eval_writes_answers_tables_and_plots_and_resumes(tmp_path: Path, cli_fakes: dict[str, Any]) -> None:
    """``unirag eval --json`` indexes an empty workspace, answers, and writes the report files;
    run again it answers nothing and keeps every row."""
    data, ws, out = write_dataset(tmp_path / "data"), tmp_path / "ws", tmp_path / "out"
    args = ("eval", "-d", data, "-w", ws, "-o", out, "--methods", "vanilla,bm25", "--limit", "2", "--json")
    result = json.loads(ok(*args).stdout)
    assert (result["dataset"], result["questions"], result["methods"]) == ("data", 2, ["vanilla", "bm25"])
    assert (result["answered"], result["kept"], result["failed"]) == (4, 0, 0)
    assert result["judge"] == {}
    for name in (ANSWERS_FILE, "summary.md", "summary.csv"):
        assert (out / name).is_file(), name
    pngs = sorted(out.glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == PNG_MAGIC for p in pngs)
    assert {str(p) for p in pngs} <= set(result["files"])
    rows = read_rows(out / ANSWERS_FILE)[0]
    assert sorted((r["method"], r["question_id"]) for r in rows) == [
        ("bm25", "q1"), ("bm25", "q2"), ("vanilla", "q1"), ("vanilla", "q2")]
    bm25 = next(s for s in result["summary"] if s["method"] == "bm25")
    assert bm25["questions"] == 2 and bm25["accuracy"] == 0.5 and bm25["evidence_recall"] == 1.0
    with _open(ws) as opened:
        assert opened.corpus.counts()["documents"] == len(PASSAGES)

    again = json.loads(ok(*args).stdout)
    assert (again["answered"], again["kept"]) == (0, 4)
    assert len(read_rows(out / ANSWERS_FILE)[0]) == 4
    human = ok(*args[:-1], "-q")
    assert "| method |" in human.stdout and "0 answered, 4 kept from before, 0 failed" in human.stdout


def test_a_resumed_eval_with_other_methods_keeps_every_method_in_the_summaries(
    tmp_path: Path, cli_fakes: dict[str, Any],
) -> None:
    """Run vanilla, then resume the same OUT with bm25 only: summary.csv, summary.md and
    budget_summary.csv are of every row of answers.jsonl, so both methods stay."""
    data, ws, out = write_dataset(tmp_path / "data"), tmp_path / "ws", tmp_path / "out"
    common = ("eval", "-d", data, "-w", ws, "-o", out, "--retrieve-only", "--budget", "50,5000", "-q")
    ok(*common, "--methods", "vanilla")
    ok(*common, "--methods", "bm25")
    with open(out / "summary.csv", encoding="utf-8") as handle:
        assert [line["method"] for line in csv.DictReader(handle)] == ["vanilla", "bm25"]
    with open(out / "budget_summary.csv", encoding="utf-8") as handle:
        assert {line["method"] for line in csv.DictReader(handle)} == {"vanilla", "bm25"}
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| vanilla |" in summary and "| bm25 |" in summary
    assert summary.startswith("# data: 3 questions, 2 methods")


def test_compare_to_in_eval_and_in_eval_report(tmp_path: Path, cli_fakes: dict[str, Any]) -> None:
    """``--compare-to`` writes comparison.csv and a summary section; ``unirag eval-report`` redoes
    the report of an existing OUT without a workspace; a baseline never answered is one line."""
    data, ws, out = write_dataset(tmp_path / "data"), tmp_path / "ws", tmp_path / "out"
    common = ("eval", "-d", data, "-w", ws, "-o", out, "--retrieve-only", "--budget", "50", "-q")
    one_line_error(invoke(*common, "--methods", "bm25", "--compare-to", "vanilla"), "--compare-to vanilla")
    assert not (out / ANSWERS_FILE).exists()  # refused before any answering
    result = json.loads(ok(*common[:-1], "--methods", "vanilla,bm25", "--compare-to", "vanilla", "--json").stdout)
    assert str(out / "comparison.csv") in result["files"]
    bm25 = [c for c in result["comparisons"] if c["method"] == "bm25"]
    assert {(c["budget"], c["metric"]) for c in bm25} >= {("full", "grounded_recall"), ("50", "evidence_recall")}
    assert all(c["n"] == 3 for c in bm25)  # every question has every figure for both methods
    (out / "comparison.csv").unlink()
    report = ok("eval-report", out, "--compare-to", "vanilla")
    assert "## Compared to vanilla" in report.stdout and (out / "comparison.csv").is_file()
    one_line_error(invoke("eval-report", out, "--compare-to", "hipporag"), "no answers of that method")
    one_line_error(invoke("eval-report", tmp_path / "nothing"), "no answers")


class _open:
    """``with _open(path) as ws``: a workspace closed afterwards."""

    def __init__(self, root: Path) -> None:
        self.ws = Workspace.open(root)

    def __enter__(self) -> Workspace:
        return self.ws

    def __exit__(self, *exc: object) -> None:
        self.ws.close()


def test_cli_eval_with_pairwise_judge(tmp_path: Path, cli_fakes: dict[str, Any]) -> None:
    """``--judge pairwise`` judges the answered rows and adds win-rate columns and heat maps."""
    data, ws, out = write_dataset(tmp_path / "data"), tmp_path / "ws", tmp_path / "out"
    result = json.loads(ok("eval", "-d", data, "-w", ws, "-o", out, "--methods", "bm25,zeroshot",
                           "--judge", "pairwise", "--json").stdout)
    assert cli_fakes["judges"] and len(cli_fakes["judges"][-1].requests) == 3 * 2  # 3 questions x 2 orders
    assert (out / JUDGE_FILE).is_file() and (out / "winrate_overall.png").read_bytes()[:8] == PNG_MAGIC
    # the scripted answers are one "sentence" each: every verdict is a tie
    assert result["judge"]["win_rates"]["overall"]["matrix"] == [[None, 0.5], [0.5, None]]
    header = (out / "summary.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert "win_overall" in header
    assert {s["method"]: s["win_overall"] for s in result["summary"]} == {"bm25": 0.5, "zeroshot": 0.5}


def test_cli_eval_refuses_bad_judge_options(tmp_path: Path, cli_fakes: dict[str, Any]) -> None:
    """An unknown judge mode and a judge without answers are one-line errors, before any work."""
    data, ws, out = write_dataset(tmp_path / "data"), tmp_path / "ws", tmp_path / "out"
    base = ("eval", "-d", data, "-w", ws, "-o", out, "--methods", "bm25")
    one_line_error(invoke(*base, "--judge", "nope"), "nope")
    one_line_error(invoke(*base, "--judge", "pairwise", "--retrieve-only"), "--retrieve-only")
    one_line_error(invoke(*base, "--replicates", "0"), "--replicates")
    assert not (out / ANSWERS_FILE).exists()
    assert cli_fakes["chats"] == []  # nothing was answered or indexed


def test_cli_eval_retrieve_only(tmp_path: Path, cli_fakes: dict[str, Any]) -> None:
    """``--retrieve-only`` asks no model and still reports retrieval figures."""
    data, ws, out = write_dataset(tmp_path / "data"), tmp_path / "ws", tmp_path / "out"
    result = json.loads(ok("eval", "-d", data, "-w", ws, "-o", out, "--methods", "bm25", "--retrieve-only",
                           "--json").stdout)
    assert result["answered"] == 3
    assert all(chat.calls == 0 for chat in cli_fakes["chats"])
    [summary] = result["summary"]
    assert summary["evidence_recall"] == pytest.approx(2.5 / 3) and "accuracy" not in summary
    assert (out / "evidence_recall_vs_tokens.png").read_bytes()[:8] == PNG_MAGIC


def test_cli_questions_writes_a_dataset_eval_can_read(tmp_path: Path, cli_fakes: dict[str, Any]) -> None:
    """``unirag questions`` writes K x N x M abstract questions and the corpus asked about, which
    load_dataset reads back as a generic dataset."""
    ws = tmp_path / "ws"
    ok("index", write_dataset(tmp_path / "data") / "Corpus.jsonl", "-w", ws, "-q")
    out = tmp_path / "abstract"
    result = ok("questions", "-w", ws, "-o", out, "-K", "2", "-N", "1", "-M", "2", "-q")
    assert "4 of 4 questions (2 users)" in result.stdout
    lines = [json.loads(line) for line in (out / "Question.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 4 and {line["kind"] for line in lines} == {"abstract"}
    assert len({line["id"] for line in lines}) == 4 and all(line["user"] and line["task"] for line in lines)
    dataset = load_dataset(out)
    assert dataset.fmt == "generic" and len(dataset.questions) == 4
    assert all(q.kind == "abstract" and q.answers == [] for q in dataset.questions)
    assert sorted(d.title for d in dataset.documents()) == sorted(TEXT)
    assert {d.text for d in dataset.documents()} == set(TEXT.values())


def test_cli_questions_on_an_empty_workspace_is_an_error(tmp_path: Path, cli_fakes: dict[str, Any]) -> None:
    """No corpus, no questions: one line saying to index first."""
    ok("init", tmp_path / "ws")
    one_line_error(invoke("questions", "-w", tmp_path / "ws", "-o", tmp_path / "out"), "index documents first")


def test_budgets_score_each_row_at_every_budget(bench: Bench) -> None:
    """A budget as large as the context gives the whole context's figures; a tiny one an empty context."""
    bench.answer(specs("vanilla"), generate=False, budgets=[1, 100_000])
    for row in bench.rows():
        assert set(row["budgets"]) == {"1", "100000"}
        whole, tiny = row["budgets"]["100000"], row["budgets"]["1"]
        assert whole["context_tokens"] == row["retrieval"]["context_tokens"]
        assert whole["evidence_recall"] == row["retrieval"]["evidence_recall"]
        assert tiny["items"] == 0 and tiny["evidence_recall"] == 0.0 and tiny["grounded_recall"] == 0.0
        assert tiny["evidence_recall_with_passage"] is None
        assert row["retrieval"]["recall_at"] == {}  # these questions name gold titles, not passage ids
