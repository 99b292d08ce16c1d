"""The web page in a real browser: headless Chromium (Debian's) driven by Playwright
against a real uvicorn server on a workspace of the test data and the scripted model.

Each test loads a view the way a person does, acts in it, waits for what the
server sends back to be drawn, and saves a screenshot of every step
(tests/artifacts/web/, see ``web_browser.SHOTS``). Select them with ``-m browser``;
they run by default and skip only where Chromium or Playwright is not installed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes import small_corpus
from server_harness import running_server, scripted_rag, wait_for_job
from web_browser import VIEWPORT, chromium, shot

from unirag.server.settings import ServerSettings

SPECS = Path(__file__).resolve().parents[1] / "unirag" / "methods" / "specs"

pytest.importorskip("fastapi")
pytestmark = pytest.mark.browser

HOTPOT = Path(__file__).resolve().parent / "data" / "datasets" / "hotpotqa" / "hotpotqa_train_corpus.json"
QUESTION = "What is the capital of France?"
#: A title that would run script if the page ever parsed server text as HTML.
EVIL_TITLE = '<img src=x onerror="window.injected=1">Evil title'


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server on the small corpus, the HotpotQA sample, one record with markup in its title;
    the kg and pg graphs and GraphRAG communities built."""
    tmp = tmp_path_factory.mktemp("web")
    corpus = small_corpus(tmp)
    (corpus / "evil.jsonl").write_text(json.dumps({"title": EVIL_TITLE, "text": "Markup is only text here."}) + "\n")
    with scripted_rag(tmp / "ws") as rag:
        rag.index([corpus, HOTPOT], graphs="kg,pg", indices="graphrag")
        with running_server(rag) as url:
            yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh tab (own storage); a script error on the page fails the test."""
    context = browser.new_context(viewport=VIEWPORT)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.set_default_timeout(30_000)
    yield opened
    context.close()
    assert not errors, errors


def open_view(page: Any, base: str, view: str) -> None:
    page.goto(f"{base}/#{view}")
    page.wait_for_selector(f"body[data-view={view}]", state="attached")


# -- Ask ----------------------------------------------------------------------------------------------


def test_ask_streams_the_answer_and_opens_a_passage(page: Any, base: str) -> None:
    open_view(page, base, "ask")
    shot(page, "01-ask-empty")
    page.fill("#ask-question", QUESTION)
    page.select_option("#ask-method", "vanilla")
    page.click("#ask-submit")
    page.wait_for_selector("#ask-answer[data-done=true]")
    assert page.inner_text("#ask-answer") == "paris"
    assert int(page.get_attribute("#ask-answer", "data-deltas")) >= 1  # written as the deltas came
    items = page.locator("#ask-context .context-item")
    assert items.count() == 4
    first = items.nth(0)
    assert first.get_attribute("data-kind") == "chunk" and "chunk.vdb" in first.inner_text()
    assert "score" in first.inner_text()
    stages = page.locator("#ask-usage tbody tr").all_inner_texts()
    assert any(row.startswith("query.generate") for row in stages) and stages[-1].startswith("query")
    shot(page, "02-ask-answer")
    first.click()
    page.wait_for_selector("#passage-dialog[open]")
    page.wait_for_function("() => document.getElementById('passage-text').textContent.length > 0")
    assert "Paris is the capital of France" in page.inner_text("#passage-text")
    assert page.inner_text("#passage-title") == "paris"
    shot(page, "03-ask-passage")
    page.click("#passage-close")
    assert page.locator("#passage-dialog[open]").count() == 0


def test_the_method_picker_groups_all_methods(page: Any, base: str) -> None:
    open_view(page, base, "ask")
    served = httpx.get(f"{base}/methods").json()
    options = page.locator("#ask-method option")
    assert options.count() == len(served) == len(list(SPECS.glob("*.yaml")))
    groups = page.locator("#ask-method optgroup").evaluate_all("els => els.map(e => e.label)")
    assert groups[0] == "No retrieval" and "ArchRAG" in groups and len(groups) == len({m["group"] for m in served})
    page.select_option("#ask-method", "hipporag")
    assert "node.ppr" in page.inner_text("#ask-method-info")


def test_a_method_error_is_shown_in_one_line(page: Any, base: str) -> None:
    open_view(page, base, "ask")
    page.fill("#ask-question", "x" * 30)
    page.evaluate("""() => { const s = document.getElementById('ask-method');
                             s.append(new Option('nope', 'nope', true, true)); }""")
    page.click("#ask-submit")
    page.wait_for_selector("#banner:not([hidden])")
    assert "unknown method 'nope'" in page.inner_text("#banner")


# -- Compare ------------------------------------------------------------------------------------------


def test_compare_two_methods_side_by_side(page: Any, base: str) -> None:
    open_view(page, base, "compare")
    page.wait_for_selector("#compare-methods input[value=vanilla]")
    assert page.is_checked("input[value=vanilla]") and page.is_checked("input[value=bm25]")
    page.check("input[value=zeroshot]")
    page.uncheck("input[value=zeroshot]")
    assert page.is_enabled("#compare-submit")
    page.fill("#compare-question", QUESTION)
    shot(page, "04-compare-picker")
    page.click("#compare-submit")
    page.wait_for_function("() => document.querySelectorAll('.compare-col .answer[data-done=true]').length === 2")
    columns = page.locator(".compare-col")
    assert sorted(columns.evaluate_all("els => els.map(e => e.dataset.method)")) == ["bm25", "vanilla"]
    for index in range(2):
        meta = columns.nth(index).locator(".compare-meta").inner_text()
        assert "prompt" in meta and "tokens" in meta and "shared passages" in meta
        assert columns.nth(index).locator(".answer").inner_text() == "paris"
    # both put the Paris passage in their context: highlighted in each column
    shared = page.locator(".compare-col .context-item.shared")
    assert shared.count() >= 2 and "Paris is the capital" in shared.first.inner_text()
    assert page.locator(".compare-col .passage-link.shared").first.get_attribute("title").startswith("also retrieved")
    shot(page, "05-compare")


def test_compare_wants_two_to_six_methods(page: Any, base: str) -> None:
    open_view(page, base, "compare")
    page.wait_for_selector("#compare-methods input[value=vanilla]")
    page.uncheck("input[value=bm25]")
    assert not page.is_enabled("#compare-submit") and "choose 2 to 6" in page.inner_text("#compare-count")


# -- Graph --------------------------------------------------------------------------------------------


def rendered_nodes(page: Any) -> list[str]:
    return page.evaluate("() => window.uniragGraph.nodes().map(n => n.id())")


def test_graph_neighbourhood_communities_and_details(page: Any, base: str) -> None:
    open_view(page, base, "graph")
    page.wait_for_function("() => window.uniragGraph && window.uniragGraph.nodes().length > 0")
    hubs = rendered_nodes(page)
    total = httpx.get(f"{base}/stats").json()["graphs"]["kg"]["nodes"]
    assert 0 < len(hubs) <= 60 < total  # a page of the hubs, never the whole graph
    assert "of" in page.inner_text("#graph-status")
    assert page.locator("#graph-stale").count() == 0  # built on the current corpus: no warning
    shot(page, "06-graph-hubs")
    page.click("#graph-more")
    page.wait_for_function(f"() => window.uniragGraph.nodes().length > {len(hubs)}")

    page.fill("#graph-entity", "Christopher")
    page.wait_for_selector("#graph-suggestions option", state="attached")
    page.fill("#graph-entity", "Paris")
    page.select_option("#graph-hops", "2")
    page.click("#graph-show")
    page.wait_for_function("() => window.uniragGraph.getElementById('paris').length === 1")
    around = rendered_nodes(page)
    assert {"paris", "france"} <= set(around) and len(around) < len(hubs)
    assert page.evaluate("() => window.uniragGraph.edges().length") >= 1

    page.select_option("#graph-hierarchy", "graphrag")
    page.wait_for_selector("#graph-level:not([hidden])")
    page.wait_for_function("() => window.uniragGraph.nodes().some(n => n.data('raw').community)")
    colours = page.evaluate("() => window.uniragGraph.nodes().map(n => n.data('colour'))")
    assert len(set(colours)) == 1 and colours[0] != "#9aa5b1"  # Paris and France: one community, coloured
    page.evaluate("() => window.uniragGraph.getElementById('paris').emit('tap')")
    page.wait_for_selector("#graph-details .community h3")
    details = page.inner_text("#graph-details")
    assert "Paris" in details and "graphrag, level" in details and "capital of France" in details
    shot(page, "07-graph-paris")
    page.click("#graph-details .passage-link")
    page.wait_for_selector("#passage-dialog[open]")
    page.wait_for_function("() => document.getElementById('passage-text').textContent.includes('Paris')")
    page.click("#passage-close")
    edge = page.evaluate("() => window.uniragGraph.edges()[0].id()")
    page.evaluate(f"() => window.uniragGraph.getElementById({json.dumps(edge)}).emit('tap')")
    page.wait_for_function("() => document.getElementById('graph-details').textContent.includes('→')")


def test_graph_of_a_larger_neighbourhood(page: Any, base: str) -> None:
    """A hub of the HotpotQA sample: several communities, each its colour (the README's picture)."""
    hub = httpx.get(f"{base}/graph/kg", params={"limit": 1}).json()["nodes"][0]["name"]
    open_view(page, base, "graph")
    page.wait_for_function("() => window.uniragGraph && window.uniragGraph.nodes().length > 0")
    page.select_option("#graph-hierarchy", "graphrag")
    page.wait_for_selector("#graph-level:not([hidden])")
    page.select_option("#graph-level", "1")  # finer than level 0: the hub's neighbours split into several
    page.fill("#graph-entity", hub)
    page.click("#graph-show")
    page.wait_for_function("(hub) => window.uniragGraph.nodes().some(n => n.data('label') === hub && n.data('centre'))",
                           arg=hub)
    assert len(rendered_nodes(page)) > 5
    assert "level 1" in page.inner_text("#graph-status")
    assert len(set(page.evaluate("() => window.uniragGraph.nodes().map(n => n.data('colour'))"))) > 2
    centre = page.evaluate("() => window.uniragGraph.nodes().filter(n => n.data('centre'))[0].id()")
    page.evaluate(f"() => window.uniragGraph.getElementById({json.dumps(centre)}).emit('tap')")
    page.wait_for_selector("#graph-details .community h3")
    shot(page, "08-graph-hub")


def test_graph_view_says_when_the_graph_is_stale(page: Any, tmp_path: Path) -> None:
    """What a killed ``unirag delete`` leaves (documents gone, the graph built before): the graph
    view warns instead of showing the old graph as current."""
    from unirag.workspace import Workspace

    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path), graphs="kg")
        with running_server(rag) as url:
            other = Workspace.open(tmp_path / "ws")  # the delete's own process, killed after its first step
            try:
                other.corpus.delete_documents([httpx.get(f"{url}/documents").json()[0]["id"]])
            finally:
                other.close()
            open_view(page, url, "graph")
            page.wait_for_selector("#graph-stale")
            assert "stale: graph" in page.inner_text("#graph-status")
            shot(page, "08b-graph-stale")


# -- Documents, Stats ---------------------------------------------------------------------------------


def test_stats_counts_graphs_hierarchies_usage(page: Any, base: str) -> None:
    open_view(page, base, "stats")
    cards = page.inner_text("#stats-cards")
    assert "documents" in cards and "passages" in cards
    graphs = page.inner_text("#stats-graphs")
    assert "kg" in graphs and "pg" in graphs
    assert "graphrag" in page.inner_text("#stats-hierarchies")
    assert "index.embed_chunks" in page.inner_text("#stats-usage")
    assert "none" in page.inner_text("#stats-stale")
    shot(page, "09-stats")


def test_server_text_is_never_markup(page: Any, base: str) -> None:
    open_view(page, base, "documents")
    page.wait_for_selector("#doc-table tbody tr")
    assert EVIL_TITLE in page.inner_text("#doc-table")
    assert page.evaluate("() => window.injected === undefined && document.querySelectorAll('main img').length === 0")


def test_upload_with_progress_then_delete(page: Any, base: str, tmp_path: Path) -> None:
    open_view(page, base, "documents")
    page.wait_for_selector("#doc-table tbody tr")
    before = page.locator("#doc-table tbody tr").count()
    assert page.locator("#upload-job").is_hidden()
    shot(page, "10-documents")
    upload = tmp_path / "Okapi.txt"
    upload.write_text("The okapi lives in the Congo rainforest.\n", encoding="utf-8")
    page.set_input_files("#upload-files", str(upload))
    page.click("#upload-submit")
    page.wait_for_selector("#upload-job[data-state=done]", timeout=90_000)
    assert "done" in page.inner_text("#upload-state") and "documents added: 1" in page.inner_text("#upload-state")
    row = page.locator("#doc-table tbody tr", has_text="Okapi")
    row.wait_for()
    assert page.locator("#doc-table tbody tr").count() == before + 1
    shot(page, "11-documents-uploaded")
    delete = row.locator("button.danger")
    delete.click()
    assert delete.inner_text() == "Really delete?"
    delete.click()
    page.wait_for_function("() => !document.getElementById('doc-table').textContent.includes('Okapi')",
                           timeout=90_000)
    assert page.locator("#doc-table tbody tr").count() == before
    assert "documents removed: 1" in page.inner_text("#upload-state")
    shot(page, "12-documents-deleted")


def test_the_picker_accepts_every_format_and_an_upload_shows_its_source(page: Any, base: str, tmp_path: Path) -> None:
    """Issue 32: the picker's accept list is the server's (PDF included), a collection prefixes the
    upload's logical source, which the Documents view shows; uploading a changed file again replaces it."""
    from unirag.server.uploads import UPLOAD_SUFFIXES

    open_view(page, base, "documents")
    page.wait_for_function("() => document.getElementById('upload-files').accept.includes('.pdf')")
    assert page.get_attribute("#upload-files", "accept").split(",") == list(UPLOAD_SUFFIXES)
    before = page.locator("#doc-table tbody tr").count()
    for text in ("The aye-aye taps on wood to find grubs.\n", "The aye-aye lives only on Madagascar.\n"):
        upload = tmp_path / "aye-aye.md"
        upload.write_text(text, encoding="utf-8")
        page.fill("#upload-collection", "lemurs")
        page.set_input_files("#upload-files", str(upload))
        page.click("#upload-submit")
        page.wait_for_selector("#upload-job[data-state=done]", timeout=90_000)
        page.wait_for_function("() => !document.getElementById('upload-submit').disabled")
    row = page.locator("#doc-table tbody tr", has_text="upload:lemurs/aye-aye.md")
    row.wait_for()
    assert row.count() == 1 and page.locator("#doc-table tbody tr").count() == before + 1
    assert "documents removed: 1" in page.inner_text("#upload-state")  # the first version, replaced
    shot(page, "13-documents-upload-source")
    with httpx.Client(base_url=base, timeout=30) as client:
        removed = client.delete("/documents/upload:lemurs/aye-aye.md")
        assert removed.status_code == 202, removed.text
        assert wait_for_job(client, removed.json()["job"]["id"])["state"] == "done"


# -- API key ------------------------------------------------------------------------------------------


def test_the_page_asks_for_the_key_and_sends_it(browser: Any, tmp_path: Path) -> None:
    key = "web-page-key"
    with scripted_rag(tmp_path / "ws") as rag:
        rag.index(small_corpus(tmp_path))
        with running_server(rag, ServerSettings(api_key=key)) as url:
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            try:
                page.goto(f"{url}/#ask")  # the page itself needs no key
                page.wait_for_selector("#banner:not([hidden])")
                assert "needs an API key" in page.inner_text("#banner")
                shot(page, "13-key-needed")
                page.fill("#api-key", key)
                page.click("#key-form button")
                page.wait_for_selector("#ask-method option", state="attached")
                assert page.evaluate("() => sessionStorage.getItem('unirag.apiKey')") == key
                page.fill("#ask-question", QUESTION)
                page.click("#ask-submit")
                page.wait_for_selector("#ask-answer[data-done=true]")
                assert page.inner_text("#ask-answer") == "paris"
            finally:
                context.close()


# -- the API's own pages ------------------------------------------------------------------------------


def test_api_docs_and_redoc_render_with_no_network_but_the_server(browser: Any, tmp_path: Path) -> None:
    """Issue 31: ``/docs`` was blank offline (Swagger UI came from a CDN). Every request that does
    not go to the server is aborted and recorded; the pages must draw the API from local files."""
    with scripted_rag(tmp_path / "ws") as rag, running_server(rag) as url:
        context = browser.new_context(viewport=VIEWPORT)
        left: list[str] = []

        def only_the_server(route: Any) -> None:
            if route.request.url.startswith(url + "/"):
                route.continue_()
            else:
                left.append(route.request.url)
                route.abort()

        context.route("**/*", only_the_server)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.set_default_timeout(30_000)
        try:
            schema = httpx.get(f"{url}/openapi.json").json()
            operations = sum(len(methods) for methods in schema["paths"].values())
            page.goto(f"{url}/docs")
            page.wait_for_selector(".opblock-summary-path[data-path='/query']")
            assert page.locator(".opblock").count() == operations  # every operation, not an empty shell
            assert page.locator(".info .version").first.inner_text().strip() == schema["info"]["version"]
            shot(page, "20-api-docs-offline")
            page.goto(f"{url}/redoc")
            page.wait_for_selector("[data-section-id^='tag/query']", state="attached")
            shot(page, "21-api-redoc-offline")
        finally:
            context.close()
        assert not left, left
        assert not errors, errors
