"""Methods as data, run by the one runner: answers, context, usage, caching, specs, prompts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakes import HashEmbedder, ScriptedChat, long_text, make_settings, small_corpus

from unirag.config import Settings
from unirag.errors import MethodError, WorkspaceError
from unirag.generate.direct import extract_answer
from unirag.prompts.prompt import load_prompt
from unirag.index.vectors import HnswIndex
from unirag.llm.factory import build_stack
from unirag.methods.runner import MethodRunner, QueryResult
from unirag.methods.spec import (
    METHOD_GROUPS,
    OTHER_GROUP,
    SPEC_DIR,
    MethodSpec,
    builtin_methods,
    parse_spec,
    resolve_method,
)
from unirag.operators.registry import operator_registry
from unirag.pipeline import run_index
from unirag.text.tokenizer import get_tokenizer
from unirag.workspace import Workspace

QUESTION = "What is the capital of France?"
# shares a word with more than four passages, so BM25 (positive scores only) fills top_k
BROAD_QUESTION = "Which capital city, river, island or prize is famous?"


class Indexed:
    """An indexed workspace plus a way to make runners over it with fakes."""

    def __init__(self, root: Path, sources: list[Path], **overrides: Any) -> None:
        self.root = root
        self.overrides = overrides
        self.ws = Workspace.init(root)
        settings = self.settings()
        run_index(self.ws, [str(s) for s in sources], settings,
                  build_stack(settings, self.ws.cache(), chat=ScriptedChat(), embedder=HashEmbedder()))
        self.chat = ScriptedChat()
        self.embedder = HashEmbedder()

    def settings(self, **more: Any) -> Settings:
        return make_settings(self.root, **{**self.overrides, **more})

    def runner(self, settings: Settings | None = None) -> MethodRunner:
        settings = settings or self.settings()
        stack = build_stack(settings, self.ws.cache(), chat=self.chat, embedder=self.embedder)
        return MethodRunner(self.ws, settings, stack)

    def ask(self, method: str, question: str = QUESTION, **settings: Any) -> QueryResult:
        return self.runner(self.settings(**settings) if settings else None).run(resolve_method(method), question)


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[Indexed]:
    corpus = small_corpus(tmp_path)
    (corpus / "braces.txt").write_text(
        "Zorblax manuals print the tokens {question} and {context} literally, and also {unknown_field}."
    )
    data = Indexed(tmp_path / "ws", [corpus])
    yield data
    data.ws.close()


# -- the four plain methods: no graph, one model call ------------------------------------------


@pytest.mark.parametrize("method", ["zeroshot", "cot", "bm25", "vanilla"])
def test_plain_methods_answer_with_one_call_usage_and_timings(indexed: Indexed, method: str) -> None:
    result = indexed.ask(method)
    assert isinstance(result.answer, str) and result.answer.strip()
    assert result.method == method
    data = result.to_json()
    json.dumps(data)
    assert {"answer", "method", "context", "usage", "timings"} <= set(data)
    assert {"llm_calls", "prompt_tokens", "completion_tokens", "embedding_calls"} <= set(data["usage"])
    assert data["usage"]["llm_calls"] == 1
    assert data["usage"]["prompt_tokens"] > 0 and data["usage"]["completion_tokens"] > 0
    assert data["timings"]["total"] >= data["timings"]["generate"] >= 0
    for item in data["context"]:
        assert {"kind", "id", "text", "score", "source"} <= set(item)
    assert indexed.chat.calls == 1


@pytest.mark.parametrize("method", ["zeroshot", "cot"])
def test_no_retrieval_methods_have_no_context(indexed: Indexed, method: str) -> None:
    result = indexed.ask(method)
    assert result.context == []
    assert result.to_json()["usage"]["embedding_calls"] == 0
    assert indexed.embedder.calls == 0
    user = ScriptedChat.user_message(indexed.chat.requests[0])
    assert "Context:" not in user and QUESTION in user


def test_zeroshot_answer(indexed: Indexed) -> None:
    assert indexed.ask("zeroshot").answer == "scripted answer"


def test_cot_answer_is_taken_from_the_answer_line(indexed: Indexed) -> None:
    result = indexed.ask("cot")
    assert result.raw_answer == "Reasoning...\nAnswer: scripted"
    assert result.answer == "scripted"


@pytest.mark.parametrize(
    "raw,answer",
    [
        ("Answer: Paris", "Paris"),
        ("step 1\nstep 2\nFinal answer: 42 ", "42"),
        ("answer： Tokyo", "Tokyo"),
        ("Answer: first\nmore\nAnswer: second", "second"),
        ("  no marker here  ", "no marker here"),
    ],
)
def test_extract_answer(raw: str, answer: str) -> None:
    assert extract_answer(raw) == answer


@pytest.mark.parametrize("method", ["bm25", "vanilla"])
def test_bm25_and_vanilla_return_top_k_chunks_in_score_order(indexed: Indexed, method: str) -> None:
    result = indexed.ask(method, BROAD_QUESTION)
    top_k = Settings().retrieval.top_k
    assert len(result.context) == top_k
    doc_ids = indexed.ws.corpus.document_ids()
    for item in result.context:
        assert item.kind == "chunk"
        assert item.source
        assert item.provenance["doc_id"] in doc_ids
        assert item.text
    scores = [item.score for item in result.context]
    assert scores == sorted(scores, reverse=True)
    assert len({item.id for item in result.context}) == top_k
    # the scripted model answers with the first passage's title: context reached the prompt in order
    assert result.answer == result.context[0].source
    user = ScriptedChat.user_message(indexed.chat.requests[0])
    assert "Context:" in user and BROAD_QUESTION in user
    for item in result.context:
        assert item.text.strip() in user


def test_bm25_ranks_the_passage_with_the_rare_words_first(indexed: Indexed) -> None:
    result = indexed.ask("bm25", "Which archipelago is famous for cloves?")
    assert result.context[0].source == "Zanzibar"
    assert result.answer == "Zanzibar"


def test_vanilla_finds_exact_passage(indexed: Indexed) -> None:
    text = "The quokka is a small marsupial that lives on Rottnest Island near Perth."
    result = indexed.ask("vanilla", text)
    assert result.context[0].source == "Quokka"
    usage = result.to_json()["usage"]
    assert usage["embedding_calls"] == 1


def test_second_identical_query_is_served_from_the_cache(indexed: Indexed) -> None:
    first = indexed.ask("vanilla")
    second = indexed.ask("vanilla")
    assert first.usage()["llm_calls"] == 1 and first.usage()["cache_hits"] == 0
    assert second.usage()["llm_calls"] == 0 and second.usage()["cache_hits"] == 1
    assert second.usage()["embedding_calls"] == 0 and second.usage()["embedding_cache_hits"] == 1
    assert second.usage()["prompt_tokens"] == first.usage()["prompt_tokens"]
    assert second.answer == first.answer
    assert [i.id for i in second.context] == [i.id for i in first.context]
    assert indexed.chat.calls == 1


@pytest.mark.parametrize("method", ["bm25", "vanilla"])
def test_top_k_from_settings(indexed: Indexed, method: str) -> None:
    assert len(indexed.ask(method, BROAD_QUESTION, retrieval__top_k=2).context) == 2
    assert len(indexed.ask(method, BROAD_QUESTION, retrieval__top_k=1).context) == 1
    assert len(indexed.ask(method, BROAD_QUESTION, retrieval__top_k=5).context) == 5
    assert len(indexed.ask(method, BROAD_QUESTION, retrieval__top_k=50).context) <= 7  # never more than there are chunks


def test_runner_loads_indices_once(indexed: Indexed, monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[Path] = []
    original = HnswIndex.load.__func__  # type: ignore[attr-defined]

    def counting_load(cls: type, path: Path) -> HnswIndex:
        loads.append(path)
        return original(cls, path)

    monkeypatch.setattr(HnswIndex, "load", classmethod(counting_load))
    runner = indexed.runner()
    spec = resolve_method("vanilla")
    runner.run(spec, QUESTION)
    first = runner.resources._loaded["chunk_vectors"]
    runner.run(spec, "Where does the quokka live?")
    assert runner.resources._loaded["chunk_vectors"] is first
    assert len(loads) == 1
    assert "chunk_bm25" not in runner.resources._loaded  # lazy: vanilla never loads BM25


# -- method specs ---------------------------------------------------------------------------


def test_builtin_methods() -> None:
    methods = builtin_methods()
    assert {"zeroshot", "cot", "bm25", "vanilla", "hipporag", "lgraphrag", "ggraphrag", "cheaprag"} <= set(methods)
    for spec in methods.values():
        data = spec.to_json()
        assert data["pipeline"].endswith(f"generate:{spec.generation.mode}")
        assert isinstance(data["requires"], list) and spec.source


def test_every_shipped_spec_names_its_group_in_the_file() -> None:
    """Issue 30: a method's family is part of its spec (the web page groups by it); a shipped
    spec without one would fall into "Other", so each file must say which group it is in."""
    for path in sorted(SPEC_DIR.glob("*.yaml")):
        group = yaml.safe_load(path.read_text(encoding="utf-8")).get("group")
        assert group in METHOD_GROUPS, f"{path.name}: group {group!r}"
    assert {spec.group for spec in builtin_methods().values()} == set(METHOD_GROUPS)  # no empty group


def test_a_user_spec_without_a_group_is_listed_under_other(tmp_path: Path) -> None:
    assert resolve_method(str(write_spec(tmp_path, "mine.yaml"))).group == OTHER_GROUP


@pytest.mark.parametrize(
    "name,expected",
    [
        ("vanilla", "vanilla"), ("VANILLA", "vanilla"), ("VanillaRAG", "vanilla"), ("naive", "vanilla"),
        ("Zero-Shot", "zeroshot"), ("zero_shot", "zeroshot"), ("Chain-Of-Thought", "cot"), ("BM25RAG", "bm25"),
    ],
)
def test_resolve_by_alias_case_insensitively(name: str, expected: str) -> None:
    assert resolve_method(name).name == expected


def test_unknown_method_lists_known_ones() -> None:
    with pytest.raises(MethodError) as info:
        resolve_method("graphrag-nope")
    message = str(info.value)
    assert "graphrag-nope" in message and "\n" not in message
    for name in ("zeroshot", "cot", "bm25", "vanilla"):
        assert name in message


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(MethodError, match="does not exist"):
        resolve_method(str(tmp_path / "nope.yaml"))


def test_requires_is_derived_from_operators(tmp_path: Path) -> None:
    assert resolve_method("vanilla").requires() == ["chunk_vectors"]
    assert resolve_method("bm25").requires() == ["chunk_bm25"]
    assert resolve_method("zeroshot").requires() == []
    assert resolve_method("cot").requires() == []
    spec = write_spec(tmp_path, "hybrid.yaml", question="[embedding]", operators=(
        "  - op: chunk.vdb\n  - op: chunk.bm25\n  - op: chunk.vdb\n    params: {top_k: 1}\n"))
    assert parse_spec(spec).requires() == ["chunk_vectors", "chunk_bm25"]


def test_vdb_operators_need_what_their_query_param_embeds() -> None:
    """A VDB operator searching with LightRAG's keywords embeds them itself: the
    question's embedding would be wasted work."""
    spec = operator_registry()["node.vdb"]
    assert spec.needs_for({}) == ("embedding",)
    assert spec.needs_for({"query": "keywords_low"}) == ("keywords",)
    assert operator_registry()["relationship.vdb"].needs_for({"query": "keywords_high"}) == ("keywords",)
    for name in ("llightrag", "glightrag", "hlightrag"):
        assert resolve_method(name).question == ["keywords"]


def write_spec(directory: Path, file: str, name: str = "mine", question: str = "[]",
               operators: str = "  - op: chunk.bm25\n    params: {top_k: 1}\n", extra: str = "") -> Path:
    path = directory / file
    path.write_text(
        f"name: {name}\ntitle: Mine\ndescription: a test method\nsource: tests\nquestion: {question}\n"
        f"operators:\n{operators}{extra}generation: {{mode: direct, prompt: answer_with_context}}\n"
    )
    return path


def test_user_spec_file_runs(indexed: Indexed, tmp_path: Path) -> None:
    path = write_spec(tmp_path, "mine.yaml")
    spec = resolve_method(str(path))
    assert isinstance(spec, MethodSpec) and spec.name == "mine"
    result = indexed.runner().run(spec, "Which archipelago is famous for cloves?")
    assert result.method == "mine"
    assert len(result.context) == 1  # the spec's top_k beats the settings' 4
    assert result.context[0].source == "Zanzibar"
    assert result.answer == "Zanzibar"


def test_user_hybrid_spec_runs(indexed: Indexed, tmp_path: Path) -> None:
    path = write_spec(tmp_path, "hybrid.yml", question="[embedding]",
                      operators="  - op: chunk.vdb\n    params: {top_k: 2}\n  - op: chunk.bm25\n    params: {top_k: 3}\n")
    runner = indexed.runner()
    result = runner.run(resolve_method(str(path)), BROAD_QUESTION)
    operators = [item.operator for item in result.context]
    assert operators[:2] == ["chunk.vdb"] * 2
    # A chunk both operators found appears once, credited to the first operator.
    ids = [item.id for item in result.context]
    assert len(ids) == len(set(ids))
    bm25_ids = {cid for cid, _ in runner.resources.chunk_bm25.search(BROAD_QUESTION, 3)}
    assert set(ids) == set(ids[:2]) | bm25_ids


@pytest.mark.parametrize(
    "kwargs,needle",
    [
        ({"operators": "  - op: chunk.nonsense\n"}, "chunk.nonsense"),
        ({"operators": "  - op: chunk.bm25\n    params: {top_n: 3}\n"}, "top_n"),
        ({"extra": "colour: blue\n"}, "colour"),
        ({"operators": "  - op: chunk.vdb\n"}, "embedding"),
        ({"question": "[hyde]", "operators": "  - op: chunk.bm25\n"}, "hyde"),
        ({"question": "[embedding]", "operators": "  - op: node.vdb\n    params: {query: keywords_low}\n"},
         "keywords"),
        ({"operators": "  - op: chunk.bm25\n    top_k: 3\n"}, "top_k"),
        ({"extra": "group: Graphs\n"}, "Graphs"),
    ],
    ids=["unknown-operator", "unknown-param", "unknown-field", "missing-conversion", "unknown-conversion",
         "keyword-query-without-keywords", "param-outside-params", "unknown-group"],
)
def test_invalid_spec_files_name_the_file(tmp_path: Path, kwargs: dict[str, str], needle: str) -> None:
    path = write_spec(tmp_path, "broken.yaml", **kwargs)
    with pytest.raises(MethodError) as info:
        resolve_method(str(path))
    message = str(info.value)
    assert str(path) in message and needle in message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["name: [unclosed\n", "- a\n- list\n", "name: x\n"])
def test_unparseable_spec_files_name_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(MethodError) as info:
        parse_spec(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_spec_with_unknown_prompt(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("name: p\ntitle: P\ndescription: d\nsource: s\ngeneration: {prompt: nonexistent_prompt}\n")
    with pytest.raises(MethodError, match="nonexistent_prompt"):
        parse_spec(path)


# -- prompts and the context window ---------------------------------------------------------


def test_prompt_rendering_leaves_braces_in_data_intact() -> None:
    prompt = load_prompt("answer_with_context")
    messages = prompt.messages(question="Why {context}?", context="[1] (chunk: t)\nliteral {question} and {x}")
    user = messages[-1]["content"]
    assert "Why {context}?" in user
    assert "literal {question} and {x}" in user
    assert user.count("Why {context}?") == 1
    with pytest.raises(MethodError, match="context"):
        prompt.messages(question="q")


def test_braces_in_retrieved_context_reach_the_model_verbatim(indexed: Indexed) -> None:
    question = "What do Zorblax manuals print?"
    result = indexed.ask("bm25", question, retrieval__top_k=1)
    assert result.context[0].source == "braces"
    user = ScriptedChat.user_message(indexed.chat.requests[-1])
    assert "tokens {question} and {context} literally, and also {unknown_field}." in user
    assert user.count(question) == 1  # the question was filled once, not again inside the context


def test_context_is_truncated_to_fit_the_window(tmp_path: Path) -> None:
    corpus = tmp_path / "long"
    corpus.mkdir()
    for topic in ("glacier", "desert", "forest", "ocean"):
        (corpus / f"{topic}.txt").write_text(long_text(topic, 30) + " Shared keyword telescope.")
    data = Indexed(tmp_path / "ws", [corpus], chunking__size=300, chunking__overlap=0)
    try:
        settings = data.settings(chat__context_window=400, chat__max_tokens=64)
        result = data.runner(settings).run(resolve_method("bm25"), "Which story mentions the telescope?")
        assert len(result.context) == 4
        request = data.chat.requests[-1]
        assert request.max_tokens == 64
        tokenizer = get_tokenizer(settings.chunking.encoding)
        prompt_tokens = sum(tokenizer.count(m["content"]) for m in request.messages)
        assert prompt_tokens + request.max_tokens <= settings.chat.context_window
        user = ScriptedChat.user_message(request)
        assert "[1] (chunk: " in user and "Question: Which story mentions the telescope?" in user
        assert "[4]" not in user  # the later passages did not fit
        # with a big window every passage is included whole
        big = data.settings(chat__context_window=8000, chat__max_tokens=64)
        data.runner(big).run(resolve_method("bm25"), "Which story mentions the telescope?")
        user = ScriptedChat.user_message(data.chat.requests[-1])
        assert all(f"[{n}] (chunk: " in user for n in range(1, 5))
    finally:
        data.ws.close()


@pytest.mark.parametrize("dim", [64, 32], ids=["same-dim", "other-dim"])
def test_query_with_another_embedding_model_is_refused(indexed: Indexed, dim: int) -> None:
    """Vectors of another model are not comparable with the index: a clear error, not wrong neighbours."""
    other = HashEmbedder(name=f"other-model-{dim}", dim=dim)
    settings = indexed.settings()
    runner = MethodRunner(indexed.ws, settings, build_stack(settings, indexed.ws.cache(), chat=ScriptedChat(),
                                                            embedder=other))
    with pytest.raises(WorkspaceError) as info:
        runner.run(resolve_method("vanilla"), QUESTION)
    message = str(info.value)
    assert "hash-bow-64" in message and other.name in message and "\n" not in message


def test_query_on_unindexed_workspace(tmp_path: Path) -> None:
    ws = Workspace.init(tmp_path / "ws")
    try:
        settings = make_settings(ws.root)
        runner = MethodRunner(ws, settings, build_stack(settings, ws.cache(), chat=ScriptedChat(),
                                                        embedder=HashEmbedder()))
        for method in ("vanilla", "bm25"):
            with pytest.raises(WorkspaceError, match="unirag index"):
                runner.run(resolve_method(method), QUESTION)
        assert runner.run(resolve_method("zeroshot"), QUESTION).answer == "scripted answer"
    finally:
        ws.close()
