"""The Python API end to end on the scripted model and the hash embedder (tests/fakes.py).

The API is what applications (and the coming server) call, so these tests read
like its users: index a corpus, ask, stream, delete; the async twins under
``asyncio.run``, two queries at once included.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fakes import N_DOCUMENTS, HashEmbedder, ScriptedChat, small_corpus

from unirag import AnswerDelta, ContextItem, DocumentInfo, MethodInfo, QueryDone, QueryResult, StageUsage, UniRAG
from unirag.errors import SourceError, WorkspaceError
from unirag.llm.base import EmbeddingBatch

QUESTION = "What is the capital of France?"


def make_rag(root: Path, model: ScriptedChat | None = None, **overrides: object) -> UniRAG:
    return UniRAG(root, chat_backend=model or ScriptedChat(), embedding_backend=HashEmbedder(), **overrides)


@pytest.fixture
def chat() -> ScriptedChat:
    return ScriptedChat()


@pytest.fixture
def rag(tmp_path: Path, chat: ScriptedChat) -> UniRAG:
    """A workspace indexed from the small corpus (six documents)."""
    made = make_rag(tmp_path / "ws", chat)
    made.index(small_corpus(tmp_path))
    yield made
    made.close()


def deltas_and_result(events: list[object]) -> tuple[list[str], QueryResult]:
    *deltas, done = events
    assert all(isinstance(event, AnswerDelta) for event in deltas)
    assert isinstance(done, QueryDone)
    return [event.text for event in deltas], done.result


def write_spec(tmp_path: Path, mode: str) -> Path:
    """Vanilla retrieval with a two-stage generation mode: its final call is the one streamed."""
    path = tmp_path / f"{mode}.yaml"
    path.write_text(f"name: test-{mode}\ntitle: Test {mode}\ndescription: chunks, then {mode}.\nsource: tests\n"
                    f"question: [embedding]\noperators:\n  - op: chunk.vdb\ngeneration: {{mode: {mode}}}\n")
    return path


def test_index_documents_methods_stats(tmp_path: Path, rag: UniRAG) -> None:
    docs = rag.documents()
    assert len(docs) == N_DOCUMENTS and all(isinstance(doc, DocumentInfo) for doc in docs)
    assert {doc.title for doc in docs} >= {"Quokka", "Marie Curie"}
    assert json.loads(json.dumps([doc.to_json() for doc in docs]))[0]["chunks"] == 1
    methods = {info.name: info for info in rag.methods()}
    assert isinstance(methods["vanilla"], MethodInfo) and "chunk_vectors" in methods["vanilla"].requires
    stats = rag.stats()
    assert stats["documents"] == N_DOCUMENTS and "chunk_vectors" in stats["artifacts"]
    again = rag.index(small_corpus(tmp_path)).to_json()
    assert again["documents_added"] == 0 and again["already_indexed"] == N_DOCUMENTS


def test_index_in_memory_records(tmp_path: Path) -> None:
    with make_rag(tmp_path / "ws") as rag:
        report = rag.index(documents=[{"title": "Okapi", "text": "The okapi lives in the Congo.", "id": "o1"}])
        assert report.to_json()["documents_added"] == 1
        assert rag.query("Where does the okapi live?").answer == "Okapi"
        with pytest.raises(SourceError, match="'text' string"):
            rag.index(documents=[{"title": "no text"}])


def test_an_in_memory_record_given_again_replaces_its_earlier_text(tmp_path: Path) -> None:
    """A record with an id and no file (MCP add_text's source, the server's JSON records) is the
    newest version of that id; a record without an id, or with another, is left alone."""
    with make_rag(tmp_path / "ws") as rag:
        rag.index(documents=[{"title": "Okapi", "text": "The okapi lives in the Congo.", "id": "o1"},
                             {"title": "Kept", "text": "A text with no id stays."},
                             {"title": "Other", "text": "Another record.", "id": "o2"}])
        report = rag.index(documents=[{"title": "Okapi", "text": "The okapi is a forest giraffe.", "id": "o1"}])
        assert report.to_json()["documents_removed"] == 1
        docs = {doc.title: doc.sources for doc in rag.documents()}
        assert docs == {"Okapi": ["#o1"], "Kept": [""], "Other": ["#o2"]}
        assert "forest giraffe" in rag.query("What is the okapi?", retrieve_only=True).context[0].text


def test_query_has_answer_context_and_usage(rag: UniRAG) -> None:
    result = rag.query(QUESTION)
    assert isinstance(result, QueryResult) and result.answer == "paris"
    assert result.context and isinstance(result.context[0], ContextItem) and result.context[0].source == "paris"
    assert result.usage()["llm_calls"] == 1
    assert isinstance(result.ledger.total(), StageUsage)
    data = result.to_json()
    assert data["answer"] == "paris" and data["context"][0]["kind"] == "chunk" and "refreshed" not in data
    assert len(rag.query(QUESTION, top_k=2, retrieve_only=True).context) == 2


def test_stream_yields_the_answer_in_order_then_the_result(rag: UniRAG, chat: ScriptedChat) -> None:
    deltas, result = deltas_and_result(list(rag.stream("Which marsupial lives on Rottnest Island near Perth?")))
    assert deltas == ["Quo", "kka"] and "".join(deltas) == result.raw_answer == "Quokka"
    assert result.answer == "Quokka" and result.context and result.usage()["llm_calls"] == 1
    assert chat.streamed == 1
    # asked again: the cached reply comes back as one chunk, charged as a cache hit
    deltas, again = deltas_and_result(list(rag.stream("Which marsupial lives on Rottnest Island near Perth?")))
    assert deltas == ["Quokka"] and again.usage()["cache_hits"] == 1 and chat.streamed == 1


@pytest.mark.parametrize("mode", ["map_reduce", "adaptive_filter"])
def test_two_stage_modes_stream_their_final_call(tmp_path: Path, rag: UniRAG, chat: ScriptedChat, mode: str) -> None:
    spec = write_spec(tmp_path, mode)
    deltas, result = deltas_and_result(list(rag.stream(QUESTION, str(spec))))
    final_stage = "query.reduce" if mode == "map_reduce" else "query.merge"
    assert chat.streamed == 1 and chat.requests[-1].stage == final_stage  # the map / filter calls were not streamed
    assert "".join(deltas) == result.raw_answer and len(deltas) > 1
    assert result.answer == rag.query(QUESTION, str(spec)).answer  # streamed or not, the same answer


def test_delete_then_query(rag: UniRAG) -> None:
    quokka = next(doc for doc in rag.documents() if doc.title == "Quokka")
    report = rag.delete(quokka.id)
    assert report.documents_removed == 1 and len(rag.documents()) == N_DOCUMENTS - 1
    assert all(item.source != "Quokka" for item in rag.query("Which marsupial lives on Rottnest Island near Perth?").context)
    with pytest.raises(SourceError, match="nothing was deleted"):
        rag.delete(["no-such-document"])


def test_async_twins(tmp_path: Path, chat: ScriptedChat) -> None:
    chat.delay = 0.05  # two queries at once overlap in the model call

    async def main() -> tuple[list[QueryResult], list[object], int]:
        async with make_rag(tmp_path / "ws", chat) as rag:
            await rag.aindex(small_corpus(tmp_path))
            results = await asyncio.gather(rag.aquery(QUESTION), rag.aquery("Where is Tokyo, the capital of Japan?"))
            events = [event async for event in rag.astream("Which marsupial lives on Rottnest Island near Perth?")]
            quokka = next(doc for doc in rag.documents() if doc.title == "Quokka")
            removed = (await rag.adelete([quokka.id])).documents_removed
        return list(results), events, removed

    results, events, removed = asyncio.run(main())
    assert [result.answer for result in results] == ["paris", "tokyo"]
    assert chat.max_in_flight == 2
    deltas, result = deltas_and_result(events)
    assert deltas == ["Quo", "kka"] and result.answer == "Quokka" and result.usage()["llm_calls"] == 1
    assert removed == 1


def test_async_query_on_a_second_event_loop(rag: UniRAG) -> None:
    """Each ``asyncio.run`` is a new loop: the async client of the first must not be reused."""
    first = asyncio.run(rag.aquery(QUESTION))
    second = asyncio.run(rag.aquery("Where is Tokyo, the capital of Japan?"))
    assert (first.answer, second.answer) == ("paris", "tokyo")


def test_settings_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "unirag.yaml").write_text("retrieval: {top_k: 3}\nconcurrency: 2\nchat: {max_tokens: 100}\n")
    monkeypatch.setenv("UNIRAG_CONCURRENCY", "5")
    with make_rag(root) as rag:
        assert (rag.settings.retrieval.top_k, rag.settings.concurrency, rag.settings.chat.max_tokens) == (3, 5, 100)
    with make_rag(root, concurrency=7, chat={"max_tokens": 64}, **{"retrieval.top_k": 9}) as rag:
        assert (rag.settings.retrieval.top_k, rag.settings.concurrency, rag.settings.chat.max_tokens) == (9, 7, 64)
    with make_rag(root, settings=rag.settings, retrieval__top_k=1) as rag:
        assert (rag.settings.retrieval.top_k, rag.settings.concurrency) == (1, 7)


def test_missing_workspace_without_create(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="no unirag workspace"):
        UniRAG(tmp_path / "absent", create=False)
    assert not (tmp_path / "absent").exists()


def test_import_unirag_loads_nothing_heavy() -> None:
    code = ("import sys, unirag; heavy = [m for m in ('numpy', 'httpx', 'onnxruntime', 'pydantic', 'unirag.api') "
            "if m in sys.modules]; print(heavy); assert unirag.UniRAG.__name__ == 'UniRAG'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


class GatedEmbedder(HashEmbedder):
    """Blocks every embedding call after ``open_calls`` until ``gate`` is set: an index job that takes its time."""

    def __init__(self, open_calls: int) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.open_calls = open_calls

    def embed(self, texts: list[str], stage: str = "embed") -> EmbeddingBatch:
        if self.calls >= self.open_calls:
            self.entered.set()
            assert self.gate.wait(30), "the test never opened the gate"
        return super().embed(texts, stage)


def test_stale_while_writing_answers_during_another_writers_job(tmp_path: Path) -> None:
    """A reader answers from the built artifacts while a writer on the same workspace indexes,
    then switches to the new artifacts once the writer is done."""
    root, okapi = tmp_path / "ws", "Where does the okapi live in the Congo?"
    with make_rag(root) as setup:
        setup.index(small_corpus(tmp_path))
    embedder = GatedEmbedder(open_calls=0)
    reader = UniRAG(root, chat_backend=ScriptedChat(), embedding_backend=HashEmbedder(), stale_while_writing=True,
                    **{"retrieval.build_wait": 0})
    writer = UniRAG(root, chat_backend=ScriptedChat(), embedding_backend=embedder)
    try:
        assert reader.query(QUESTION).answer == "paris"
        record = {"title": "Okapi", "text": "The okapi lives in the Congo."}
        job = threading.Thread(target=writer.index, kwargs={"documents": [record]})
        job.start()
        assert embedder.entered.wait(30)
        assert writer.workspace.being_written() and reader.workspace.being_written()
        during = reader.query(okapi)  # no wait (build_wait 0 would fail one), no Okapi yet
        assert during.answer != "Okapi" and not during.refreshed
        assert any("older corpus" in warning and "chunk_vectors" in warning for warning in during.warnings)
        with make_rag(root, **{"retrieval.build_wait": 0}) as plain, pytest.raises(WorkspaceError, match="another"):
            plain.query(okapi)  # without the option a query wants the stale artifacts refreshed first
        embedder.gate.set()
        job.join(30)
        assert not reader.workspace.being_written()
        assert reader.query(okapi).answer == "Okapi"
    finally:
        embedder.gate.set()
        writer.close()
        reader.close()


def test_every_exported_class_is_exported_under_its_own_name() -> None:
    """Issue 30: ``from unirag import X`` gives a class whose ``__name__`` is X, so reprs,
    tracebacks and type hints name what a user imported (``Usage`` was ``StageUsage``)."""
    import unirag

    classes = {name: getattr(unirag, name) for name in unirag.__all__ if isinstance(getattr(unirag, name), type)}
    assert {"IndexReport", "DeleteReport", "StageUsage"} <= set(classes)
    assert {name: cls.__name__ for name, cls in classes.items()} == {name: name for name in classes}
