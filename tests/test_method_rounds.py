"""``repeat`` blocks in method specs (ToG's exploration rounds) on the hand-built Curie graph.

The scripted model links "Marie Curie", keeps the relationships that say where
someone was born or what a city is the capital of, prefers Poland over Warsaw
among entities, and says the context is enough once it holds "Warsaw capital
of Poland" — which takes exactly two rounds: Marie Curie -> Warsaw -> Poland.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fakes import HashEmbedder, ScriptedChat, fake_stack
from tests.graph_fixture import build_hand_graph, query_state
from unirag.errors import MethodError
from unirag.methods.runner import MethodRunner
from unirag.methods.spec import MethodSpec, parse_spec, resolve_method
from unirag.methods.stopping import context_suffices
from unirag.operators.context import ContextItem

QUESTION = "In which country was Marie Curie born?"


@pytest.fixture(scope="module")
def hand(tmp_path_factory: pytest.TempPathFactory):
    return build_hand_graph(tmp_path_factory.mktemp("rounds") / "ws")


def pick(user: str, wanted: tuple[str, ...]) -> str:
    """The number of the first candidate line holding one of ``wanted`` (in that preference order)."""
    lines = re.findall(r"^(\d+)\. (.*)$", user, re.MULTILINE)
    for word in wanted:
        for number, text in lines:
            if word in text:
                return f'{{"selected": [{number}]}}'
    return '{"selected": []}'


def explorer(enough: str = "auto") -> ScriptedChat:
    """``enough``: "auto" (YES once Poland's capital is known), "never", or a fixed reply."""

    def select(user: str) -> str:
        if "Candidate relationships" in user:
            return pick(user, ("born in", "capital of"))
        return pick(user, ("Poland", "Warsaw"))

    def stop(user: str) -> str:
        if enough == "auto":
            return "YES" if "capital of Poland:" in user else "NO"
        return "NO" if enough == "never" else enough

    return ScriptedChat(answers={
        "question_entities": lambda user: '{"entities": ["Marie Curie"]}',
        "agent_select": select,
        "enough_context": stop,
    })


def tog_like(rounds: int = 3, until: str | None = "enough_context") -> MethodSpec:
    block: dict = {"rounds": rounds, "operators": [
        {"op": "relationship.onehop", "params": {"emit": False, "top_k": 30, "new_only": True}},
        {"op": "relationship.agent", "params": {"top_k": 1}},
        {"op": "node.relnode", "params": {"emit": False, "top_k": 30}},
        {"op": "node.agent", "params": {"top_k": 1}},
    ]}
    if until:
        block["until"] = until
    return MethodSpec(
        name="tog-test", title="t", description="t", source="test", question=["entities"],
        operators=[{"op": "node.link", "params": {"emit": False}}, {"repeat": block}],
    ).check("test")


def run(hand, spec: MethodSpec, chat: ScriptedChat):
    """Retrieval only, with no cache: each test scripts the stop check differently."""
    ws, settings, _ = hand
    settings = settings.model_copy(update={"cache": False})
    runner = MethodRunner(ws, settings, fake_stack(settings, ws, chat=chat, embedder=HashEmbedder()))
    return runner.run(spec, QUESTION, generate=False)


def stage_calls(result, stage: str) -> int:
    usage = result.ledger.stages.get(stage)
    return 0 if usage is None else usage.llm_calls + usage.cache_hits


def test_rounds_follow_the_frontier_and_stop_when_the_llm_says_enough(hand) -> None:
    result = run(hand, tog_like(), explorer())
    assert [(i.kind, i.id) for i in result.context] == [
        ("relationship", "marie curie|warsaw"), ("entity", "warsaw"),  # round 1 from Marie Curie
        ("relationship", "poland|warsaw"), ("entity", "poland"),  # round 2 from Warsaw
    ]
    assert result.rounds == {"operator.1": 2}
    assert stage_calls(result, "query.until") == 2  # NO after round 1, YES after round 2
    assert {"operator.1.r1.until", "operator.1.r2.until", "operator.1.r2.3.node.agent"} <= set(result.timings)
    assert not any(key.startswith("operator.1.r3") for key in result.timings)
    parts = [v for k, v in result.timings.items() if k.startswith(("question.", "operator."))]
    assert result.timings["retrieval"] == pytest.approx(sum(parts))
    assert result.to_json()["rounds"] == {"operator.1": 2}


def test_rounds_run_to_the_maximum_when_the_llm_never_says_enough(hand) -> None:
    chat = explorer("never")
    result = run(hand, tog_like(rounds=3), chat)
    assert result.rounds == {"operator.1": 3}
    assert stage_calls(result, "query.until") == 2  # never asked after the last round
    relationship_prompts = [ScriptedChat.user_message(r) for r in chat.requests
                            if r.stage == "query.relationship.agent"]
    # round 3 starts from Poland, whose one relationship is already on the path: nothing to ask
    assert len(relationship_prompts) == 2
    assert "Marie Curie born in Warsaw" not in relationship_prompts[1]  # new_only: already on the path


def test_an_unreadable_stop_reply_means_not_yet(hand) -> None:
    result = run(hand, tog_like(rounds=2), explorer("Perhaps, it depends."))
    assert result.rounds == {"operator.1": 2}


def test_rounds_without_until_run_them_all_and_ask_nothing(hand) -> None:
    result = run(hand, tog_like(rounds=2, until=None), explorer())
    assert result.rounds == {"operator.1": 2}
    assert stage_calls(result, "query.until") == 0


def test_context_suffices_reads_yes_and_asks_nothing_without_context(hand) -> None:
    ws, settings, embedder = hand
    chat = ScriptedChat(answers={"enough_context": lambda user: "Yes, the context names the country."})
    state = query_state(ws, settings, QUESTION, embedder, chat)
    assert context_suffices(state, "enough_context") is False and chat.calls == 0
    state.items.append(ContextItem("entity", "poland", "Poland: a country.", 1.0, "Poland", {}, "test"))
    assert context_suffices(state, "enough_context") is True
    request = chat.requests[-1]
    assert request.stage == "query.until" and "Poland: a country." in ScriptedChat.user_message(request)
    assert request.prompt_version.startswith("enough_context@")


# -- the spec ---------------------------------------------------------------------------------


def write(tmp_path: Path, block: str) -> Path:
    path = tmp_path / "rounds.yaml"
    path.write_text("name: r\ntitle: R\ndescription: d\nsource: s\nquestion: [entities]\n"
                    "operators:\n  - op: node.link\n  - repeat:\n" + block, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "block,needle",
    [
        ("      rounds: 2\n      operators:\n        - op: node.teleport\n", "node.teleport"),
        ("      rounds: 2\n      until: no_such_prompt\n      operators:\n        - op: node.onehop\n",
         "no_such_prompt"),
        ("      rounds: 0\n      operators:\n        - op: node.onehop\n", "rounds"),
        ("      rounds: 2\n      operators: []\n", "operators"),
        ("      rounds: 2\n      operators:\n        - op: node.onehop\n          params: {hops: 2}\n", "hops"),
    ],
    ids=["unknown-operator", "unknown-until-prompt", "zero-rounds", "no-operators", "unknown-param"],
)
def test_bad_repeat_blocks_name_the_file_in_one_line(tmp_path: Path, block: str, needle: str) -> None:
    path = write(tmp_path, block)
    with pytest.raises(MethodError) as info:
        parse_spec(path)
    assert str(path) in str(info.value) and needle in str(info.value) and "\n" not in str(info.value)


def test_requirements_and_pipeline_include_the_operators_inside_a_repeat(tmp_path: Path) -> None:
    path = write(tmp_path, "      rounds: 2\n      until: enough_context\n      operators:\n"
                           "        - op: chunk.vdb\n")
    path.write_text(path.read_text().replace("question: [entities]", "question: [entities, embedding]"))
    spec = parse_spec(path)
    assert "chunk_vectors" in spec.requires()
    assert spec.to_json()["pipeline"] == ("q:entities -> q:embedding -> node.link -> "
                                          "repeat<=2[chunk.vdb] until enough_context -> generate:direct")
    assert [c.op for c in spec.calls()] == ["node.link", "chunk.vdb"]


def test_tog_ships_as_rounds() -> None:
    spec = resolve_method("tog")
    assert spec.to_json()["pipeline"].count("repeat<=3[") == 1
    assert [c.op for c in spec.calls()] == ["node.link", "relationship.onehop", "relationship.agent",
                                            "node.relnode", "node.agent"]


# -- real replies (SmolLM2-135M via `bench/methods_smoke.py --methods tog`, 2026-11-23) --------

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("name", ["smollm2_no", "smollm2_no_then_rambles_cut"])
def test_real_stop_check_replies_read_as_not_yet(hand, name: str) -> None:
    from unirag.text.replies import read_yes_no

    reply = (GOLDEN / "enough_context" / f"{name}.txt").read_bytes().decode("utf-8")
    assert read_yes_no(reply) is False  # read as NO, not as unreadable
    ws, settings, embedder = hand
    chat = ScriptedChat(answers={"enough_context": lambda user: reply})
    state = query_state(ws, settings.model_copy(update={"cache": False}), QUESTION, embedder, chat)
    state.items.append(ContextItem("entity", "lilu", "Lilu: a demon.", 1.0, "Lilu", {}, "test"))
    assert context_suffices(state, "enough_context") is False


@pytest.mark.parametrize(
    "name,expected",
    [
        # objects with string ids, cut by max_tokens after the eighth: the first k ids, in order
        ("smollm2_objects_cut", [0, 1, 2, 3]),
        # counts 1, 2, ... 65 past the 30 candidates and is cut: numbers beyond the list are ignored
        ("smollm2_counts_past_the_list", [0, 1, 2, 3]),
    ],
)
def test_real_agent_replies_are_read_as_numbered_picks(name: str, expected: list[int]) -> None:
    from unirag.operators.node import parse_selection

    reply = (GOLDEN / "agent_select" / f"{name}.txt").read_bytes().decode("utf-8")
    aliases = [[f"e{i}|f{i}", f"Entity {i} related to Other {i}"] for i in range(30)]
    assert parse_selection(reply, aliases, 4) == expected
    assert parse_selection(reply, aliases[:2], 4) == [0, 1]  # two candidates: nothing past them
