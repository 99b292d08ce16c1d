"""Budget-matched figures (unirag eval --budget) and the per-question-type split, on hand-made items and rows."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from unirag.eval.budget import budget_figures, parse_budgets, recall_at, within_budget
from unirag.eval.budget_report import budget_markdown, budget_summaries
from unirag.eval.datasets import Question, question_type
from unirag.eval.report import summarize, write_report
from unirag.operators.context import ContextItem


def words(text: str) -> int:
    """A tokenizer for hand counting: one token per word."""
    return len(text.split())


def chunk(cid: str, text: str) -> ContextItem:
    return ContextItem("chunk", cid, text, 1.0, cid)


class FakePassages:
    """Chunk c<N> is passage d<N>; entities bring the chunks of their provenance."""

    def passages(self, items: list[Any]) -> tuple[set[str], set[str]]:
        chunk_ids = {i.id for i in items if i.kind == "chunk"}
        for item in items:
            if item.kind in ("entity", "relationship"):
                chunk_ids.update(item.provenance.get("chunk_ids", ()))
        docs = {f"d{c[1:]}" for c in chunk_ids}
        return docs, {f"title {d}" for d in docs}

    def ranked_documents(self, chunk_ids: list[str]) -> list[str]:
        return list(dict.fromkeys(f"d{c[1:]}" for c in chunk_ids))


QUESTION = Question(id="q", question="?", answers=["Paris"], evidence_ids=["d2", "d3"])


def test_parse_budgets() -> None:
    assert parse_budgets("2000, 500,1000,500") == [500, 1000, 2000]
    assert parse_budgets("1_000") == [1000]
    assert parse_budgets(None) == []
    with pytest.raises(ValueError, match="'0'"):
        parse_budgets("500,0")
    with pytest.raises(ValueError, match="'many'"):
        parse_budgets("many")


def test_within_budget_keeps_whole_items_in_order_and_stops_at_the_first_misfit() -> None:
    items = [chunk("c1", "one two three"), chunk("c2", "four five six seven"), chunk("c3", "eight")]
    assert within_budget(items, 3, words) == items[:1]
    assert within_budget(items, 7, words) == items[:1]  # 3 + 1 newline + 4 = 8 > 7
    assert within_budget(items, 8, words) == items[:2]
    # c3 would fit after c2 is refused, but the method ranked c2 first: nothing after a misfit.
    assert within_budget([items[0], chunk("big", "w " * 50), items[2]], 10, words) == items[:1]
    assert within_budget(items, 2, words) == []


def test_budget_figures_per_budget() -> None:
    items = [chunk("c1", "Berlin is big"), chunk("c2", "Paris is the capital"), chunk("c3", "Lyon too")]
    figures = budget_figures(items, QUESTION, FakePassages(), words, [3, 9, 100])
    assert figures["3"] == {"grounded_recall": None, "evidence_recall": 0.0, "evidence_recall_with_passage": 0.0,
                            "answer_in_context": 0.0, "context_tokens": 3, "items": 1, "passages": 1}
    assert figures["9"]["evidence_recall"] == 0.5 and figures["9"]["answer_in_context"] == 1.0
    assert figures["100"]["evidence_recall"] == 1.0 and figures["100"]["items"] == 3
    empty = budget_figures([], QUESTION, FakePassages(), words, [10])["10"]
    # an empty context found no gold passage: 0 in the headline, left out of the conditional mean
    assert empty["evidence_recall"] == 0.0 and empty["evidence_recall_with_passage"] is None


def test_entities_bring_their_passages_within_a_budget() -> None:
    entity = ContextItem("entity", "e", "Paris: a city", 1.0, "Paris", {"chunk_ids": ["c2", "c3"]})
    assert budget_figures([entity], QUESTION, FakePassages(), words, [5])["5"]["evidence_recall"] == 1.0
    community = ContextItem("community", "k", "a report", 1.0, "level 0")
    figures = budget_figures([community], QUESTION, FakePassages(), words, [5])["5"]
    assert figures["evidence_recall"] == 0.0 and figures["evidence_recall_with_passage"] is None


GOLD_TEXTS = ["Paris is the capital and largest city of France. It lies on the Seine river in the north.",
              "Lyon is the third largest city of France. It sits where the Rhone meets the Saone."]
GROUNDED_QUESTION = Question(id="g", question="?", answers=["Paris"], evidence_ids=["d2", "d3"],
                             evidence_texts=GOLD_TEXTS)


def test_grounded_recall_needs_the_passage_text_not_only_its_provenance() -> None:
    """An entity that came from both gold passages earns full evidence recall but no grounded
    recall: its text is a name and a description; the quoted chunk grounds its passage."""
    entity = ContextItem("entity", "e", "Paris: capital of France", 1.0, "Paris", {"chunk_ids": ["c2", "c3"]})
    quoted = chunk("c2", GOLD_TEXTS[0])
    figures = budget_figures([entity, quoted], GROUNDED_QUESTION, FakePassages(), words, [5, 100])
    assert figures["5"]["evidence_recall"] == 1.0 and figures["5"]["grounded_recall"] == 0.0
    assert figures["100"]["evidence_recall"] == 1.0 and figures["100"]["grounded_recall"] == 0.5


def test_recall_at_k_ranks_distinct_passages_of_chunk_items() -> None:
    items = [chunk("c1", "a"), chunk("c1", "a again"), chunk("c3", "b"), chunk("c2", "c")]
    assert recall_at(items, QUESTION, FakePassages(), (1, 2, 5)) == {"1": 0.0, "2": 0.5, "5": 1.0}
    entity = ContextItem("entity", "e", "x", 1.0, "x", {"chunk_ids": ["c2"]})
    assert recall_at([entity], QUESTION, FakePassages()) == {}


@pytest.mark.parametrize(("question", "expected"), [
    (Question(id="5a8b", question="?", meta={"type": "comparison"}), "comparison"),
    (Question(id="2hop__150763_14904", question="?"), "2hop"),
    (Question(id="4hop3__1_2_3_4", question="?"), "4hop"),
    (Question(id="x", question="?", meta={"question_decomposition": [{}, {}, {}]}), "3hop"),
    (Question(id="x", question="?"), None),  # no type in the data: none invented
])
def test_question_type(question: Question, expected: str | None) -> None:
    assert question_type(question) == expected


def row(method: str, qid: str, kind: str | None, budgets: dict[int, float], recall: float, at2: float | None,
        grounded: dict[int, float | None] | None = None) -> dict:
    return {
        "method": method, "question_id": qid, "question_type": kind, "error": None, "metrics": {},
        "retrieval": {"evidence_recall": recall, "answer_in_context": 1.0, "context_tokens": 3000,
                      "recall_at": {} if at2 is None else {"2": at2, "5": 1.0}},
        "budgets": {str(b): {"evidence_recall": r, "answer_in_context": r, "context_tokens": b - 10,
                             "grounded_recall": (grounded or {}).get(b, r),
                             "evidence_recall_with_passage": r if r else None}
                    for b, r in budgets.items()},
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "llm_calls": 0},
        "seconds": {"retrieval": 0.01, "retrieval_llm": 0.0, "generate": 0.0, "total": 0.01},
    }


ROWS = [
    row("vanilla", "q1", "bridge", {500: 0.5, 1000: 1.0}, 1.0, 0.5),
    row("vanilla", "q2", "comparison", {500: 0.0, 1000: 0.5}, 0.5, 0.0),
    row("graph", "q1", "bridge", {500: 1.0, 1000: 1.0}, 1.0, None),
    row("graph", "q2", "comparison", {500: 0.5, 1000: 1.0}, 1.0, None),
]


def test_budget_summaries_per_method_budget_and_type() -> None:
    summaries = {(s["method"], s["budget"], s["question_type"]): s for s in budget_summaries(ROWS)}
    assert summaries[("vanilla", 500, "all")]["evidence_recall"] == 0.25
    assert summaries[("vanilla", 1000, "comparison")]["evidence_recall"] == 0.5
    assert summaries[("graph", 500, "bridge")]["questions"] == 1
    assert summaries[("vanilla", 500, "all")]["recall@2"] == 0.25
    assert summaries[("graph", 500, "all")]["recall@2"] is None  # ranks no passages
    assert summaries[("graph", 1000, "all")]["context_tokens"] == 990
    assert summaries[("vanilla", 500, "all")]["n_evidence_recall"] == 2
    # vanilla's q2 context at 500 tokens holds no passage: 0 in the headline, out of the conditional mean
    assert summaries[("vanilla", 500, "all")]["evidence_recall_with_passage"] == 0.5
    assert summaries[("vanilla", 500, "all")]["n_evidence_recall_with_passage"] == 1
    markdown = budget_markdown(list(summaries.values()))
    assert "### Budget 500 tokens" in markdown and "### Budget 1,000 tokens" in markdown
    table_500 = markdown.split("### Budget 1,000")[0]
    assert table_500.index("| graph |") < table_500.index("| vanilla |")  # best recall first
    assert "grounded bridge" in markdown and "grounded comparison" in markdown
    vanilla_500 = next(line for line in table_500.splitlines() if line.startswith("| vanilla |"))
    assert "0.5000 (n=1)" in vanilla_500  # the conditional mean shows its n
    assert "recall \\| context has a passage" in markdown  # a pipe inside a header is escaped


def test_write_report_adds_budget_tables_type_columns_and_the_plot(tmp_path: Path) -> None:
    report = write_report(ROWS, tmp_path, "dev")
    names = {Path(f).name for f in report["files"]}
    assert {"summary.md", "summary.csv", "budget_summary.csv", "evidence_recall_vs_budget.png",
            "grounded_recall_vs_budget.png"} <= names
    with open(tmp_path / "budget_summary.csv", encoding="utf-8") as handle:
        lines = list(csv.DictReader(handle))
    assert len(lines) == 2 * 2 * 3  # methods x budgets x (all, bridge, comparison)
    assert {"n_grounded_recall", "n_evidence_recall", "n_evidence_recall_with_passage", "n_answer_in_context",
            "n_recall@2"} <= set(lines[0])
    vanilla_500 = next(line for line in lines if line["method"] == "vanilla" and line["budget"] == "500"
                       and line["question_type"] == "all")
    assert vanilla_500["n_evidence_recall"] == "2" and vanilla_500["n_evidence_recall_with_passage"] == "1"
    assert "### Budget 1,000 tokens" in (tmp_path / "summary.md").read_text(encoding="utf-8")
    vanilla = summarize(ROWS)[0]
    assert vanilla["evidence_recall:bridge"] == 1.0 and vanilla["evidence_recall:comparison"] == 0.5
    header = (tmp_path / "summary.csv").read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header.index("evidence_recall:bridge") > header.index("context_tokens")
    assert header.index("n_evidence_recall") == header.index("evidence_recall") + 1


def test_untyped_rows_get_no_type_columns(tmp_path: Path) -> None:
    """Data without question types: no per-type figures anywhere, no invented type."""
    untyped = [{**r, "question_type": None} for r in ROWS]
    summaries = budget_summaries(untyped)
    assert {s["question_type"] for s in summaries} == {"all"}
    markdown = budget_markdown(summaries)
    assert "grounded bridge" not in markdown and "comparison" not in markdown
    assert not any(":" in key for key in summarize(untyped)[0])
    write_report(untyped, tmp_path)
    assert "bridge" not in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_rows_without_budgets_write_no_budget_files(tmp_path: Path) -> None:
    plain = [{**r, "budgets": {}} for r in ROWS]
    report = write_report(plain, tmp_path)
    assert not any("budget" in Path(f).name for f in report["files"])
