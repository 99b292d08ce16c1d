"""The LLM judge (the unirag.eval.judge package) with scripted judges.

No real model: small chat classes answer from the prompt they are given (always
the first answer, the longer answer, a fixed reply), so position bias, win-rate
arithmetic, parsing of broken replies, question generation and claim clustering
are checked exactly.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from unirag.errors import ConfigError
from unirag.eval.judge import (
    ABSOLUTE_CRITERIA,
    ALL_CRITERIA,
    TIE,
    AnswerClaims,
    GeneratedQuestion,
    JudgeConfig,
    PairVerdict,
    ScoreVerdict,
    append_rows,
    claim_summary,
    cluster_counts,
    done_keys,
    extract_claims,
    from_row,
    generate_questions,
    judge_pairs,
    judgement_counts,
    mean_scores,
    pair_requests,
    pending_pairs,
    position_bias,
    read_records,
    rouge_l_matrix,
    score_absolute,
    score_key,
    score_requests,
    to_row,
    unique_claims,
    unparsed_counts,
    verdict_key,
    win_rate_matrices,
    win_rates,
)
from unirag.eval.judge.parse import (
    parse_choice,
    parse_list,
    parse_pairwise,
    parse_score,
    parse_scores,
)
from unirag.eval.judge.questions import describe_corpus
from unirag.llm.base import ChatRequest, ChatResponse

_ANSWERS = re.compile(r"Answer 1:\n(.*?)\n\nAnswer 2:\n(.*?)\n\nCompare", re.DOTALL)


def _user(request: ChatRequest) -> str:
    return request.messages[-1]["content"]


def _all_criteria(choice: str) -> str:
    return json.dumps({c: {"winner": choice, "reason": f"picked {choice}"} for c in ALL_CRITERIA})


class FixedJudge:
    """Replies ``reply(request)`` to every request and records the requests."""

    def __init__(self, reply: Callable[[ChatRequest], str], name: str = "fixed-judge") -> None:
        self.name = name
        self.reply = reply
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return ChatResponse(text=self.reply(request))


def first_judge() -> FixedJudge:
    """Always prefers the answer shown first."""
    return FixedJudge(lambda r: _all_criteria("1"), "first-judge")


def longer_judge() -> FixedJudge:
    """Prefers the longer answer; equal lengths tie."""

    def reply(request: ChatRequest) -> str:
        first, second = _ANSWERS.search(_user(request)).groups()
        return _all_criteria("1" if len(first) > len(second) else "2" if len(second) > len(first) else "tie")

    return FixedJudge(reply, "longer-judge")


ITEMS = [
    ("q1", "What are the main themes?", "long", "A long answer with many details and perspectives.", "short", "Brief."),
    ("q2", "How do the documents differ?", "short", "Tiny.", "long", "Another long answer, rich in points."),
]


# -- pairwise judging ---------------------------------------------------------------------------


def test_both_orders_are_asked_and_a_first_position_judge_cancels_out() -> None:
    judge = first_judge()
    verdicts = judge_pairs(judge, ITEMS)
    assert len(judge.requests) == 4  # 2 pairs x 2 orders x 1 replicate
    shown_first = {_ANSWERS.search(_user(r)).group(1) for r in judge.requests}
    assert shown_first == {"A long answer with many details and perspectives.", "Brief.", "Tiny.",
                           "Another long answer, rich in points."}
    assert len(verdicts) == 4 * len(ALL_CRITERIA)
    assert {v.order for v in verdicts} == {"ab", "ba"}
    methods = ["long", "short"]
    for criterion, matrix in win_rate_matrices(verdicts, methods).items():
        assert matrix[0, 1] == pytest.approx(0.5) and matrix[1, 0] == pytest.approx(0.5), criterion
        assert math.isnan(matrix[0, 0]) and math.isnan(matrix[1, 1])
    assert position_bias(verdicts) == 1.0
    assert judgement_counts(verdicts, methods)[0, 1] == 4


def test_a_judge_preferring_the_longer_answer_wins_every_time() -> None:
    judge = longer_judge()
    verdicts = judge_pairs(judge, ITEMS, criteria=("comprehensiveness", "overall"), replicates=2)
    assert len(judge.requests) == 8
    rates = win_rates(verdicts, ["long", "short"], "comprehensiveness")
    assert rates[0, 1] == 1.0 and rates[1, 0] == 0.0
    assert position_bias(verdicts) == 0.5
    assert {v.winner for v in verdicts} == {"long"}
    assert all(v.judge == "longer-judge" and v.parsed for v in verdicts)
    assert {v.criterion for v in verdicts} == {"comprehensiveness", "overall"}


def test_methods_are_canonical_whatever_order_the_caller_gives() -> None:
    verdicts = judge_pairs(longer_judge(), [ITEMS[1]], criteria=("overall",))
    assert {(v.method_a, v.method_b) for v in verdicts} == {("long", "short")}
    assert verdict_key("q2", "short", "long", "ab", 0) == verdict_key("q2", "long", "short", "ba", 0)
    first_ab = next(v for v in verdicts if v.order == "ab")
    assert first_ab.first_shown == "long"


def test_replicates_and_orders_have_distinct_deterministic_cache_keys() -> None:
    requests = pair_requests(ITEMS[:1], replicates=3, seed=7)
    keys = [r.request.cache_key("m") for r in requests]
    assert len(requests) == 6 and len(set(keys)) == 6
    assert [r.request.cache_key("m") for r in pair_requests(ITEMS[:1], replicates=3, seed=7)] == keys
    assert set(keys).isdisjoint(r.request.cache_key("m") for r in pair_requests(ITEMS[:1], replicates=3, seed=8))
    # replicates differ only in the cache identity: the judge sees the same text
    by_order = {}
    for r in requests:
        by_order.setdefault(r.order, set()).add(json.dumps(r.request.messages))
    assert all(len(texts) == 1 for texts in by_order.values())
    assert {r.request.temperature for r in requests} == {0.7}
    assert {r.request.temperature for r in pair_requests(ITEMS[:1])} == {0.0}
    assert len({r.key for r in requests}) == 6
    assert {r.request.stage for r in requests} == {"eval.judge.pairwise"}


def test_done_keys_skip_finished_requests() -> None:
    first = judge_pairs(first_judge(), ITEMS, criteria=("overall",))
    done = done_keys(first)
    assert len(done) == 4
    judge = first_judge()
    assert judge_pairs(judge, ITEMS, criteria=("overall",), done=done) == []
    assert judge.requests == []
    requests = pair_requests(ITEMS, criteria=("overall",), replicates=2)
    assert len(pending_pairs(requests, done)) == 4  # only the second replicates remain
    assert all(r.replicate == 1 for r in pending_pairs(requests, done))


def test_no_chat_model_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match="needs a chat model"):
        judge_pairs(None, ITEMS)
    assert judge_pairs(None, [], criteria=("overall",)) == []  # nothing left to judge needs no model


def test_comparing_a_method_with_itself_is_refused() -> None:
    with pytest.raises(ValueError, match="itself"):
        pair_requests([("q", "Q?", "m", "a", "m", "b")])


def test_answers_are_cut_to_the_token_budget_and_the_window() -> None:
    long_answer = "word " * 5000
    [request, *_] = pair_requests([("q", "Q?", "a", long_answer, "b", "short")], config=JudgeConfig(answer_tokens=50))
    first, second = _ANSWERS.search(_user(request.request)).groups()
    assert first.endswith("[...]") and len(first.split()) <= 52
    assert second == "short"
    [request, *_] = pair_requests([("q", "Q?", "a", long_answer, "b", long_answer)],
                                  config=JudgeConfig(answer_tokens=100_000, context_window=2000, reply_tokens=500))
    from unirag.text.tokenizer import get_tokenizer

    total = sum(get_tokenizer().count(m["content"]) for m in request.request.messages)
    assert total + 500 <= 2000
    with pytest.raises(ConfigError, match="context window"):
        pair_requests(ITEMS[:1], config=JudgeConfig(context_window=300, reply_tokens=200))


# -- parsing broken judge replies ----------------------------------------------------------------

PAIR_CASES = [
    # (reply, expected {criterion: position})
    ('```json\n{"overall": {"winner": "2", "reason": "x"}}\n```', {"overall": "2"}),
    ('{"Overall Winner": {"Winner": "Answer 1", "Explanation": "fine"}} Hope this helps!', {"overall": "1"}),
    ('{"comprehensiveness": {"winner": "1", "reason": "more det', {"comprehensiveness": "1"}),
    ("Answer 2 is better.", {"overall": "2"}),
    ("", {}),
    ("[1, 2]", {}),
    ('[{"criterion": "Comprehensiveness", "winner": "Answer 2"}, {"criterion": "Overall", "winner": "A"}]',
     {"comprehensiveness": "2", "overall": "1"}),
    (('{"Comprehensiveness": {"Winner": 2}, "Diversity": {"winner": "B"}, "Empowerment": "answer 1", '
      '"Directness": {"winner": "Tie"}, "overall": 1}'),
     {"comprehensiveness": "2", "diversity": "2", "empowerment": "1", "directness": TIE, "overall": "1"}),
    ('{"comprehensiveness": {"winner": "Answer 1 or Answer 2"}}', {}),
    (("**Comprehensiveness**: Winner=2 (Naive RAG).\nDirectness: Answer 1 is more to the point.\n"
      "Answer 2 directly addresses more."), {"comprehensiveness": "2", "directness": "1"}),
    ('<think>Answer 1 looks better</think>{"overall": {"winner": "2"}}', {"overall": "2"}),
    ('{"evaluation": {"diversity": {"winner": "2"}}}', {"diversity": "2"}),
    ('{"winner": "2", "reason": "broader"}', {"overall": "2"}),
    ("I cannot decide.", {}),
    ("null", {}),
    ('{"overall": {"winner": true}}', {}),
]


@pytest.mark.parametrize(("reply", "expected"), PAIR_CASES)
def test_pairwise_replies_are_parsed_when_recoverable(reply: str, expected: dict[str, str]) -> None:
    decisions = parse_pairwise(reply, ALL_CRITERIA)
    assert {c: d.value for c, d in decisions.items() if d.value is not None} == expected


def test_malformed_replies_become_unparsed_verdicts_not_errors() -> None:
    def reply(request: ChatRequest) -> str:
        # Item i's "ab" request gets case 2i, its "ba" request case 2i + 1, whatever order the
        # concurrent calls run in (Python 3.13 schedules the judge's worker threads differently).
        text = "\n".join(m["content"] for m in request.messages)
        item = int(re.search(r"Question (\d+)\?", text).group(1))
        swapped = text.index(f"answer-y-{item}") < text.index(f"answer-x-{item}")
        return PAIR_CASES[2 * item + swapped][0]

    judge = FixedJudge(reply)
    items = [(f"q{i}", f"Question {i}?", "a", f"answer-x-{i}", "b", f"answer-y-{i}")
             for i in range(len(PAIR_CASES) // 2)]
    verdicts = judge_pairs(judge, items)
    assert len(verdicts) == len(PAIR_CASES) * len(ALL_CRITERIA)
    unparsed = [v for v in verdicts if not v.parsed]
    assert unparsed and all(v.winner is None for v in unparsed)
    assert next(v for v in unparsed if v.question_id == "q1" and v.order == "ba").raw == "Answer 2 is better."
    assert all(v.raw == "" for v in verdicts if v.parsed)
    assert sum(unparsed_counts(verdicts).values()) == len(unparsed)
    assert all(v.winner in ("a", "b", TIE) for v in verdicts if v.parsed)
    truncated = next(v for v in verdicts if v.question_id == "q1" and v.order == "ab"
                     and v.criterion == "comprehensiveness")
    assert truncated.reason == "more det" and truncated.winner == "a"


def test_parse_choice_tokens() -> None:
    for value, expected in [("answer 1", "1"), ("Answer 2", "2"), ("A", "1"), ("B", "2"), ("2", "2"), (1, "1"),
                            (2.0, "2"), ("Tie", TIE), ("both equally good", TIE), ("[Answer 2]", "2"),
                            ("Answer 1.", "1"), ("3", None), (None, None), (True, None), ("answer 1.5", None)]:
        assert parse_choice(value) == expected, value


# -- win-rate arithmetic -------------------------------------------------------------------------


def _verdict(a: str, b: str, winner: str | None, order: str = "ab", criterion: str = "overall") -> PairVerdict:
    return PairVerdict("q", a, b, criterion, order, 0, winner, parsed=winner is not None)


def test_win_rates_on_hand_made_verdicts() -> None:
    verdicts = [
        _verdict("A", "B", "A"), _verdict("A", "B", TIE, "ba"), _verdict("A", "B", "B"), _verdict("A", "B", "A", "ba"),
        _verdict("A", "B", None),  # unparsed: excluded
        _verdict("B", "C", "C"),
        _verdict("A", "B", "B", criterion="diversity"),
    ]
    rates = win_rates(verdicts, ["A", "B", "C"])
    assert rates[0, 1] == pytest.approx(2.5 / 4) and rates[1, 0] == pytest.approx(1.5 / 4)
    assert rates[2, 1] == 1.0 and rates[1, 2] == 0.0
    assert math.isnan(rates[0, 2]) and math.isnan(rates[2, 0])
    assert np.isnan(np.diag(rates)).all()
    assert judgement_counts(verdicts, ["A", "B", "C"])[0, 1] == 4
    assert win_rates(verdicts, ["A", "B"], "diversity")[1, 0] == 1.0
    assert set(win_rate_matrices(verdicts, ["A", "B"])) == {"diversity", "overall"}
    assert position_bias(verdicts) == pytest.approx(1 / 5)  # only the first verdict chose the first-shown answer
    assert unparsed_counts(verdicts) == {"overall": 1, "diversity": 0}
    assert math.isnan(position_bias([]))
    assert np.isnan(win_rates([], ["A", "B"])).all()


# -- absolute scores -----------------------------------------------------------------------------


def test_absolute_scores_clamp_and_parse_prose() -> None:
    cases = [
        ('{"comprehensiveness": {"score": 12, "reason": "r"}, "overall": {"score": "0"}}',
         {"comprehensiveness": 10, "overall": 1}),
        ("Score: 7", {"overall": 7}),
        ("7/10", {"overall": 7}),
        ('```json\n{"Overall Quality": {"score": "8/10"}}\n```', {"overall": 8}),
        ('{"overall": {"score": "[1-10]"}}', {}),
        ('{"overall": {"score": "<1-10>"}}', {}),
        ("Comprehensiveness: 6/10 because it lists 3 items\nOverall: 7", {"comprehensiveness": 6, "overall": 7}),
        ('{"diversity": 6.5, "empowerment": "9", "overall": {"score": 7.4}}',
         {"diversity": 7, "empowerment": 9, "overall": 7}),
        ("", {}),
        ('{"score": 4}', {"overall": 4}),
        ("It has 3 parts and 5 sections.", {}),
    ]
    for reply, expected in cases:
        found = {c: d.value for c, d in parse_scores(reply, ABSOLUTE_CRITERIA).items() if d.value is not None}
        assert found == expected, reply
    assert parse_scores("Score: 3", ("diversity",))["diversity"].value == 3
    assert parse_score(-4) == 1 and parse_score(float("nan")) is None and parse_score("10 out of 10") == 10


def test_score_absolute_runs_replicates_and_averages() -> None:
    def reply(request: ChatRequest) -> str:
        score = 9 if "rich answer" in _user(request) else 3
        return json.dumps({c: {"score": score, "reason": "r"} for c in ABSOLUTE_CRITERIA})

    judge = FixedJudge(reply)
    items = [("q1", "Q?", "good", "a rich answer"), ("q1", "Q?", "bad", "meh"), ("q2", "Q?", "bad", "")]
    scores = score_absolute(judge, items, replicates=2)
    assert len(judge.requests) == 6 and len({r.cache_key("m") for r in judge.requests}) == 6
    assert all(isinstance(s, ScoreVerdict) and 1 <= s.score <= 10 for s in scores)
    means = mean_scores(scores)
    assert means["good"]["overall"] == 9.0 and means["bad"]["comprehensiveness"] == 3.0
    assert {r.stage for r in judge.requests} == {"eval.judge.absolute"}
    broken = score_absolute(FixedJudge(lambda r: "no idea"), items[:1])
    assert all(not s.parsed and s.score is None for s in broken)
    assert math.isnan(mean_scores(broken)["good"]["overall"])
    assert len({r.key for r in score_requests(items, replicates=2)}) == 6
    assert score_key("q1", "good", 1) == score_requests(items[:1], replicates=2)[1].key


# -- rows and resume -----------------------------------------------------------------------------


def test_rows_round_trip_and_a_cut_last_line_is_skipped(tmp_path: Path) -> None:
    verdicts = judge_pairs(first_judge(), ITEMS[:1], criteria=("overall", "diversity"))
    scores = score_absolute(FixedJudge(lambda r: "Score: 5"), [("q1", "Q?", "m", "answer")])
    claims = [AnswerClaims("q1", "m", ("A claim.",))]
    question = GeneratedQuestion("u1t1q1-abcd", "user", "task", "Why?", 0, 0)
    records = [*verdicts, *scores, *claims, question]
    for record in records:
        row = to_row(record)
        assert row["kind"] == record.kind and row["key"] == record.key
        assert from_row(json.loads(json.dumps(row))) == record
    path = tmp_path / "judge.jsonl"
    assert append_rows(path, records) == len(records)
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"kind": "pair", "question_id": "q9", "meth')  # killed mid-write
    back, bad = read_records(path)
    assert back == records and bad == 1
    assert done_keys([to_row(r) for r in records], kind="pair") == {v.key for v in verdicts}
    assert read_records(tmp_path / "missing.jsonl") == ([], 0)


# -- abstract question generation ----------------------------------------------------------------


class QuestionChat:
    """Answers the three question-generation prompts with as many items as asked (or ``cap``)."""

    name = "question-chat"

    def __init__(self, cap: dict[str, int] | None = None, prose: bool = False) -> None:
        self.cap = cap or {}
        self.prose = prose
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        user = _user(request)
        kind, count = next((k, int(m.group(1))) for k, pattern in
                           (("users", r"Describe (\d+) different people"), ("tasks", r"List (\d+) different tasks"),
                            ("questions", r"Write (\d+) different questions")) if (m := re.search(pattern, user)))
        count = min(count, self.cap.get(kind, count))
        context = "|".join(re.findall(r"^(?:User|Task): (.*)$", user, re.MULTILINE))
        items = [f"{kind[:-1]} {n + 1} of [{context}]" for n in range(count)]
        if self.prose:
            return ChatResponse(text="Here you go:\n" + "\n".join(f"{n + 1}. **{t}**" for n, t in enumerate(items)))
        return ChatResponse(text="```json\n" + json.dumps({kind: items}) + "\n```")


def test_generate_questions_follows_algorithm_1() -> None:
    chat = QuestionChat()
    result = generate_questions(chat, ["First document about rivers.", "Second about mountains."], 2, 2, 2)
    assert len(result) == 8 and result.complete and result.notes == [] and result.unparsed == 0
    assert len(chat.requests) == 1 + 2 + 4
    assert {r.stage for r in chat.requests} == {"eval.judge.questions"}
    assert len(result.users) == 2 and [len(t) for t in result.tasks] == [2, 2]
    assert len({q.id for q in result}) == 8
    q = result.questions[-1]
    assert q.user == result.users[1] and q.task == result.tasks[1][1] and q.id.startswith("u2t2q2-")
    assert result.users[1] in q.question and q.task in q.question
    assert "rivers" in _user(chat.requests[0])
    prose = generate_questions(QuestionChat(prose=True), "A corpus of news articles.", 2, 2, 2)
    assert len(prose) == 8 and not prose.questions[0].question.startswith("*")


def test_generate_questions_keeps_what_it_gets_without_padding() -> None:
    result = generate_questions(QuestionChat(cap={"questions": 1}), "news", 2, 2, 2)
    assert len(result) == 4 and not result.complete
    assert sum("the model gave 1" in note for note in result.notes) == 4
    fewer_users = generate_questions(QuestionChat(cap={"users": 1}), "news", 2, 2, 2)
    assert len(fewer_users) == 4 and any("2 users, the model gave 1" in n for n in fewer_users.notes)
    silent = generate_questions(FixedJudge(lambda r: "Sorry, I can't."), "news", 2, 2, 2)
    assert len(silent) == 0 and silent.unparsed == 1 and silent.users == []
    more = generate_questions(QuestionChat(), "news", 1, 1, 1)
    assert len(more) == 1


def test_copied_placeholders_are_not_questions() -> None:
    """SmolLM2 answered the users prompt with its reply format's slot, verbatim (a real reply)."""
    reply = '{"users": ["<one-sentence description of a user>", "A hydrologist studying floods."]}'
    result = generate_questions(FixedJudge(lambda r: reply if "people" in _user(r) else '{"tasks": ["<task>"]}'),
                                "rivers", 2, 1, 1)
    assert result.users == ["A hydrologist studying floods."]
    assert result.tasks == [[]] and len(result) == 0
    assert any("placeholder" in note for note in result.notes)


def test_list_parsing_and_corpus_description() -> None:
    assert parse_list('{"claims": []}', ("claims",)) == ([], True)
    assert parse_list("", ("claims",)) == ([], False)
    assert parse_list('{"users": [{"description": "A journalist"}, "A teacher", 3]}', ("users",)) == (
        ["A journalist", "A teacher"], True)
    assert parse_list('["a", "b"', ("x",)) == (["a", "b"], True)
    assert parse_list("- **User 1: A nurse**\n- User 2: A judge", ("users",)) == (["A nurse", "A judge"], True)
    described = describe_corpus(["word " * 3000, "other " * 3000], max_tokens=200)
    assert described.startswith("Excerpts") and "[2]" in described
    from unirag.text.tokenizer import get_tokenizer

    assert get_tokenizer().count(described) <= 210


# -- claims --------------------------------------------------------------------------------------


def test_identical_claims_collapse_and_unrelated_ones_stay_apart() -> None:
    same = ["The river floods every spring."] * 4
    assert cluster_counts(same) == {0.5: 1, 0.6: 1, 0.7: 1, 0.8: 1}
    unrelated = ["Paris is the capital of France.", "Whales are mammals.", "Copper conducts electricity well.",
                 "Mount Everest lies in the Himalayas."]
    assert cluster_counts(unrelated, thresholds=(0.5, 0.8)) == {0.5: 4, 0.8: 4}
    assert cluster_counts([], (0.5,)) == {0.5: 0} and cluster_counts(["One."], (0.5,)) == {0.5: 1}
    near = ["The river floods every spring.", "The river floods each spring.", "Whales are mammals."]
    assert cluster_counts(near, thresholds=(0.5,)) == {0.5: 2}


def test_rouge_l_matrix_matches_rouge_score_and_sklearn_clusters_agree() -> None:
    from rouge_score import rouge_scorer
    from sklearn.cluster import AgglomerativeClustering

    claims = ["The cat sat on the mat.", "A cat was sitting on a mat.", "Dogs bark at night.",
              "The dog barked loudly at night.", "Rivers flow to the sea.", "", "the the the"]
    sim = rouge_l_matrix(claims)
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    for i in range(len(claims)):
        for j in range(i + 1, len(claims)):
            assert sim[i, j] == pytest.approx(scorer.score(claims[i], claims[j])["rougeL"].fmeasure), (i, j)
    assert np.allclose(sim, sim.T)
    distance = 1.0 - sim
    np.fill_diagonal(distance, 0.0)
    for threshold in (0.45, 0.65, 0.85):
        model = AgglomerativeClustering(n_clusters=None, distance_threshold=threshold, metric="precomputed",
                                        linkage="complete").fit(distance)
        assert cluster_counts(claims, (threshold,))[threshold] == model.n_clusters_


def test_extract_claims_dedupes_and_counts_unparsed() -> None:
    def reply(request: ChatRequest) -> str:
        text = _user(request)
        if "broken" in text:
            return "I would rather not."
        return json.dumps({"claims": ["Rivers flood.", "rivers  flood", "Mountains erode slowly."]})

    judge = FixedJudge(reply)
    items = [("q1", "good", "Rivers flood. Mountains erode."), ("q1", "bad", "broken answer"), ("q2", "bad", "  ")]
    results = extract_claims(judge, items)
    assert len(judge.requests) == 2  # the blank answer costs no call
    assert results[0].claims == ("Rivers flood.", "Mountains erode slowly.") and results[0].parsed
    assert not results[1].parsed and results[2].claims == () and results[2].parsed
    summary = claim_summary(results, thresholds=(0.5,))
    assert summary["good"]["comprehensiveness"] == 2.0 and summary["good"]["diversity"] == {0.5: 2.0}
    assert summary["bad"]["unparsed"] == 1 and summary["bad"]["answers"] == 1
    assert extract_claims(judge, items, done={results[0].key, results[1].key})[0].question_id == "q2"
    assert unique_claims(["A b.", "a  B", "", "C"]) == ["A b.", "C"]
    assert {r.stage for r in judge.requests} == {"eval.judge.claims"}
