"""The HTTP server over real HTTP: uvicorn on a free port around the scripted model.

Every route, its error bodies (one line, ``{"error": {"message", "type"}}``), auth,
traversal attempts, the SSE order, the upload -> job -> query -> delete cycle, the
OpenAI-compatible API through the official ``openai`` client, and the MCP tools
through the ``mcp`` package's own stdio client.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import N_DOCUMENTS, small_corpus
from server_harness import running_server, scripted_rag, wait_for_job

from unirag.server.settings import ServerSettings

pytest.importorskip("fastapi")
from unirag.server.api_docs import API_DOCS_ASSETS  # noqa: E402 (it imports fastapi)

QUESTION = "What is the capital of France?"
QUOKKA = "Which marsupial lives on Rottnest Island near Perth?"
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server on a workspace with the small corpus, the kg and pg graphs and GraphRAG communities."""
    tmp = tmp_path_factory.mktemp("served")
    with scripted_rag(tmp / "ws") as rag:
        rag.index(small_corpus(tmp), graphs="kg,pg", indices="graphrag")
        with running_server(rag, ServerSettings(max_upload_bytes=4096)) as url:
            yield url


@pytest.fixture
def client(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=30) as made:
        yield made


def assert_error(response: httpx.Response, status: int, contains: str = "") -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert "\n" not in error["message"] and error["type"] and contains in error["message"]
    return error


def sse_events(text: str) -> list[tuple[str | None, str]]:
    """(event name, data) of each frame."""
    events = []
    for frame in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        events.append((lines.get("event"), lines["data"]))
    return events




# -- query ------------------------------------------------------------------------------------------


def test_health_openapi_docs_methods_stats(client: httpx.Client) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/query", "/query/stream", "/documents", "/v1/chat/completions", "/graph/{graph_type}"} <= set(paths)
    assert "swagger" in client.get("/docs").text.lower()
    assert client.get("/openapi.json").json()["info"]["version"] == version("unirag")
    methods = {m["name"]: m for m in client.get("/methods").json()}
    assert "vanilla" in methods and "chunk_vectors" in methods["vanilla"]["requires"]
    stats = client.get("/stats").json()
    assert stats["documents"] == N_DOCUMENTS and "chunk_vectors" in stats["artifacts"]


def test_api_docs_load_nothing_from_elsewhere(client: httpx.Client) -> None:
    """Issue 31: FastAPI's /docs and /redoc load their scripts from a CDN, a blank page offline.
    Every script, style and icon they name is a path on this server, and it is served."""
    for page, assets in (("/docs", ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")),
                         ("/redoc", ("redoc.standalone.js", "favicon.png"))):
        html = client.get(page)
        assert html.status_code == 200, page
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ["']([^"']+)["']""", html.text)
        named = {a or b for a, b in urls}
        assert named and not any("//" in url for url in named), named
        for asset in assets:
            assert f"{API_DOCS_ASSETS}/{asset}" in named, (page, asset)
            served = client.get(f"{API_DOCS_ASSETS}/{asset}")
            assert served.status_code == 200 and len(served.content) > 1000, asset
    assert "img-src 'self' data:" in client.get("/redoc").headers["content-security-policy"]


def test_api_docs_assets_need_no_key_but_the_docs_and_host_guard_hold(tmp_path: Path) -> None:
    """The library files are key-less like the web page's; /docs, /redoc and the schema are not,
    and a Host this server is not reached by (DNS rebinding) is refused for the files too."""
    with scripted_rag(tmp_path / "ws") as rag, running_server(rag, ServerSettings(api_key="k3y")) as url:
        with httpx.Client(base_url=url, timeout=30) as bare:
            assert bare.get(f"{API_DOCS_ASSETS}/swagger-ui-bundle.js").status_code == 200
            for path in ("/docs", "/redoc", "/openapi.json"):
                assert_error(bare.get(path), 401, "API key")
            port = url.rsplit(":", 1)[1]
            assert_error(bare.get(f"{API_DOCS_ASSETS}/swagger-ui-bundle.js", headers={"Host": f"evil.example:{port}"}),
                         421, "evil.example")


def test_query_is_the_cli_json(client: httpx.Client) -> None:
    data = client.post("/query", json={"question": QUESTION}).json()
    assert data["answer"] == "paris" and data["context"][0]["kind"] == "chunk" and data["method"] == "vanilla"
    only = client.post("/query", json={"question": QUESTION, "top_k": 2, "retrieve_only": True}).json()
    assert len(only["context"]) == 2 and not only["answer"]


def test_query_errors_are_one_line_4xx(client: httpx.Client) -> None:
    assert_error(client.post("/query", json={"question": QUESTION, "method": "nope"}), 404, "unknown method 'nope'")
    assert_error(client.post("/query", json={"question": "   "}), 422, "question")
    assert_error(client.post("/query", json={"method": "vanilla"}), 422, "body.question")
    assert_error(client.post("/query", json={"question": QUESTION, "top_k": 0}), 422, "top_k")
    assert_error(client.post("/query", content=b"{not json", headers={"content-type": "application/json"}), 422)
    # a method is a shipped name, never a spec file on the server's disk
    assert_error(client.post("/query", json={"question": QUESTION, "method": "../../etc/passwd.yaml"}), 404)
    # an artifact not built, with building on: built first (the same answer as the CLI); see test_no_build for off
    assert client.post("/query", json={"question": QUESTION, "method": "hipporag"}).status_code == 200


def test_stream_sends_deltas_then_done(client: httpx.Client) -> None:
    with client.stream("POST", "/query/stream", json={"question": QUOKKA}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.read().decode())
    *deltas, (last, done) = events
    assert {name for name, _ in deltas} == {"delta"} and last == "done"
    text = "".join(json.loads(data)["text"] for _, data in deltas)
    result = json.loads(done)
    assert len(deltas) >= 1 and text == result["raw_answer"] and result["answer"] == "Quokka"
    assert_error(client.post("/query/stream", json={"question": QUOKKA, "method": "nope"}), 404)


# -- graphs, chunks, communities --------------------------------------------------------------------


def test_graph_pages_and_neighbourhoods(client: httpx.Client) -> None:
    page = client.get("/graph/kg", params={"limit": 3}).json()
    assert len(page["nodes"]) == 3 and page["total_nodes"] > 3 and page["next_offset"] == 3
    assert all("description" in node and "chunk_ids" in node for node in page["nodes"])
    around = client.get("/graph/kg", params={"entity": "Paris", "hops": 1}).json()
    names = {node["name"].lower() for node in around["nodes"]}
    assert "paris" in names and len(names) > 1 and around["nodes"][0]["hops"] == 0
    assert around["edges"] and all(edge["chunk_ids"] for edge in around["edges"])
    chunk_id = around["nodes"][0]["chunk_ids"][0]
    chunk = client.get(f"/chunks/{chunk_id}").json()
    assert "Paris" in chunk["text"] and chunk["title"] == "paris"
    pg = client.get("/graph/pg").json()
    assert pg["nodes"] and all(node["chunk_ids"] == [node["id"]] for node in pg["nodes"])
    assert_error(client.get("/graph/kg", params={"entity": "Atlantis"}), 404, "Atlantis")
    assert_error(client.get("/graph/kg", params={"hops": 9}), 422, "hops")
    assert_error(client.get("/graph/kg", params={"limit": 0}), 422, "limit")
    assert_error(client.get("/graph/nope"), 404, "unknown graph type")
    assert_error(client.get("/graph/..%2F..%2Fstore.sqlite"), 404)
    assert_error(client.get("/graph/kg", params={"entity": "../../etc/passwd"}), 404)
    assert_error(client.get("/chunks/..%2F..%2Fstore.sqlite"), 404)


def test_communities_are_paged_with_levels(client: httpx.Client) -> None:
    page = client.get("/communities/graphrag", params={"limit": 2}).json()
    assert page["total"] >= 1 and len(page["communities"]) <= 2
    first = page["communities"][0]
    assert {"title", "summary", "level", "members", "parent", "children"} <= set(first)
    level = client.get("/communities/graphrag", params={"level": first["level"]}).json()
    assert all(c["level"] == first["level"] for c in level["communities"])
    assert_error(client.get("/communities/archrag"), 404, "graphrag")
    assert_error(client.get("/communities/..%2F..%2Fetc"), 404)


def test_methods_come_grouped_in_the_readme_order(client: httpx.Client) -> None:
    from unirag.methods.spec import METHOD_GROUPS, builtin_methods

    listed = client.get("/methods").json()
    specs = builtin_methods()
    grouped = [name for group in METHOD_GROUPS for name in sorted(n for n, s in specs.items() if s.group == group)]
    assert sorted(grouped) == sorted(specs) and len(set(grouped)) == len(grouped)  # each once
    assert [m["name"] for m in listed] == grouped and listed[0]["group"] == "No retrieval"
    assert all(m["group"] == specs[m["name"]].group for m in listed)  # the group each spec names


def test_graph_search_and_communities_of_shown_nodes(client: httpx.Client) -> None:
    found = client.get("/graph/kg/search", params={"q": "par"}).json()["nodes"]
    assert found[0]["label"] == "Paris" and found[0]["degree"] >= 1
    assert client.get("/graph/kg/search", params={"q": "zzz"}).json()["nodes"] == []
    assert_error(client.get("/graph/kg/search"), 422, "q")
    around = client.get("/graph/kg", params={"entity": "Paris", "hierarchy": "graphrag"}).json()
    assert around["level"] in around["levels"] and {node["community"] for node in around["nodes"]} != {None}
    community_id = next(node["community"] for node in around["nodes"] if node["id"] == "paris")
    one = client.get(f"/communities/graphrag/{community_id}").json()
    assert "paris" in one["entity_ids"] and one["summary"] and one["level"] == around["level"]
    assert_error(client.get("/graph/kg", params={"entity": "Paris", "hierarchy": "archrag"}), 404, "graphrag")
    assert_error(client.get("/communities/graphrag/nope"), 404, "no community 'nope'")


def test_later_graph_pages_bring_their_edges_to_earlier_nodes(client: httpx.Client) -> None:
    whole = client.get("/graph/kg", params={"limit": 1000}).json()
    pages, offset = [], 0
    while offset is not None:
        page = client.get("/graph/kg", params={"limit": 3, "offset": offset}).json()
        pages.append(page)
        offset = page["next_offset"]
    edges = [(e["source"], e["target"]) for page in pages for e in page["edges"]]
    assert sorted(edges) == sorted((e["source"], e["target"]) for e in whole["edges"])  # each once, none lost


def test_the_web_page_is_served_without_a_key(tmp_path: Path) -> None:
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path))
        with running_server(rag, ServerSettings(api_key="k")) as url, httpx.Client(base_url=url) as bare:
            page = bare.get("/")
            assert page.status_code == 200 and '<script type="module" src="/static/js/app.js">' in page.text
            assert "script-src 'self'" in page.headers["content-security-policy"]
            script = bare.get("/static/js/app.js")
            assert script.status_code == 200 and "javascript" in script.headers["content-type"]
            assert bare.get("/static/vendor/cytoscape.esm.min.js").status_code == 200
            assert bare.get("/static/vendor/cytoscape.LICENSE.txt").status_code == 200
            assert bare.get("/static/..%2Fpage.py").status_code == 404  # a file beside static/: never served
            assert_error(bare.get("/static/nope.js"), 404)
            assert_error(bare.get("/methods"), 401)  # the data still wants the key


# -- corpus -----------------------------------------------------------------------------------------


def test_upload_job_query_delete(tmp_path: Path) -> None:
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path))
        with running_server(rag) as url, httpx.Client(base_url=url, timeout=30) as client:
            okapi = "Where does the okapi live?"
            assert client.post("/query", json={"question": okapi}).json()["answer"] != "Okapi"
            files = [("files", ("Okapi.txt", b"The okapi lives in the Congo rainforest.", "text/plain")),
                     ("files", ("more.jsonl", b'{"id": "t1", "title": "Tapir", "text": "The tapir lives in Brazil."}\n',
                                "application/json"))]
            accepted = client.post("/documents", files=files)
            assert accepted.status_code == 202 and accepted.json()["documents"] == 2
            job = wait_for_job(client, accepted.json()["job"]["id"])
            assert job["state"] == "done" and job["report"]["documents_added"] == 2, job
            assert job["progress"]["step"]
            docs = {doc["title"]: doc for doc in client.get("/documents").json()}
            assert {"Okapi", "Tapir"} <= set(docs)  # logical sources, never the temporary path
            assert docs["Okapi"]["sources"] == ["upload:Okapi.txt"]
            assert docs["Tapir"]["sources"] == ["upload:more.jsonl#t1"]
            assert client.post("/query", json={"question": okapi}).json()["answer"] == "Okapi"
            records = client.post("/documents", json=[{"title": "Kiwi", "text": "The kiwi lives in New Zealand."}])
            assert wait_for_job(client, records.json()["job"]["id"])["state"] == "done"
            removed = client.delete(f"/documents/{docs['Okapi']['id']}")
            assert removed.status_code == 202
            assert wait_for_job(client, removed.json()["job"]["id"])["report"]["documents_removed"] == 1
            assert "Okapi" not in {doc["title"] for doc in client.get("/documents").json()}
            answer = client.post("/query", json={"question": okapi}).json()
            assert all(item["source"] != "Okapi" for item in answer["context"])
            assert not list((tmp_path / "ws").glob(".upload-*"))  # the temporary upload folders are gone


def test_upload_refusals(client: httpx.Client) -> None:
    assert_error(client.post("/documents", files={"files": ("a.exe", b"MZ\x00\x00", "application/octet-stream")}),
                 415, "unsupported file type")
    assert_error(client.post("/documents", files={"files": ("a.txt", b"\x00\x01binary", "text/plain")}), 415, "binary")
    assert_error(client.post("/documents", files={"files": ("big.txt", b"x" * 5000, "text/plain")}), 413, "limit")
    assert_error(client.post("/documents", json={"records": []}), 400, "expected a JSON list")
    assert_error(client.post("/documents", json=[{"title": "no text"}]), 400, "'text' string")
    assert_error(client.post("/documents", content=b"hello", headers={"content-type": "text/plain"}), 415)
    # a record's "source" is a logical name: a path is refused, never resolved
    assert_error(client.post("/documents", json=[{"text": "Ostriches run fast.", "source": "/etc/passwd"}]), 400,
                 "absolute path")
    accepted = client.post("/documents", json=[{"text": "Ostriches run fast.", "source": "etc/passwd"}]).json()
    assert wait_for_job(client, accepted["job"]["id"])["state"] == "done"
    sources = [source for doc in client.get("/documents").json() for source in doc["sources"]]
    assert "upload:etc/passwd" in sources and not any(source.endswith("/etc/passwd") for source in sources)


def test_unknown_documents_and_jobs_are_404(client: httpx.Client) -> None:
    assert_error(client.delete("/documents/no-such-doc"), 404, "no document 'no-such-doc'")
    assert_error(client.delete("/documents/..%2F..%2Fetc%2Fpasswd"), 404, "../../etc/passwd")
    assert_error(client.delete("/documents/%2Fetc%2Fpasswd"), 404, "/etc/passwd")
    assert_error(client.get("/jobs/nope"), 404, "no job")


# -- auth, build off --------------------------------------------------------------------------------


def test_api_key_guards_every_route_but_health(tmp_path: Path) -> None:
    key = "s3cret-key-for-tests"
    log = tmp_path / "access.log"
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path))
        with running_server(rag, ServerSettings(api_key=key), log_path=log) as url:
            with httpx.Client(base_url=url, timeout=30) as bare:
                assert bare.get("/health").status_code == 200
                for method, path in (("GET", "/methods"), ("GET", "/documents"), ("GET", "/v1/models"),
                                     ("GET", "/openapi.json"), ("GET", "/graph/kg")):
                    assert_error(bare.request(method, path), 401, "API key")
                assert_error(bare.post("/query", json={"question": QUESTION}), 401)
                wrong = bare.get("/methods", headers={"Authorization": "Bearer wrong"})
                assert_error(wrong, 401) and wrong.headers["www-authenticate"] == "Bearer"
            with httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as keyed:
                assert keyed.post("/query", json={"question": QUESTION}).json()["answer"] == "paris"
    logged = log.read_text()
    assert "POST /query" in logged and key not in logged


def test_no_build_is_409_naming_the_command(tmp_path: Path) -> None:
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path))
        with running_server(rag, ServerSettings(build=False)) as url, httpx.Client(base_url=url) as client:
            error = assert_error(client.post("/query", json={"question": QUESTION, "method": "hipporag"}), 409,
                                 "unirag index")
            assert error["type"] == "workspace_not_ready"
            assert client.post("/query", json={"question": QUESTION}).json()["answer"] == "paris"


def test_a_paid_build_is_409_with_its_estimate_unless_build_paid(tmp_path: Path) -> None:
    from fakes import HashEmbedder, ScriptedChat

    from unirag.api import UniRAG

    chat = ScriptedChat()
    paid = {"chat.base_url": "http://127.0.0.1:9/v1", "chat.model": "paid", "graph.extractor": "llm"}
    with UniRAG(tmp_path / "ws", chat_backend=chat, embedding_backend=HashEmbedder(), **paid) as rag:
        rag.index(small_corpus(tmp_path))
        with running_server(rag) as url, httpx.Client(base_url=url, timeout=60) as client:
            before = chat.calls
            error = assert_error(client.post("/query", json={"question": QUESTION, "method": "hipporag"}), 409,
                                 "LLM calls")
            assert "--for hipporag" in error["message"] and chat.calls == before
            assert client.post("/query", json={"question": QUESTION}).json()["answer"] == "paris"  # nothing to build
        with running_server(rag, ServerSettings(build_paid=True)) as url, httpx.Client(base_url=url, timeout=60) as client:
            assert client.post("/query", json={"question": QUESTION, "method": "hipporag"}).status_code == 200
            assert chat.calls > before


# -- OpenAI-compatible API --------------------------------------------------------------------------


def test_openai_client_models_chat_and_stream(base: str) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused")
    assert "vanilla" in {model.id for model in client.models.list()}
    reply = client.chat.completions.create(model="vanilla", messages=[
        {"role": "system", "content": "be brief"}, {"role": "user", "content": QUESTION}])
    assert reply.choices[0].message.content == "paris" and reply.usage.total_tokens > 0
    assert reply.object == "chat.completion" and reply.model == "vanilla"
    stream = client.chat.completions.create(model="vanilla", stream=True, stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": QUOKKA}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Quokka" and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    with pytest.raises(openai.NotFoundError, match="unknown method"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": QUESTION}])
    with pytest.raises(openai.BadRequestError, match="no question"):
        client.chat.completions.create(model="vanilla", messages=[{"role": "assistant", "content": "hi"}])


def test_openai_stream_ends_with_done(client: httpx.Client) -> None:
    body = {"model": "vanilla", "stream": True, "messages": [{"role": "user", "content": [
        {"type": "text", "text": QUOKKA}]}]}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        frames = [data for _, data in sse_events(response.read().decode())]
    assert frames[-1] == "[DONE]" and json.loads(frames[0])["choices"][0]["delta"]["role"] == "assistant"


# -- MCP ----------------------------------------------------------------------------------------------


def test_mcp_tools_over_stdio(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path))

    async def session_calls() -> tuple[Any, set[str], Any, Any, Any, Any]:
        params = StdioServerParameters(command=sys.executable, args=[str(TESTS / "mcp_launcher.py"),
                                                                     str(tmp_path / "ws")],
                                       cwd=str(TESTS.parent))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            initialized = await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            answered = await session.call_tool("query", {"question": QUESTION})
            retrieved = await session.call_tool("retrieve", {"question": QUOKKA, "top_k": 2})
            listed = await session.call_tool("list_methods", {})
            wrong = await session.call_tool("query", {"question": QUESTION, "method": "nope"})
            return initialized, tools, answered, retrieved, listed, wrong

    initialized, tools, answered, retrieved, listed, wrong = asyncio.run(session_calls())
    assert initialized.server_info.version == version("unirag")  # was "" before issue 31
    assert tools == {"query", "retrieve", "list_methods", "add_text", "add_files", "delete_documents",
                     "list_documents", "stats"}  # the corpus tools: tests/test_mcp_corpus.py
    assert answered.structured_content["answer"] == "paris" and answered.structured_content["context"]
    citations = answered.structured_content["citations"]
    assert [c["index"] for c in citations] == list(range(1, len(citations) + 1))
    assert citations[0]["title"] == answered.structured_content["context"][0]["source"] and citations[0]["chunk_id"]
    context = retrieved.structured_content["context"]
    assert len(context) == 2 and context[0]["source"] == "Quokka" and "answer" not in retrieved.structured_content
    assert "vanilla" in json.dumps(listed.structured_content)
    assert wrong.is_error and "unknown method" in wrong.content[0].text
