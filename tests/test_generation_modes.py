"""The two-stage generation modes: GraphRAG map-reduce (Edge et al. 2024 §3.1.6) and ArchRAG adaptive filtering.

Most tests use a minimal query state (settings + a scripted chat, items made by
hand); the last ones run specs through the method runner on the hand-built graph.
"""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace
from typing import Any

import pytest

from tests.fakes import HashEmbedder, RecordingProgress, ScriptedChat, make_settings
from tests.graph_fixture import build_hand_graph
from unirag.errors import MethodError
from unirag.generate.adaptive_filter import (
    adaptive_filter,
    generate_adaptive_filter,
    group_items,
)
from unirag.generate.map_reduce import (
    NO_DATA_ANSWER,
    SEPARATOR,
    Point,
    fill_points,
    generate_map_reduce,
    item_block,
    map_reduce,
    pack_texts,
    point_block,
)
from unirag.llm.base import UsageLedger
from unirag.llm.factory import build_stack
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import MethodSpec
from unirag.operators.context import ContextItem, QueryState
from unirag.text.replies import read_points
from unirag.text.tokenizer import get_tokenizer
from unirag.prompts.prompt import PromptLibrary

TOK = get_tokenizer("cl100k_base")
_NUMBERS = re.compile(r"^\[(\d+)\] \(", re.MULTILINE)


def make_state(items: list[ContextItem], chat: ScriptedChat, question: str = "Who discovered radium?",
               **settings: Any) -> QueryState:
    """A query state with only what generation reads: settings, models, items."""
    config = make_settings(None, **settings)
    models = build_stack(config, None, chat=chat, embedder=HashEmbedder()).accounted(UsageLedger())
    state = QueryState(question=question, resources=SimpleNamespace(settings=config, prompts=PromptLibrary()), models=models)
    state.items = list(items)
    return state


def fact_items(n: int, words: int = 20) -> list[ContextItem]:
    return [ContextItem("community", f"c{i}", f"Fact {i}: " + " ".join(["radium"] * words), 1.0, f"report {i}",
                        {"level": 0}) for i in range(n)]


def numbers_in(user: str) -> list[int]:
    """The item numbers ([n]) shown in a map/filter prompt."""
    return [int(n) for n in _NUMBERS.findall(user)]


def points_reply(pairs: list[tuple[str, float]]) -> str:
    return json.dumps({"points": [{"description": d, "score": s} for d, s in pairs]})


def context_of(user: str, start: str, end: str) -> str:
    return user.split(start, 1)[1].split(end, 1)[0].strip()


def requests_of(chat: ScriptedChat, stage: str) -> list[Any]:
    return [r for r in chat.requests if r.stage == stage]


# -- packing -------------------------------------------------------------------------------------------


def test_pack_texts_fills_each_pack_exactly_to_the_budget() -> None:
    texts = [f"[{i}] (chunk: t)\n" + " ".join(["alpha beta"] * (5 + 3 * i)) for i in range(8)]
    counts = [TOK.count(t) for t in texts]
    budget = counts[0] + 1 + counts[1]  # the separator is one token: the first two fill a pack exactly
    packs = pack_texts(texts, budget, TOK)
    assert [i for i, _ in packs[0]] == [0, 1]
    assert TOK.count(SEPARATOR.join(t for _, t in packs[0])) == budget
    assert [i for pack in packs for i, _ in pack] == list(range(8))  # all, once, in order
    for number, pack in enumerate(packs):
        joined = SEPARATOR.join(t for _, t in pack)
        assert TOK.count(joined) <= budget
        if number + 1 < len(packs):  # greedy: the next text would not have fitted
            following = texts[packs[number + 1][0][0]]
            assert TOK.count(joined + SEPARATOR + following) > budget


def test_pack_texts_cuts_a_text_longer_than_the_budget_and_packs_it_alone() -> None:
    texts = ["short one", "word " * 500, "short two"]
    packs = pack_texts(texts, 50, TOK)
    assert [[i for i, _ in pack] for pack in packs] == [[0], [1], [2]]
    assert TOK.count(packs[1][0][1]) <= 50 and texts[1].startswith(packs[1][0][1])
    assert pack_texts([], 50, TOK) == []


def test_map_batches_are_shuffled_by_the_seed_and_respect_batch_tokens() -> None:
    items = fact_items(12)
    batch = 2 * TOK.count(item_block(0, items[0])) + 4  # about two items per batch
    chat = ScriptedChat(answers={"map_answer": lambda user: points_reply([("p", 10)])})
    trace = map_reduce(make_state(items, chat), batch_tokens=batch, seed=7)
    order = list(range(12))
    random.Random(7).shuffle(order)
    assert [p for pack in trace.packs for p in pack] == order
    maps = requests_of(chat, "query.map")
    assert len(maps) == len(trace.packs) > 1
    # The map calls run concurrently: match each request to its pack by content, not by call order
    # (Python 3.13 schedules the worker threads in another order).
    assert sorted(numbers_in(chat.user_message(r)) for r in maps) == sorted([p + 1 for p in pack]
                                                                            for pack in trace.packs)
    for request in maps:
        user = chat.user_message(request)
        context = context_of(user, "Data:\n", "\n\nUsing only")
        assert TOK.count(context) <= batch
        assert request.json_mode and request.prompt_version.startswith("map_answer@")
    again = map_reduce(make_state(items, ScriptedChat(answers=chat.answers)), batch_tokens=batch, seed=7)
    assert again.packs == trace.packs
    other = map_reduce(make_state(items, ScriptedChat(answers=chat.answers)), batch_tokens=batch, seed=8)
    assert other.packs != trace.packs
    unshuffled = map_reduce(make_state(items, ScriptedChat(answers=chat.answers)), batch_tokens=batch,
                            shuffle=False)
    assert [p for pack in unshuffled.packs for p in pack] == list(range(12))


def test_every_request_fits_the_context_window() -> None:
    items = fact_items(40, words=60)
    chat = ScriptedChat(answers={
        "map_answer": lambda user: points_reply([(" ".join(["finding"] * 80), 60)] * 5),
        "filter_points": lambda user: points_reply([(" ".join(["finding"] * 80), 60)] * 5),
    })
    window, reply = 600, 100
    state = make_state(items, chat, chat__context_window=window, chat__max_tokens=reply)
    map_reduce(state)
    adaptive_filter(state)
    assert {r.stage for r in chat.requests} == {"query.map", "query.reduce", "query.filter", "query.merge"}
    assert len(requests_of(chat, "query.map")) > 5
    # Packed to the window less the count margin: the model's tokenizer may count more than ours.
    usable = state.resources.settings.chat.prompt_window
    assert usable == int(window * 0.9)
    for request in chat.requests:
        prompt = sum(TOK.count(m["content"]) for m in request.messages)
        assert prompt + request.max_tokens <= usable - 32, request.stage
    # a token limit above what the window leaves is capped to it
    big = ScriptedChat(answers=chat.answers)
    capped = make_state(items, big, chat__context_window=window, chat__max_tokens=reply)
    map_reduce(capped, batch_tokens=100_000, reduce_tokens=100_000)
    adaptive_filter(capped, pack_tokens=100_000, merge_tokens=100_000)
    assert len(big.requests) == len(chat.requests)
    for request in big.requests:
        assert sum(TOK.count(m["content"]) for m in request.messages) + request.max_tokens <= usable - 32


def test_map_and_filter_calls_show_progress() -> None:
    """GGraphRAG's map step can be dozens of slow calls: the query shows a bar over them."""
    chat = ScriptedChat(answers={"map_answer": lambda user: points_reply([("p", 10)]),
                                 "filter_points": lambda user: points_reply([("p", 10)])})
    state = make_state(fact_items(12), chat)
    progress = state.progress = RecordingProgress()
    batch = 2 * TOK.count(item_block(0, fact_items(1)[0])) + 4
    trace = map_reduce(state, batch_tokens=batch)
    adaptive_filter(state)
    label, total = progress.tasks[0]
    assert label == f"query.map over {len(trace.packs)} batches" and total == progress.advanced[label] == len(trace.packs) > 1
    assert progress.tasks[1][0].startswith("query.filter over ")


def test_a_window_too_small_for_the_prompt_is_a_clear_error() -> None:
    state = make_state(fact_items(2), ScriptedChat(), chat__context_window=300, chat__max_tokens=250)
    with pytest.raises(MethodError, match="context window"):
        map_reduce(state)
    with pytest.raises(MethodError, match="batch_tokens must be a positive"):
        map_reduce(make_state(fact_items(2), ScriptedChat()), batch_tokens=0)


# -- scores: drop, sort, cut --------------------------------------------------------------------------

SCORES = {1: 40, 2: 0, 3: 90, 4: 0, 5: 75, 6: 10}


def scored_by_item(user: str) -> str:
    """One point per item shown, scored by SCORES (items 1..6)."""
    return points_reply([(f"point from item {n}", SCORES[n]) for n in numbers_in(user)])


def test_zero_scores_are_dropped_and_the_reduce_context_is_sorted_by_score() -> None:
    chat = ScriptedChat(answers={"map_answer": scored_by_item,
                                 "reduce_answer": lambda user: "They combine.\nAnswer: Marie Curie"})
    state = make_state(fact_items(6), chat)
    trace = map_reduce(state, batch_tokens=2 * TOK.count(item_block(0, state.items[0])) + 2)
    assert len(trace.points) == 6 and trace.unparsed == 0
    assert [p.score for p in trace.kept] == [90, 75, 40, 10]
    assert trace.used == 4
    (reduce,) = requests_of(chat, "query.reduce")
    user = chat.user_message(reduce)
    shown = re.findall(r"point from item (\d)", user)
    assert shown == ["3", "5", "1", "6"]  # best first, no zero
    assert "(helpfulness 90)" in user
    assert trace.answer == "Marie Curie" and trace.raw.endswith("Answer: Marie Curie")
    assert generate_map_reduce(make_state(fact_items(6), ScriptedChat(answers=chat.answers))) == \
        ("Marie Curie", "They combine.\nAnswer: Marie Curie")
    assert set(state.models.ledger.stages) == {"query.map", "query.reduce"}


def test_the_reduce_context_stops_at_the_token_limit() -> None:
    chat = ScriptedChat(answers={"map_answer": scored_by_item})
    state = make_state(fact_items(6), chat)
    points = [Point(f"point from item {n}", float(SCORES[n]), 0, True) for n in (3, 5, 1)]
    blocks = [point_block(i + 1, p, "helpfulness") for i, p in enumerate(points)]
    limit = TOK.count(SEPARATOR.join(blocks[:2])) + 5  # two fit; the third would pass by more than 5
    trace = map_reduce(state, reduce_tokens=limit)
    assert trace.used == 2
    assert trace.final_context == SEPARATOR.join(blocks[:2])
    assert TOK.count(trace.final_context) <= limit
    user = chat.user_message(requests_of(chat, "query.reduce")[0])
    assert "item 1" not in user and "item 6" not in user


def test_fill_points_cuts_only_a_first_point_for_graphrag_and_the_crossing_one_for_archrag() -> None:
    long = Point(" ".join(["radium"] * 200), 90.0, 0, True)
    short = Point("short point", 50.0, 0, True)
    text, used = fill_points([long, short], 60, TOK, "helpfulness", cut_overflow=False)
    assert used == 1 and TOK.count(text) <= 60 and text.startswith("[1] (helpfulness 90)")
    first = Point("a first point of modest length", 90.0, 0, True)
    room = TOK.count(point_block(1, first, "x")) + 40
    graphrag, used_g = fill_points([first, long, short], room, TOK, "x", cut_overflow=False)
    archrag, used_a = fill_points([first, long, short], room, TOK, "x", cut_overflow=True)
    assert used_g == 1 and graphrag == point_block(1, first, "x")
    assert used_a == 2 and archrag.startswith(graphrag + SEPARATOR + "[2] (x 90)") and TOK.count(archrag) <= room


# -- malformed output and the no-data path ------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "points", "parsed"),
    [
        ('{"points": [{"description": "a", "score": 80}, {"description": "b", "score": "0"}]}',
         [("a", 80.0), ("b", 0.0)], True),
        ('```json\n{"points": [{"description": "a", "score": 30}, {"description": "b"}]}\n```',
         [("a", 30.0), ("b", 50.0)], True),
        ('[{"answer": "x", "helpfulness": "90/100"}, "plain point"]', [("x", 90.0), ("plain point", 50.0)], True),
        ('{"answer": "Paris", "score": 140}', [("Paris", 100.0)], True),
        ('{"points": [{"description": "kept", "score": 40}, {"description": "cut off',
         [("kept", 40.0), ("cut off", 50.0)], True),  # a reply cut at max_tokens keeps what it has
        ('{"points": []}', [], True),
        ("Marie Curie discovered radium.\nScore: 70", [("Marie Curie discovered radium.", 70.0)], False),
        ("<ANSWER_HELPFULNESS> 65 </ANSWER_HELPFULNESS> Pierre too.", [("Pierre too.", 65.0)], False),
        ("Just prose, no score.", [("Just prose, no score.", 50.0)], False),
        ("{{{ ]]", [("{{{ ]]", 50.0)], False),
        ("", [], False),
    ],
)
def test_read_points(reply: str, points: list[tuple[str, float]], parsed: bool) -> None:
    assert read_points(reply, 5, 50.0) == (points, parsed)


def test_read_points_keeps_at_most_max_points() -> None:
    reply = points_reply([(f"p{i}", 10 * i) for i in range(8)])
    assert [d for d, _ in read_points(reply, 3, 50.0)[0]] == ["p0", "p1", "p2"]


def test_malformed_map_replies_become_counted_points() -> None:
    replies = iter(["The answer is Marie Curie.", '{"points": [{"description": "good", "score": 80}, {"desc',
                    "", "Helpfulness score: 0\nNothing here."])
    chat = ScriptedChat(answers={"map_answer": lambda user: next(replies)})
    state = make_state(fact_items(4), chat)
    trace = map_reduce(state, batch_tokens=TOK.count(item_block(0, state.items[0])) + 1, shuffle=False)
    assert len(trace.packs) == 4
    assert trace.unparsed == 3  # prose, empty, prose with a stated score
    assert [(p.description, p.score, p.parsed) for p in trace.kept] == [
        ("good", 80.0, True), ("The answer is Marie Curie.", 50.0, False)]
    assert trace.final_called
    # unparsed_score=0 is GraphRAG's rule: an unreadable reply counts for nothing
    prose = ScriptedChat(answers={"map_answer": lambda user: "prose only"})
    graphrag = map_reduce(make_state(fact_items(1), prose), unparsed_score=0)
    assert graphrag.kept == [] and graphrag.unparsed == 1 and graphrag.answer == NO_DATA_ANSWER


def test_no_surviving_point_answers_no_data_without_a_reduce_call() -> None:
    chat = ScriptedChat(answers={"map_answer": lambda user: points_reply([("useless", 0)])})
    state = make_state(fact_items(3), chat)
    assert generate_map_reduce(state) == (NO_DATA_ANSWER, "")
    assert requests_of(chat, "query.reduce") == [] and len(requests_of(chat, "query.map")) == 1
    # allow_general_knowledge asks the reduce prompt anyway, with no reports
    chat2 = ScriptedChat(answers={**chat.answers, "reduce_answer": lambda user: "Answer: from memory"})
    trace = map_reduce(make_state(fact_items(3), chat2), allow_general_knowledge=True)
    assert trace.answer == "from memory"
    assert "(none)" in chat2.user_message(requests_of(chat2, "query.reduce")[0])
    # no items at all: no call of any kind
    empty = ScriptedChat()
    assert generate_map_reduce(make_state([], empty)) == (NO_DATA_ANSWER, "") and empty.calls == 0


def test_unknown_parameters_are_clear_errors() -> None:
    with pytest.raises(MethodError, match="map_reduce has no parameter batch_size"):
        generate_map_reduce(make_state(fact_items(1), ScriptedChat()), batch_size=10)
    with pytest.raises(MethodError, match="adaptive_filter has no parameter seed"):
        generate_adaptive_filter(make_state(fact_items(1), ScriptedChat()), seed=1)


# -- adaptive filtering -------------------------------------------------------------------------------


def layered_items() -> list[ContextItem]:
    """ArchRAG-like retrieval: entities and relationships (no level), communities of layers 1 and 2, chunks."""
    return [
        ContextItem("entity", "e1", "Marie Curie: physicist.", 0.9, "Marie Curie", {"chunk_ids": []}),
        ContextItem("community", "a1", "Curie family: Marie and Pierre.", 0.8, "archrag level 1",
                    {"hierarchy": "archrag", "level": 1}),
        ContextItem("relationship", "r1", "Marie Curie discovered Radium.", 0.7, "Marie / Radium", {}),
        ContextItem("community", "a2", "Science in Paris.", 0.6, "archrag level 2",
                    {"hierarchy": "archrag", "level": 2}),
        ContextItem("entity", "e2", "Radium: an element.", 0.5, "Radium", {"chunk_ids": []}),
        ContextItem("community", "a3", "Polish scientists.", 0.4, "archrag level 1",
                    {"hierarchy": "archrag", "level": 1}),
    ]


def test_adaptive_filter_groups_items_by_layer_else_kind() -> None:
    groups = group_items(layered_items())
    assert groups == [("entity items", [0, 4]), ("layer 1 of archrag", [1, 5]), ("relationship items", [2]),
                      ("layer 2 of archrag", [3])]
    chat = ScriptedChat(answers={"filter_points": lambda user: points_reply([("p", 10)])})
    trace = adaptive_filter(make_state(layered_items(), chat))
    assert trace.packs == [[0, 4], [1, 5], [2], [3]]
    filters = requests_of(chat, "query.filter")
    assert [numbers_in(chat.user_message(r)) for r in filters] == [[1, 5], [2, 6], [3], [4]]
    assert "Retrieved information (layer 1 of archrag):" in chat.user_message(filters[1])


def test_adaptive_filter_splits_a_big_layer_into_packs_within_the_limit() -> None:
    items = fact_items(9) + [ContextItem("community", "top", "Top layer summary.", 1.0, "top", {"level": 1})]
    budget = 3 * TOK.count(item_block(0, items[0])) + 2  # three items (one-token separators) per pack
    chat = ScriptedChat(answers={"filter_points": lambda user: points_reply([("p", 10)])})
    trace = adaptive_filter(make_state(items, chat), pack_tokens=budget)
    assert trace.packs == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert trace.labels == ["layer 0", "layer 0", "layer 0", "layer 1"]
    for request in requests_of(chat, "query.filter"):
        user = chat.user_message(request)
        assert TOK.count(context_of(user, "):\n", "\n\nExtract")) <= budget


def test_adaptive_filter_merges_points_by_score_and_truncates_at_the_limit() -> None:
    by_group = {"entity": [("entity point", 30)], "layer 1": [("layer-one point", 95), ("minor point", 0)],
                "relationship": [(" ".join(["relation"] * 300), 60)], "layer 2": [("layer-two point", 70)]}

    def reply(user: str) -> str:
        label = re.search(r"Retrieved information \((\w+(?: \d)?)", user).group(1)
        return points_reply(by_group[label])

    chat = ScriptedChat(answers={"filter_points": reply, "merge_points": lambda user: "Answer: radium"})
    limit = 120
    trace = adaptive_filter(make_state(layered_items(), chat), merge_tokens=limit)
    assert [p.score for p in trace.kept] == [95, 70, 60, 30]  # zero dropped, sorted
    assert trace.used == 3  # the long 60-point is cut at the limit; the 30-point is left out
    user = chat.user_message(requests_of(chat, "query.merge")[0])
    assert user.index("layer-one point") < user.index("layer-two point") < user.index("relation relation")
    assert "entity point" not in user
    assert TOK.count(trace.final_context) <= limit
    assert trace.answer == "radium"
    assert [r.stage for r in chat.requests].count("query.filter") == 4


def test_adaptive_filter_without_points_answers_no_data() -> None:
    chat = ScriptedChat(answers={"filter_points": lambda user: '{"points": []}'})
    assert generate_adaptive_filter(make_state(layered_items(), chat)) == (NO_DATA_ANSWER, "")
    assert requests_of(chat, "query.merge") == []


# -- through the runner -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    return build_hand_graph(tmp_path_factory.mktemp("modes") / "ws")


def spec_with(generation: dict[str, Any]) -> MethodSpec:
    return MethodSpec.model_validate({
        "name": "test-two-stage", "title": "Two-stage test", "description": "entities and chunks",
        "source": "tests", "question": ["embedding"],
        "operators": [{"op": "node.vdb", "params": {"top_k": 3}}, {"op": "chunk.vdb", "params": {"top_k": 3}}],
        "generation": generation,
    }).check("test spec")


@pytest.mark.parametrize(
    ("mode", "first", "final", "params"),
    [("map_reduce", "query.map", "query.reduce", {"batch_tokens": 60, "seed": 3, "max_points": 2}),
     ("adaptive_filter", "query.filter", "query.merge", {"pack_tokens": 60, "max_points": 2})],
)
def test_the_runner_runs_two_stage_specs(hand, mode: str, first: str, final: str, params: dict[str, Any]) -> None:
    ws, settings, embedder = hand

    def scored(user: str) -> str:
        return points_reply([(f"found {n}", 10 * n) for n in numbers_in(user)])

    chat = ScriptedChat(answers={"map_answer": scored, "filter_points": scored,
                                 "reduce_answer": lambda user: "Combined.\nAnswer: Warsaw",
                                 "merge_points": lambda user: "Answer: Warsaw"})
    runner = MethodRunner(ws, settings, build_stack(settings, None, chat=chat, embedder=embedder))
    result = runner.run(spec_with({"mode": mode, "params": params}), "Where was Marie Curie born?")
    assert result.answer == "Warsaw"
    assert {item.kind for item in result.context} == {"entity", "chunk"}
    stages = result.to_json()["usage_by_stage"]
    assert stages[first]["llm_calls"] >= 2 and stages[final]["llm_calls"] == 1
    assert "query.generate" not in stages
    assert result.timings["generate"] > 0
    if mode == "adaptive_filter":
        labels = {re.search(r"Retrieved information \(([^)]*)\)", chat.user_message(r)).group(1)
                  for r in chat.requests if r.stage == first}
        assert labels == {"entity items", "chunk items"}


def test_the_runner_reports_a_bad_generation_parameter(hand) -> None:
    ws, settings, embedder = hand
    runner = MethodRunner(ws, settings, build_stack(settings, None, chat=ScriptedChat(), embedder=embedder))
    with pytest.raises(MethodError, match="no parameter"):
        runner.run(spec_with({"mode": "map_reduce", "params": {"tokens": 5}}), "Where was Marie Curie born?")


def test_prompts_exist_and_take_their_fields() -> None:
    from unirag.prompts.prompt import load_prompt

    for name, fields in {"map_answer": ("question", "context", "max_points"),
                         "reduce_answer": ("question", "reports"),
                         "filter_points": ("question", "context", "max_points", "group"),
                         "merge_points": ("question", "reports")}.items():
        prompt = load_prompt(name)
        text = " ".join(m["content"] for m in prompt.messages(**{f: f"<{f}>" for f in fields}))
        assert all(f"<{f}>" in text for f in fields) and prompt.cache_version.startswith(f"{name}@")


def test_nothing_written_to_the_state_but_the_ledger() -> None:
    chat = ScriptedChat(answers={"map_answer": scored_by_item})
    state = make_state(fact_items(6), chat)
    before = [item.to_json() for item in state.items]
    map_reduce(state)
    adaptive_filter(state)
    assert [item.to_json() for item in state.items] == before
    assert state.timings == {} and state.entities == {} and state.communities == {}
