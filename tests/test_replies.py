"""The reply readers of unirag.text.replies on replies shaped as models send them.

Each reader is fed what small and reasoning models actually produce: ``<think>``
blocks (closed, cut by ``max_tokens``, opened by the chat template), code
fences, prose around the payload, JSON cut mid-object. The readers never raise
on a reply; they return None (or their documented fallback) for what they
cannot read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from unirag.eval.judge.parse import parse_pairwise, parse_scores
from unirag.graph.parse import clean_name
from unirag.text.replies import (
    _bare_word,
    first_json,
    first_list,
    first_object,
    read_points,
    read_yes_no,
    repair_json,
    strip_think,
)

GOLDEN = Path(__file__).parent / "golden"


def _golden(kind: str, name: str) -> str:
    return (GOLDEN / kind / f"{name}.txt").read_bytes().decode("utf-8")


# -- <think> ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "body"),
    [
        ("no tags at all", "no tags at all"),
        ("<think>The user asks about Curie.</think>\nParis", "\nParis"),
        ("<think>a</think>b<think>c</think>d", "bd"),
        ("<Thinking >spaced, capitalised</ thinking>  {\"a\": 1}", "  {\"a\": 1}"),
        # Cut by max_tokens inside the reasoning: the rest is all the reply says.
        ("<think>Lester Smith is missing, so YES", "Lester Smith is missing, so YES"),
        # The chat template opened the block: a lone closing tag drops what precedes it.
        ("The template opened this.</think>\nNO", "\nNO"),
        # The whole answer inside the reasoning: kept rather than lost.
        ("<think>{\"winner\": 2}</think>", "{\"winner\": 2}"),
        ("", ""),
    ],
)
def test_strip_think(reply: str, body: str) -> None:
    assert strip_think(reply) == body


# -- JSON ------------------------------------------------------------------------------------------


def test_first_object_in_fences_and_prose() -> None:
    reply = 'Sure! Here is the JSON:\n```json\n{"entities": ["Marie Curie", "Warsaw"]}\n```\nHope it helps.'
    assert first_object(reply) == {"entities": ["Marie Curie", "Warsaw"]}
    assert first_object('[{"a": 1}, {"b": 2}]') == {"a": 1}  # a list yields its first object
    assert first_object("No JSON here.") is None


def test_first_object_of_a_cut_reply_keeps_the_whole_records() -> None:
    """A real SmolLM2-135M agent_select reply, cut at max_tokens inside its ninth object."""
    value = first_object(_golden("agent_select", "smollm2_objects_cut"))
    assert value is not None
    ids = [item["id"] for item in value["selected"] if item]
    assert ids == [str(n) for n in range(1, 9)]


def test_first_list_and_first_json() -> None:
    assert first_list("Relevant paths: [2, 1], the others are not.") == [2, 1]
    assert first_list('{"paths": "none"}') is None
    assert first_list("[]") == []
    assert first_json('Verdict follows.\n```\n[{"criterion": "overall", "winner": 1}]\n```') == [
        {"criterion": "overall", "winner": 1}
    ]
    assert first_json('{"overall": {"winner": "Answer 2", "reason": "more detail') == {
        "overall": {"winner": "Answer 2", "reason": "more detail"}
    }
    assert first_json("No braces, only prose.") is None


def test_json_readers_never_raise_on_pathological_replies() -> None:
    for reply in ("{" * 5000, "[" * 5000, "{\"a\": [}]", "\x00{\ud800}", "{:}"):
        assert first_object(reply) is None or isinstance(first_object(reply), dict)
        assert first_json(reply) is None or isinstance(first_json(reply), (dict, list))
        repair_json(reply)


# -- YES / NO --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("YES", True),
        ("yes", True),
        ("Yes.", True),
        ("**YES**", True),
        ("  no\n", False),
        ("No, nothing important is missing.", False),
        ("<think>Maybe yes, the demon is missing.</think> NO", False),
        ("<think>Lester Smith is missing, so YES", True),
        ("The answer is: Yes", True),
        ("Answer YES or NO.\nNO", False),
        ("Y", True),
        ("n", False),
        ("I cannot tell.", None),
        ("", None),
        ("Nothing notable.", None),
    ],
)
def test_read_yes_no(reply: str, answer: bool | None) -> None:
    assert read_yes_no(reply) is answer


@pytest.mark.parametrize("name", ["smollm2_no", "smollm2_no_then_rambles_cut"])
def test_read_yes_no_on_real_stop_check_replies(name: str) -> None:
    assert read_yes_no(_golden("enough_context", name)) is False


@pytest.mark.parametrize("word", ["y", "Y", "true", "TRUE", "n", "false", "maybe", "true!", "U.S."])
@pytest.mark.parametrize(
    "wrap", ["{}", "**{}**", "'{}'", "({}).", "- {}", "1. {}", "[{}]", "`{}`;", "“{}”", "__{}__:", "# {}", "(({})"]
)
def test_bare_word_reads_a_one_word_reply_as_clean_name_did(word: str, wrap: str) -> None:
    """read_yes_no used graph.parse.clean_name for one-word replies; the text layer's peeler reads
    the same verdict from them (it need not keep an abbreviation's final dot as clean_name does)."""
    reply = wrap.format(word)
    verdicts = {"y": True, "true": True, "n": False, "false": False}
    assert verdicts.get(_bare_word(reply).lower()) is verdicts.get(clean_name(reply).lower())


# -- scored points ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "points", "parsed"),
    [
        ('Here are the key points:\n```json\n{"points": [{"description": "Curie won two Nobel Prizes", '
         '"score": 85}]}\n```\nLet me know if you need more.', [("Curie won two Nobel Prizes", 85.0)], True),
        ('{"key_points": [{"text": "Radium was found in 1898", "relevance": "70"}, {"text": "Polonium too", '
         '"relevance": 6', [("Radium was found in 1898", 70.0), ("Polonium too", 6.0)], True),
        ("**Helpfulness score:** 40\nThe reports mention Warsaw only in passing.",
         [("**Helpfulness score:** 40\nThe reports mention Warsaw only in passing.", 50.0)], False),
        ("The reports mention Warsaw only in passing.\nscore = 40/100",
         [("The reports mention Warsaw only in passing.", 40.0)], False),
    ],
)
def test_read_points_on_real_looking_replies(reply: str, points: list[tuple[str, float]], parsed: bool) -> None:
    assert read_points(reply, 5, 50.0) == (points, parsed)


# -- the judge reads <think> and JSON with the same readers --------------------------------------


def test_judge_replies_use_the_shared_readers() -> None:
    cut = 'I compared both.</think>\n```json\n{"overall": {"winner": "Answer 2", "reason": "more det'
    assert parse_pairwise(cut, ["overall"])["overall"].value == "2"
    reasoning_only = '<think>{"overall": {"score": 7}}</think>'
    assert parse_scores(reasoning_only, ["overall"])["overall"].value == 7
