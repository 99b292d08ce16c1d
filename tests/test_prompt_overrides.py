"""Issue 17 conventions: prompts a workspace or a method spec supplies, answer style and language,
entity types. Each must reach the prompt the model sees and the cache key of the reply."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import HashEmbedder, ScriptedChat, make_settings, small_corpus

from unirag import UniRAG
from unirag.errors import ConfigError, MethodError
from unirag.graph.extract_llm import LlmExtractor
from unirag.llm.base import ChatRequest
from unirag.methods.spec import resolve_method
from unirag.prompts.answer_style import answer_prompt
from unirag.prompts.prompt import PromptLibrary, load_prompt

QUESTION = "What is the capital of France?"
OWN_ANSWER = """name: answer_with_context
version: 7
user: |
  Our own wording. Passages:
  {context}
  Q: {question}
"""


def final_request(chat: ScriptedChat) -> ChatRequest:
    return next(r for r in reversed(chat.requests) if r.stage == "query.generate")


def user_text(request: ChatRequest) -> str:
    return ScriptedChat.user_message(request)


@pytest.fixture
def indexed(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    with UniRAG(root, chat_backend=ScriptedChat(), embedding_backend=HashEmbedder()) as rag:
        rag.index(small_corpus(tmp_path))
    return root


def ask(root: Path, method: str = "vanilla", **overrides: object) -> ScriptedChat:
    chat = ScriptedChat()
    with UniRAG(root, chat_backend=chat, embedding_backend=HashEmbedder(), **overrides) as rag:
        rag.query(QUESTION, method=method)
    return chat


def test_workspace_prompt_shadows_the_packaged_one_with_its_own_cache_version(indexed: Path) -> None:
    packaged = final_request(ask(indexed))
    (indexed / "prompts").mkdir()
    (indexed / "prompts" / "answer_with_context.yaml").write_text(OWN_ANSWER)
    shadowed = final_request(ask(indexed))
    assert "Our own wording" in user_text(shadowed) and "Our own wording" not in user_text(packaged)
    assert shadowed.prompt_version.startswith("answer_with_context@7+")
    assert shadowed.prompt_version != packaged.prompt_version
    assert shadowed.cache_key("m") != packaged.cache_key("m")
    # An edit of the override (same version string) still changes the key: the text is hashed.
    (indexed / "prompts" / "answer_with_context.yaml").write_text(OWN_ANSWER.replace("Our own", "Edited"))
    edited = final_request(ask(indexed))
    assert "Edited wording" in user_text(edited) and edited.prompt_version != shadowed.prompt_version


def test_override_of_an_index_prompt_renames_the_extractor_and_enters_fingerprints(tmp_path: Path) -> None:
    settings = make_settings(graph__extractor="llm").graph
    plain = LlmExtractor(ScriptedChat(), settings)
    folder = tmp_path / "prompts"
    folder.mkdir()
    packaged = load_prompt("extract_graph")
    (folder / "extract_graph.yaml").write_text(
        f"name: extract_graph\nversion: mine\nsystem: |\n  Extract well.\nuser: |\n{_indent(packaged.user)}")
    library = PromptLibrary(folder)
    own = LlmExtractor(ScriptedChat(), settings, prompts=library)
    assert own.name != plain.name  # stored extractions of the packaged prompt are not reused
    assert library.overridden("extract_graph", "community_report") == {
        "extract_graph": library.load("extract_graph").cache_version}
    assert PromptLibrary().overridden("extract_graph") == {}


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())


def test_spec_names_a_prompt_file_relative_to_itself(indexed: Path, tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "my_answer.yaml").write_text("user: |\n  Spec wording. {context}\n  Question: {question}\n")
    spec = folder / "mine.yaml"
    spec.write_text("name: mine\ntitle: Mine\ndescription: vanilla with my prompt.\nsource: tests\n"
                    "question: [embedding]\noperators:\n  - op: chunk.vdb\n"
                    "generation: {prompt: ./my_answer.yaml}\n")
    request = final_request(ask(indexed, method=str(spec)))
    assert "Spec wording" in user_text(request) and request.prompt_version.startswith("my_answer@user+")


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("system: only\n", "needs a 'user' template"),
    ("user: |\n  {question} {colour}\n", "asks for colour"),
    ("user: [unclosed\n", "cannot read it"),
])
def test_a_bad_prompt_file_in_a_spec_is_one_line_naming_it(tmp_path: Path, content: str | None, message: str) -> None:
    prompt = tmp_path / "answer.yaml"
    if content is not None:
        prompt.write_text(content)
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: s\ntitle: S\ndescription: d.\nsource: t\nquestion: [embedding]\n"
                    "operators:\n  - op: chunk.vdb\ngeneration: {prompt: answer.yaml}\n")
    with pytest.raises(MethodError) as caught:
        resolve_method(str(spec))
    text = str(caught.value)
    assert "\n" not in text and message in text and str(spec) in text
    if content is None or "cannot" in message or "user" in message:
        assert str(prompt) in text


def test_style_picks_the_style_file_and_short_keeps_the_packaged_prompt(indexed: Path) -> None:
    short = final_request(ask(indexed))
    assert short.prompt_version == load_prompt("answer_with_context").cache_version  # today's prompt, unchanged
    assert "a few words" in user_text(short)
    paragraph = final_request(ask(indexed, generate={"style": "paragraph"}))
    report = final_request(ask(indexed, generate={"style": "report"}))
    assert paragraph.prompt_version.startswith("answer_with_context_paragraph@")
    assert report.prompt_version.startswith("answer_with_context_report@")
    assert "a few words" not in user_text(paragraph) and "## " in user_text(report)
    assert len({short.cache_key("m"), paragraph.cache_key("m"), report.cache_key("m")}) == 3


def test_style_reaches_map_reduce_and_adaptive_filter_final_prompts() -> None:
    library = PromptLibrary()
    for name in ("reduce_answer", "merge_points", "zeroshot"):
        assert answer_prompt(library, name, "paragraph").name == f"{name}_paragraph"
        assert answer_prompt(library, name, "report").name == f"{name}_report"
        assert answer_prompt(library, name, "short") == load_prompt(name)
    assert answer_prompt(library, "cot", "report") == load_prompt("cot")  # no variant: its own wording


def test_language_adds_one_sentence_and_changes_the_key(indexed: Path) -> None:
    plain = final_request(ask(indexed))
    french = final_request(ask(indexed, generate={"language": "French"}))
    assert "in French" in user_text(french) and "French" not in user_text(plain)
    assert french.prompt_version != plain.prompt_version and french.cache_key("m") != plain.cache_key("m")
    with pytest.raises(ConfigError):
        make_settings(generate__language="{question}")


def test_entity_types_reach_the_extraction_prompt_and_the_extractor_name() -> None:
    default = LlmExtractor(ScriptedChat(), make_settings().graph)
    mine = LlmExtractor(ScriptedChat(), make_settings(graph__entity_types=["protein", "gene"]).graph)
    assert "protein, gene" in mine.instruction_messages()[-1]["content"]
    assert "protein" not in default.instruction_messages()[-1]["content"]
    assert mine.name != default.name
    with pytest.raises(ConfigError):
        make_settings(graph__entity_types=[])
