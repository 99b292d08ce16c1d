"""HyGRAG on the HotpotQA sample of tests/data without a chat model: readable extractive
summaries, and a budget-cut context that still holds passages."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from tests.dev_sets import SAMPLE_DATASETS
from tests.fakes import HashEmbedder, fake_stack, make_settings
from tests.graph_fixture import query_state
from unirag.artifacts.registry import BuildContext, ensure_artifacts
from unirag.errors import UniragError
from unirag.eval.budget import within_budget
from unirag.hierarchy.community_store import CommunityStore
from unirag.llm.base import UsageLedger
from unirag.operators.hierarchy import hygrag_retrieve
from unirag.pipeline import run_index
from unirag.progress import Progress
from unirag.text.sentences import extractive_summary
from unirag.text.tokenizer import get_tokenizer
from unirag.workspace import Workspace

HOTPOT = SAMPLE_DATASETS / "hotpotqa"
FILE_NAME = re.compile(r"\b\w+\.(?:html?|pdf|txt|md|docx?)\b", re.IGNORECASE)


def repeated_4gram_share(text: str) -> float:
    """Share of the text's word 4-grams that occur more than once in it."""
    words = re.findall(r"\w+", text.casefold())
    grams = Counter(tuple(words[i:i + 4]) for i in range(len(words) - 3))
    total = sum(grams.values())
    return sum(n for n in grams.values() if n > 1) / total if total else 0.0


def sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def test_extractive_summary_of_an_apollo_like_bucket() -> None:
    members = [
        "Apollo 11\nApollo 11 was the spaceflight that first landed humans on the Moon. Armstrong stepped out first.",
        "apollo.html",
        "Apollo 11: Apollo 11 was the spaceflight that first landed humans on the Moon.",
        "Moon: Apollo 11 was the spaceflight that first landed humans on the Moon.",
        "apollo.html Apollo 11 was the spaceflight that first landed humans on the Moon.",
        "Neil Armstrong: an American astronaut. He was the first person to walk on the Moon.",
    ]
    summary = extractive_summary(members, 200, get_tokenizer())
    assert summary == ("Apollo 11 was the spaceflight that first landed humans on the Moon. "
                       "Neil Armstrong: an American astronaut.")
    assert not summary.startswith("Apollo 11 Apollo 11") and "apollo.html" not in summary
    # Whole sentences only: the second one does not fit 16 tokens, so it is left out, not cut.
    assert extractive_summary(members, 16, get_tokenizer()) == members[2].split(": ", 1)[1]


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory):
    ws = Workspace.init(tmp_path_factory.mktemp("hygrag-sample") / "ws")
    settings = make_settings(ws.root, graph__extractor="nlp", index__summarizer="extractive")
    embedder = HashEmbedder()
    stack = fake_stack(settings, ws, embedder=embedder)
    try:
        run_index(ws, [HOTPOT / "hotpotqa_train_corpus.json"], settings, stack, graphs=["kg", "hybrid"])
        ensure_artifacts(BuildContext(ws, settings, stack.accounted(UsageLedger()), Progress()),
                         ["communities:hygrag", "community_vectors:hygrag", "relation_vectors", "chunk_vectors"])
    except UniragError as exc:  # no spaCy model
        pytest.skip(str(exc))
    yield ws, settings, embedder
    ws.close()


def test_offline_summaries_do_not_repeat_themselves(sample) -> None:
    ws = sample[0]
    summaries = [c.summary for c in CommunityStore(ws).load("hygrag")]
    assert len(summaries) >= 5
    for summary in summaries:
        said = [" ".join(re.findall(r"\w+", s.casefold())) for s in sentences(summary)]
        assert len(said) == len(set(said)), summary  # no sentence twice
        assert not FILE_NAME.search(summary), summary
    shares = [repeated_4gram_share(summary) for summary in summaries]
    assert sum(shares) / len(shares) <= 0.02 and max(shares) <= 0.2, shares


def test_budget_cut_context_holds_passages(sample) -> None:
    ws, settings, embedder = sample
    questions = json.loads((HOTPOT / "hotpotqa_train.json").read_text(encoding="utf-8"))
    tokenizer = get_tokenizer()
    for question in questions:
        state = query_state(ws, settings, question["question"], embedder)
        items = hygrag_retrieve(state, top_k=4)
        cut = within_budget(items, 1000, tokenizer.count)
        assert sum(item.kind == "community" for item in items) <= 1
        assert [item.kind for item in cut].count("chunk") >= 2, [(i.kind, len(i.text)) for i in items]
