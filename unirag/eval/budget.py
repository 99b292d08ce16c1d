"""Budget-matched retrieval figures: every method's context cut to the same token budgets.

Methods return contexts of very different sizes (VanillaRAG's four passages, ~600
tokens; LeanRAG's ~10,000), so comparing their evidence recall as they come mostly
compares how much they read. ``unirag eval --budget 500,1000,2000`` therefore also
scores each context cut to each budget, **in the method's own order**: the order of
``QueryResult.context``, which is the order the spec's operators emit items (operator
after operator; within an operator best first, as each operator ranks: similarity for
the VDB operators, PPR mass for HippoRAG's and LinearRAG's passages, rating or layer
for communities, ...). Items are taken whole while they fit; the first item that does
not fit ends the context, so a budget never credits a passage whose text it cut, and
a method that puts a large item first pays for it.

Passage recall at k (HippoRAG's Recall@2/@5) is the share of gold passages among the
first k distinct passages of the context's chunk items, for methods that rank passages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from unirag.eval.datasets import Question
from unirag.eval.metrics import answer_in_context, context_tokens, evidence_recall, grounded_recall
from unirag.operators.context import ContextItem

RECALL_AT = (2, 5)
PASSAGE_KINDS = ("chunk", "entity", "relationship")  # items that lead back to passages


class Passages(Protocol):
    """Maps context items to the passages (document ids, titles) they came from."""

    def passages(self, items: list[Any]) -> tuple[set[str], set[str]]: ...

    def ranked_documents(self, chunk_ids: list[str]) -> list[str]: ...


def parse_budgets(text: str | None) -> list[int]:
    """``"500,1000,2000"`` -> [500, 1000, 2000] (sorted, unique); a value that is no
    positive integer is a ``ValueError`` naming it."""
    budgets: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip().replace("_", "")
        if not part:
            continue
        if not part.isdigit() or int(part) <= 0:
            raise ValueError(f"a budget is a positive number of tokens, not {part!r}")
        budgets.add(int(part))
    return sorted(budgets)


def within_budget(items: Sequence[ContextItem], budget: int, count_tokens: Callable[[str], int]) -> list[ContextItem]:
    """The longest prefix of ``items`` whose texts, joined by newlines, fit ``budget`` tokens."""
    kept: list[ContextItem] = []
    used = 0
    for item in items:
        cost = count_tokens(item.text) + (1 if kept else 0)  # the newline joining it to the previous one
        if used + cost > budget:
            break
        kept.append(item)
        used += cost
    return kept


def retrieval_figures(
    items: Sequence[ContextItem], question: Question, passages: Passages, count_tokens: Callable[[str], int],
) -> dict[str, Any]:
    """Recalls, answer in context and size of one context (the whole one or a budget's prefix).

    * ``grounded_recall``: gold passages whose own text is in the context text
      (:func:`~unirag.eval.metrics.grounded_recall`), the headline;
    * ``evidence_recall``: gold passages among the provenance of the items; a context
      with no item that leads back to a passage (none at all, or only community reports,
      summaries, paths) found no gold passage, so it scores 0 like any other miss;
    * ``evidence_recall_with_passage``: the same, None for such a context, so its mean
      is over the questions whose context has a passage (a conditional figure: the
      method's n says how many).

    Each is None for a question without the gold data it needs (then it is left out of
    that mean, and its n says so).
    """
    text = "\n".join(item.text for item in items)
    doc_ids, titles = passages.passages(list(items))
    recall = (evidence_recall(sorted(doc_ids), question.evidence_ids) if question.evidence_ids
              else evidence_recall(sorted(titles), question.evidence))
    has_passage = any(item.kind in PASSAGE_KINDS for item in items)
    return {
        "grounded_recall": grounded_recall(text, question.evidence_texts),
        "evidence_recall": recall,
        "evidence_recall_with_passage": recall if has_passage else None,
        "answer_in_context": answer_in_context(text, question.answers) if question.answers else None,
        "context_tokens": context_tokens(text, count_tokens),
        "items": len(items), "passages": len(doc_ids),
    }


def recall_at(items: Sequence[ContextItem], question: Question, passages: Passages,
              ks: Sequence[int] = RECALL_AT) -> dict[str, float | None]:
    """Recall@k over the ranked passages of the chunk items (first occurrence counts);
    {} for a context without chunk items or a question without gold passage ids."""
    chunk_ids = [item.id for item in items if item.kind == "chunk"]
    if not chunk_ids or not question.evidence_ids:
        return {}
    ranked = passages.ranked_documents(chunk_ids)
    return {str(k): evidence_recall(ranked[:k], question.evidence_ids) for k in ks}


def budget_figures(
    items: Sequence[ContextItem], question: Question, passages: Passages, count_tokens: Callable[[str], int],
    budgets: Sequence[int],
) -> dict[str, dict[str, Any]]:
    """Per budget (as a string key, for JSON rows), the figures of the context cut to it."""
    return {str(budget): retrieval_figures(within_budget(items, budget, count_tokens), question, passages,
                                           count_tokens)
            for budget in budgets}
