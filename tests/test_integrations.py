"""The LangChain and LlamaIndex retrievers (unirag.integrations), with the real frameworks.

A workspace of the small corpus on the scripted model and hash embedder; its context comes
two ways: a ``UniRAG`` in this process, and a running ``unirag serve`` (uvicorn, real HTTP,
tests/server_harness.py) with an API key. Each document carries where it came from (kind,
chunk id, source, title, score, the operator that found it, the method).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import HashEmbedder, ScriptedChat, small_corpus
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode
from server_harness import running_server

from unirag import UniRAG
from unirag.errors import MethodError, UniragError
from unirag.integrations.langchain import UniragRetriever as LangChainRetriever
from unirag.integrations.llama_index import UniragRetriever as LlamaIndexRetriever
from unirag.integrations.source import API_KEY_ENV, ServerError
from unirag.server.settings import ServerSettings

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Where does the quokka live?"
KEY = "test-key-7c1d"
METADATA = {"kind", "id", "chunk_id", "chunk_ids", "source", "title", "score", "operator", "method", "provenance"}


@pytest.fixture(scope="module")
def rag(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UniRAG]:
    """The small corpus, indexed once for the module (the retrievers only read it)."""
    tmp = tmp_path_factory.mktemp("frameworks")
    made = UniRAG(tmp / "ws", chat_backend=ScriptedChat(), embedding_backend=HashEmbedder())
    made.index(small_corpus(tmp))
    yield made
    made.close()


@pytest.fixture(scope="module")
def server(rag: UniRAG) -> Iterator[str]:
    """``rag`` served over HTTP with an API key."""
    with running_server(rag, ServerSettings(api_key=KEY)) as url:
        yield url


def check_chunk_metadata(metadata: dict[str, object]) -> None:
    assert set(metadata) == METADATA
    assert metadata["kind"] == "chunk" and metadata["chunk_id"] == metadata["id"] == metadata["chunk_ids"][0]
    assert metadata["operator"] == "chunk.vdb" and metadata["method"] == "vanilla"
    assert str(metadata["source"]).endswith((".txt", ".jsonl", ".md")) and metadata["title"]
    assert isinstance(metadata["score"], float)


def test_langchain_in_process_documents_carry_their_provenance(rag: UniRAG) -> None:
    retriever = LangChainRetriever(rag=rag, method="vanilla", top_k=2)
    docs = retriever.invoke(QUESTION)
    assert len(docs) == 2 and all(isinstance(doc, Document) for doc in docs)
    for doc in docs:
        check_chunk_metadata(doc.metadata)
    assert "quokka" in " ".join(doc.page_content.lower() for doc in docs)
    expected = rag.query(QUESTION, "vanilla", top_k=2, retrieve_only=True).context
    assert [doc.metadata["id"] for doc in docs] == [item.id for item in expected]
    assert [doc.metadata["title"] for doc in docs] == [item.provenance["title"] for item in expected]
    assert [doc.metadata["score"] for doc in docs] == pytest.approx([item.score for item in expected], abs=1e-5)
    assert len(LangChainRetriever(rag=rag, method="vanilla", top_k=4).invoke(QUESTION)) == 4


def test_langchain_async_and_graph_kinds(rag: UniRAG) -> None:
    """``ainvoke`` goes through ``aquery``; a graph method's entities and relationships name
    the operator that found each and the passages they came from."""
    retriever = LangChainRetriever(rag=rag, method="lightrag", top_k=2)
    docs = asyncio.run(retriever.ainvoke("Where did Marie Curie work?"))
    found = {(doc.metadata["kind"], doc.metadata["operator"]) for doc in docs}
    method = next(info.name for info in rag.methods() if "lightrag" in (info.name, *info.aliases))
    assert {("entity", "node.vdb"), ("relationship", "relationship.onehop")} <= found
    for doc in docs:
        assert doc.metadata["method"] == method and doc.metadata["chunk_ids"]
        if doc.metadata["kind"] != "chunk":
            assert doc.metadata["chunk_id"] is None
    sync = retriever.invoke("Where did Marie Curie work?")
    assert [doc.metadata["id"] for doc in sync] == [doc.metadata["id"] for doc in docs]


def test_langchain_composes_in_an_lcel_chain(rag: UniRAG) -> None:
    def format_docs(docs: list[Document]) -> str:
        return "\n\n".join(f"[{doc.metadata['title']}] {doc.page_content}" for doc in docs)

    chain = LangChainRetriever(rag=rag, method="vanilla", top_k=2) | RunnableLambda(format_docs)
    text = chain.invoke(QUESTION)
    assert text.count("[") == 2 and "quokka" in text.lower()
    assert chain.batch([QUESTION, "What is the capital of France?"])[1].count("[") == 2


def test_llama_index_in_process_nodes_with_scores(rag: UniRAG) -> None:
    retriever = LlamaIndexRetriever(rag, method="vanilla", top_k=3)
    nodes = retriever.retrieve(QUESTION)
    assert len(nodes) == 3 and all(isinstance(node, NodeWithScore) for node in nodes)
    for node in nodes:
        assert isinstance(node.node, TextNode)
        check_chunk_metadata(node.node.metadata)
        assert node.score == node.node.metadata["score"]
        assert node.node.node_id == f"chunk:{node.node.metadata['id']}"
        shown = node.node.get_content(metadata_mode=MetadataMode.LLM)
        assert f"title: {node.node.metadata['title']}" in shown and "operator" not in shown
    assert sorted((n.score for n in nodes), reverse=True) == [n.score for n in nodes]
    again = asyncio.run(retriever.aretrieve(QUESTION))
    assert [n.node.node_id for n in again] == [n.node.node_id for n in nodes]


def test_unknown_method_and_bad_arguments_are_one_line(rag: UniRAG) -> None:
    with pytest.raises(MethodError) as caught:
        LangChainRetriever(rag=rag, method="no-such-method").invoke(QUESTION)
    assert "no-such-method" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(MethodError):
        LlamaIndexRetriever(rag, method="no-such-method").retrieve(QUESTION)
    with pytest.raises(ValueError, match="either rag="):
        LangChainRetriever(method="vanilla")
    with pytest.raises(ValueError, match="either rag="):
        LlamaIndexRetriever(rag, url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="top_k"):
        LlamaIndexRetriever(rag, top_k=0)


def test_remote_retrievers_over_http(rag: UniRAG, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same documents from a running server as in process; the key from the argument or
    the environment, and never in the retriever's repr."""
    local = [doc.metadata for doc in LangChainRetriever(rag=rag, method="vanilla", top_k=2).invoke(QUESTION)]
    remote = LangChainRetriever(url=server, api_key=KEY, method="vanilla", top_k=2)
    assert KEY not in repr(remote) and KEY not in str(remote.model_dump())
    docs = remote.invoke(QUESTION)
    assert [doc.metadata["id"] for doc in docs] == [m["id"] for m in local]
    for doc in docs:
        check_chunk_metadata(doc.metadata)
    assert [d.metadata["id"] for d in asyncio.run(remote.ainvoke(QUESTION))] == [m["id"] for m in local]
    monkeypatch.setenv(API_KEY_ENV, KEY)
    nodes = LlamaIndexRetriever(url=server + "/", method="vanilla", top_k=2).retrieve(QUESTION)
    assert [n.node.metadata["id"] for n in nodes] == [m["id"] for m in local]
    assert [n.node.metadata["id"] for n in asyncio.run(
        LlamaIndexRetriever(url=server, method="vanilla", top_k=2).aretrieve(QUESTION))] == [m["id"] for m in local]


def test_remote_errors_are_the_servers_one_line(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    with pytest.raises(ServerError, match=r"answered 401: missing or wrong API key") as caught:
        LangChainRetriever(url=server, method="vanilla").invoke(QUESTION)
    assert KEY not in str(caught.value)
    with pytest.raises(ServerError, match=r"answered 404: unknown method 'no-such-method'") as caught:
        LlamaIndexRetriever(url=server, api_key=KEY, method="no-such-method").retrieve(QUESTION)
    assert "\n" not in str(caught.value)
    with pytest.raises(ServerError, match="did not answer"):
        LangChainRetriever(url="http://127.0.0.1:9", method="vanilla", timeout=5).invoke(QUESTION)
    assert issubclass(ServerError, UniragError)


def test_frameworks_stay_out_of_unirag_and_a_missing_one_is_one_line() -> None:
    """``import unirag.integrations`` loads neither framework; without langchain-core (or
    llama-index-core) the module's import is one line naming the extra."""
    blocker = """
import sys
class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _Absent())
"""
    code = """
import importlib, sys
import unirag.integrations, unirag.integrations.source
assert not [m for m in sys.modules if m.split(".")[0] in ("langchain_core", "llama_index")]
for module in ("unirag.integrations.langchain", "unirag.integrations.llama_index"):
    try:
        importlib.import_module(module)
    except Exception as exc:
        print(type(exc).__name__, exc)
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", "BLOCKED = {'langchain_core', 'llama_index'}" + blocker + code],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "MissingExtraError the LangChain retriever (unirag.integrations.langchain) needs the optional package "
        "'langchain_core', which is not installed: pip install 'unirag[langchain]'",
        "MissingExtraError the LlamaIndex retriever (unirag.integrations.llama_index) needs the optional package "
        "'llama_index', which is not installed: pip install 'unirag[llama-index]'",
    ]


def test_an_item_whose_operator_names_none_is_credited_to_the_call(rag: UniRAG,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shipped operator names itself on its items; one that does not (a user's, written
    without ``operator=``) still gets the name it was called by, so no document's ``operator``
    is empty."""
    import dataclasses
    import functools

    from unirag.operators.registry import operator_registry

    registry = operator_registry()
    shipped = registry["chunk.vdb"]

    @functools.wraps(shipped.fn)  # its signature: the runner passes the call's top_k
    def anonymous(state: object, **params: object) -> list[object]:
        items = shipped.fn(state, **params)
        for item in items:
            item.operator = ""
        return items

    monkeypatch.setitem(registry, "chunk.vdb", dataclasses.replace(shipped, fn=anonymous))
    docs = LangChainRetriever(rag=rag, method="vanilla", top_k=2).invoke(QUESTION)
    assert [doc.metadata["operator"] for doc in docs] == ["chunk.vdb", "chunk.vdb"]
