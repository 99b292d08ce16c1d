"""The rambling detector of the offline model, on hand-written replies."""

from __future__ import annotations

import pytest

from unirag.llm.degeneration import (
    INVENTED_CONTEXT, REPETITION, DegenerationGuard, find_degeneration,
)


def kept(text: str, repetition: bool = True) -> tuple[str, str] | None:
    found = find_degeneration(text, repetition)
    return None if found is None else (found.reason, text[: found.keep].rstrip())


@pytest.mark.parametrize("answer", [
    "Kabir was a 15th-century Indian poet.",
    "The Nile flows through Egypt [1] and Sudan [2].",
    "Yes. Both films were directed by the same person (see [1]).",
    "- Paris is the capital of France.\n- Berlin is the capital of Germany.\n- Rome is the capital of Italy.",
    "He was born in the city of Lyon, and his brother was born in the city of Lyon too.",
    "The answer is 1990...",
])
def test_ordinary_answers_are_left_alone(answer: str) -> None:
    assert find_degeneration(answer) is None


def test_invented_context_block_is_cut_before_its_header() -> None:
    reply = "Kabir was a mystic poet.\n\n[5] (chunk: kabir)\nKabir was born in Varanasi. [6] (chunk: x)"
    assert kept(reply) == (INVENTED_CONTEXT, "Kabir was a mystic poet.")


def test_other_kinds_of_headers_count_too() -> None:
    assert kept("Answer: Lyon\n[2] (entity: LYON)\ncity") == (INVENTED_CONTEXT, "Answer: Lyon")
    assert kept("  [12] (community: c3-7)") == (INVENTED_CONTEXT, "")


def test_a_new_turn_is_a_normal_stop() -> None:
    assert kept("Varanasi.\nQuestion: Where was Kabir born?\nAnswer: ...") == ("stop", "Varanasi.")
    assert kept("Varanasi.<|im_end|>\n<|im_start|>user") == ("stop", "Varanasi.")
    assert kept("Varanasi.\n\nContext:\n[1] blah") == ("stop", "Varanasi.")


def test_a_repeated_line_keeps_its_first_copy() -> None:
    reply = "Kabir was a poet.\nHe lived in India.\nHe lived in India.\nHe lived in India.\n"
    assert kept(reply) == (REPETITION, "Kabir was a poet.\nHe lived in India.")
    assert find_degeneration("He lived in India.\nHe lived in India.\n") is None  # twice is allowed


def test_a_repeated_run_of_words_without_newlines() -> None:
    loop = "the river flows north to the sea and then "
    reply = "The Nile. " + loop * 3
    assert kept(reply) == (REPETITION, "The Nile. " + loop.rstrip())


def test_a_unit_repeated_without_spaces() -> None:
    assert kept("Kabir" + "!" * 40) == (REPETITION, "Kabir!")
    assert kept("1990" + "ab" * 30) == (REPETITION, "1990ab")
    assert find_degeneration("Kabir!!!") is None


def test_json_mode_skips_repetition_but_not_markers() -> None:
    record = '{"name": "A", "type": "person", "description": "a person in the story"}, '
    assert find_degeneration(record * 4, repetition=False) is None
    assert kept('{"a": 1}<|im_end|>', repetition=False) == ("stop", '{"a": 1}')


def test_the_earliest_problem_wins() -> None:
    reply = "Lyon.\n[3] (chunk: lyon)\ntext\nQuestion: more?"
    assert kept(reply) == (INVENTED_CONTEXT, "Lyon.")


def stream(guard: DegenerationGuard, chunks: list[str]) -> tuple[str, str | None]:
    shown = ""
    for chunk in chunks:
        part, found = guard.feed(chunk)
        shown += part
        if found is not None:
            return shown, found.reason
    return shown + guard.flush(), None


def test_guard_holds_back_a_line_that_may_become_a_header() -> None:
    guard = DegenerationGuard()
    assert guard.feed("Kabir was a poet.\n")[0] == "Kabir was a poet.\n"
    assert guard.feed("[5")[0] == ""  # could still be "[5] (chunk: ...)"
    assert guard.feed("] (chu")[0] == ""
    part, found = guard.feed("nk: kabir)\n")
    assert part == "" and found is not None and found.reason == INVENTED_CONTEXT
    assert guard.text == "Kabir was a poet."


def test_guard_releases_held_text_that_was_harmless() -> None:
    guard = DegenerationGuard()
    shown, reason = stream(guard, ["See ", "\n[1", "] and more", " text."])
    assert reason is None and shown == "See \n[1] and more text." == guard.text
    guard = DegenerationGuard()
    assert stream(guard, ["Yes\nQue", "bec is a province."]) == ("Yes\nQuebec is a province.", None)


def test_guard_streams_ordinary_text_at_once() -> None:
    guard = DegenerationGuard()
    assert guard.feed("Kabir ")[0] == "Kabir "
    assert guard.feed("was a poet")[0] == "was a poet"
    assert guard.flush() == ""


def test_guard_stops_on_repetition_and_keeps_the_first_copy() -> None:
    guard = DegenerationGuard()
    shown, reason = stream(guard, ["Rome.\n"] + ["It is old.\n"] * 5)
    assert reason == REPETITION
    assert guard.text == "Rome.\nIt is old."
    assert shown.startswith(guard.text)  # the stream may have shown the second copy already
    assert guard.feed("more")[0] == ""  # nothing after the stop


@pytest.mark.parametrize("reply", [
    "Kabir" + "!" * 40,
    "The Nile. " + "the river flows north to the sea and then " * 3,
    "Rome.\nIt is old.\nIt is old.\nIt is old.\n",
    "Kabir was a mystic poet.\n\n[5] (chunk: kabir)\nKabir was born",
    "Varanasi.\nQuestion: Where was Kabir born?",
    "Varanasi.<|im_end|>",
    "An ordinary answer, with [1] a citation.",
])
def test_reading_a_reply_piece_by_piece_finds_what_reading_it_whole_finds(reply: str) -> None:
    whole = find_degeneration(reply)
    for size in (1, 3, 7):
        guard = DegenerationGuard()
        found = None
        for at in range(0, len(reply), size):
            _, found = guard.feed(reply[at:at + size])
            if found is not None:
                break
        if whole is None:
            assert found is None and guard.text == reply
        else:
            assert found is not None and found.reason == whole.reason
            assert guard.text == reply[: whole.keep].rstrip(), size
