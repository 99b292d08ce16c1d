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
#: The screen people read the page on most (the usage table and graph labels must work there).
LAPTOP = {"width": 1280, "height": 800}
#: A title that would run script if the page ever parsed server text as HTML.
EVIL_TITLE = '<img src=x onerror="window.injected=1">Evil title'


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server on the small corpus, the HotpotQA sample, one record with markup in its title;
    the kg, rkg and pg graphs and GraphRAG communities built."""
    tmp = tmp_path_factory.mktemp("web")
    corpus = small_corpus(tmp)
    (corpus / "evil.jsonl").write_text(json.dumps({"title": EVIL_TITLE, "text": "Markup is only text here."}) + "\n")
    with scripted_rag(tmp / "ws") as rag:
        rag.index([corpus, HOTPOT], graphs="kg,rkg,pg", indices="graphrag")
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


def tap(page: Any, element: str) -> None:
    """Tap the graph element the JS expression ``element`` names. The script returns nothing:
    returning the element (``emit`` is chainable) made Playwright serialise the whole Cytoscape
    core behind it, gigabytes of heap that crashed the tab."""
    page.evaluate(f"() => {{ ({element}).emit('tap'); }}")


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


def test_the_usage_table_fits_its_column(page: Any, base: str) -> None:
    """Issue 32: at 1280 px the table ran past its panel (the time column cut off)."""
    page.set_viewport_size(LAPTOP)
    open_view(page, base, "ask")
    page.fill("#ask-question", QUESTION)
    page.select_option("#ask-method", "vanilla")
    page.click("#ask-submit")
    page.wait_for_selector("#ask-answer[data-done=true]")
    fit = page.evaluate("""() => {
      const table = document.querySelector('#ask-usage table');
      const panel = table.closest('.panel');
      const box = panel.getBoundingClientRect();
      const right = box.right - parseFloat(getComputedStyle(panel).paddingRight);
      const cells = [...table.querySelectorAll('th, td')];
      return { right, viewport: window.innerWidth,
               heads: [...table.querySelectorAll('th')].map((th) => th.textContent),
               outside: cells.filter((c) => c.getBoundingClientRect().right > right + 0.5).map((c) => c.textContent),
               cut: cells.filter((c) => c.scrollWidth > c.clientWidth).map((c) => c.textContent) };
    }""")
    assert fit["heads"] == ["stage", "LLM calls", "tokens in", "tokens out", "embed calls", "time"]
    assert fit["outside"] == [] and fit["cut"] == [], fit
    assert fit["right"] <= fit["viewport"]
    shot(page, "02b-ask-usage-1280")


def test_a_cached_answer_says_so_next_to_its_time(page: Any, base: str) -> None:
    """The second ask of one question is answered from the response cache in milliseconds:
    the time shown must not pass for the model's."""
    question = "Which tower was finished in 1889 on the Champ de Mars?"
    open_view(page, base, "ask")
    page.select_option("#ask-method", "vanilla")
    statuses = []
    for _ in range(2):
        page.fill("#ask-question", question)
        page.click("#ask-submit")
        page.wait_for_selector("#ask-answer[data-done=true]")
        statuses.append(page.inner_text("#ask-status"))
    assert "cached" not in statuses[0]
    assert statuses[1].endswith("s (cached)"), statuses[1]
    assert "from the response cache" in page.inner_text("#ask-usage")


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
    tap(page, "window.uniragGraph.getElementById('paris')")
    page.wait_for_selector("#graph-details .community h3")
    details = page.inner_text("#graph-details")
    assert "Paris" in details and "graphrag, level" in details and "capital of France" in details
    shot(page, "07-graph-paris")
    page.click("#graph-details .passage-link")
    page.wait_for_selector("#passage-dialog[open]")
    page.wait_for_function("() => document.getElementById('passage-text').textContent.includes('Paris')")
    page.click("#passage-close")
    edge = page.evaluate("() => window.uniragGraph.edges()[0].id()")
    tap(page, f"window.uniragGraph.getElementById({json.dumps(edge)})")
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
    tap(page, f"window.uniragGraph.getElementById({json.dumps(centre)})")
    page.wait_for_selector("#graph-details .community h3")
    shot(page, "08-graph-hub")


def show_hub(page: Any, base: str) -> str:
    """The HotpotQA hub's 2-hop neighbourhood (54 nodes) coloured by graphrag level 1, at 1280 × 800."""
    hub = httpx.get(f"{base}/graph/kg", params={"limit": 1}).json()["nodes"][0]["name"]
    page.set_viewport_size(LAPTOP)
    open_view(page, base, "graph")
    page.wait_for_function("() => window.uniragGraph && window.uniragGraph.nodes().length > 0")
    page.select_option("#graph-hierarchy", "graphrag")
    page.wait_for_selector("#graph-level:not([hidden])")
    page.select_option("#graph-level", "1")
    page.fill("#graph-entity", hub)
    page.click("#graph-show")
    page.wait_for_function("(hub) => window.uniragGraph.nodes().some(n => n.data('label') === hub && n.data('centre'))",
                           arg=hub)
    return hub


#: Each node as Cytoscape draws it: the label it draws (empty: none) and its font size on screen.
DRAWN_LABELS = """() => window.uniragGraph.nodes().map((n) => ({
  id: n.id(), centre: !!n.data('centre'), degree: n.degree(false), width: n.width(),
  drawn: n.pstyle('label').strValue !== '', screen_px: parseFloat(n.renderedStyle('font-size')),
  min_zoomed: n.pstyle('min-zoomed-font-size').pfValue }))"""


def test_graph_labels_are_readable_at_the_default_zoom(page: Any, base: str) -> None:
    """Issue 32: the 54-node picture drew every name at ~5 px. Now a drawn label is 11 px or more
    on screen, the less-connected nodes' names wait for a zoom, and nodes are sized by degree."""
    show_hub(page, base)
    nodes = page.evaluate(DRAWN_LABELS)
    drawn = [node for node in nodes if node["drawn"]]
    assert len(nodes) > 40 and 5 <= len(drawn) < len(nodes) // 2
    assert all(node["screen_px"] >= 11 for node in drawn), drawn
    assert all(node["min_zoomed"] == 0 for node in nodes)  # Cytoscape's own cut-off hides nothing on its own
    assert next(node for node in nodes if node["centre"])["drawn"]
    hub_width = max(node["width"] for node in nodes)
    assert hub_width > 2 * min(node["width"] for node in nodes)
    assert next(node for node in nodes if node["centre"])["width"] == hub_width
    edges = page.evaluate("() => window.uniragGraph.edges().map(e => [e.data('label'), e.pstyle('label').strValue])")
    assert all(len(label) <= 24 for label, _ in edges) and not any(drawn_label for _, drawn_label in edges)
    shot(page, "08c-graph-hub-1280")
    page.evaluate("""() => { const cy = window.uniragGraph;
      cy.zoom({ level: cy.zoom() * 3, renderedPosition: { x: cy.width() / 2, y: cy.height() / 2 } }); }""")
    closer = page.evaluate(DRAWN_LABELS)
    assert len([node for node in closer if node["drawn"]]) > len(drawn)
    assert all(node["screen_px"] >= 11 for node in closer if node["drawn"])
    assert any(drawn for _, drawn in page.evaluate(
        "() => window.uniragGraph.edges().map(e => [e.id(), e.pstyle('label').strValue])"))
    shot(page, "08d-graph-hub-zoomed")


def test_the_legend_names_each_community_colour(page: Any, base: str) -> None:
    show_hub(page, base)
    page.wait_for_selector("#graph-legend .legend-entry")
    shown = page.evaluate("""() => { const by = {};
      window.uniragGraph.nodes().forEach((n) => { const c = n.data('raw').community || '';
        by[c] = by[c] || { colour: n.data('colour'), count: 0 }; by[c].count += 1; });
      return by; }""")
    entries = page.evaluate("""() => [...document.querySelectorAll('#graph-legend .legend-entry')].map((li) => ({
      id: li.dataset.community, title: li.querySelector('.legend-title').textContent,
      count: Number(li.querySelector('.legend-count').textContent),
      colour: getComputedStyle(li.querySelector('.swatch')).backgroundColor }))""")
    assert sorted(entry["id"] for entry in entries) == sorted(shown) and len(entries) > 2
    for entry in entries:
        assert entry["count"] == shown[entry["id"]]["count"]
        red, green, blue = (int(shown[entry["id"]]["colour"][i:i + 2], 16) for i in (1, 3, 5))
        assert entry["colour"] == f"rgb({red}, {green}, {blue})"
        if entry["id"]:
            title = httpx.get(f"{base}/communities/graphrag/{entry['id']}").json()["title"]
            assert entry["title"] == title
    assert "graphrag, level 1" in page.inner_text("#graph-legend")


def test_the_details_panel_follows_a_new_show(page: Any, base: str) -> None:
    """Issue 32: after a second Show the panel still described a node of the previous picture."""
    open_view(page, base, "graph")
    page.wait_for_function("() => window.uniragGraph && window.uniragGraph.nodes().length > 0")
    page.fill("#graph-entity", "Paris")
    page.click("#graph-show")
    page.wait_for_function("() => window.uniragGraph.getElementById('paris').length === 1")
    tap(page, "window.uniragGraph.getElementById('paris')")
    assert page.inner_text("#graph-details h2") == "Paris"
    hub = httpx.get(f"{base}/graph/kg", params={"limit": 1}).json()["nodes"][0]["name"]
    page.fill("#graph-entity", hub)
    page.click("#graph-show")
    page.wait_for_function("(hub) => window.uniragGraph.nodes().some(n => n.data('label') === hub && n.data('centre'))",
                           arg=hub)
    assert page.locator("#graph-details h2").count() == 0
    assert "Paris" not in page.inner_text("#graph-details")
    tap(page, "window.uniragGraph.nodes().filter(n => n.data('centre'))[0]")
    assert page.inner_text("#graph-details h2") == hub


def test_edges_carry_keywords_and_the_whole_relation_on_hover(page: Any, base: str) -> None:
    """rkg edges: a description sentence and keywords. The edge shows the keywords; the
    sentence is in the tooltip (a real mouse hover) and the details panel."""
    open_view(page, base, "graph")
    page.wait_for_function("() => window.uniragGraph && window.uniragGraph.nodes().length > 0")
    page.fill("#graph-entity", "Paris")
    page.select_option("#graph-type", "rkg")  # a change of graph shows it
    page.wait_for_function("() => window.uniragGraph.edges().some(e => e.data('raw').keywords)")
    edge = page.evaluate("""() => { const e = window.uniragGraph.edges()[0]; const at = e.renderedMidpoint();
      return { id: e.id(), label: e.data('label'), raw: e.data('raw'), x: at.x, y: at.y }; }""")
    assert edge["raw"]["description"] and edge["label"] != edge["raw"]["description"]
    assert edge["label"] == ", ".join(edge["raw"]["keywords"][:2]) and len(edge["label"]) <= 24
    canvas = page.locator("#graph-canvas").bounding_box()
    page.mouse.move(canvas["x"] + edge["x"], canvas["y"] + edge["y"])
    page.wait_for_selector("#graph-tip:not([hidden])")
    assert edge["raw"]["description"] in page.inner_text("#graph-tip")
    shot(page, "08e-graph-edge-hover")
    tap(page, f"window.uniragGraph.getElementById({json.dumps(edge['id'])})")
    details = page.inner_text("#graph-details")
    assert edge["raw"]["description"] in details and "keywords" in details


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
