// Graph: a k-hop neighbourhood of one entity (or the best-connected nodes), a page at a
// time from GET /graph/{type} (never the whole graph), drawn with Cytoscape.js; nodes
// coloured by their community in a chosen hierarchy; details and passages on click.

import cytoscape from "../vendor/cytoscape.esm.min.js";
import { getJSON, segment } from "./api.js";
import { $, el, number, replace } from "./dom.js";
import { passageButtons } from "./passages.js";

const PAGE = 60;
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
  "#9c755f", "#86bcb6", "#d37295", "#a0cbe8"];
const NO_COMMUNITY = "#9aa5b1";

// `asked` counts requests: an answer to an older one than the last (a quick second click) is dropped.
const view = { cy: null, query: null, next: null, colours: new Map(), hierarchiesLoaded: false, asked: 0 };

function renderer() {
  if (view.cy) return view.cy;
  view.cy = cytoscape({
    container: $("graph-canvas"),
    minZoom: 0.2, maxZoom: 1.6,
    style: [
      { selector: "node", style: {
        "background-color": "data(colour)", label: "data(label)", "font-size": 13, color: "#1f2933",
        "min-zoomed-font-size": 6, "text-outline-color": "#ffffff", "text-outline-width": 2,
        "text-valign": "bottom", "text-margin-y": 3, width: "data(size)", height: "data(size)",
        "text-wrap": "ellipsis", "text-max-width": 120, "border-width": 1, "border-color": "#ffffff" } },
      { selector: "node[?centre]", style: { "border-width": 3, "border-color": "#1f2933" } },
      { selector: "node:selected", style: { "border-width": 3, "border-color": "#d64545" } },
      { selector: "edge", style: {
        width: 1.5, "line-color": "#c3cad3", "curve-style": "bezier", label: "data(label)", "font-size": 10,
        "min-zoomed-font-size": 8,
        color: "#52606d", "text-rotation": "autorotate", "text-background-color": "#ffffff",
        "text-background-opacity": 0.8, "text-background-padding": 1 } },
      { selector: "edge:selected", style: { "line-color": "#d64545", width: 3 } },
    ],
  });
  view.cy.on("tap", "node", (event) => nodeDetails(event.target.data("raw")));
  view.cy.on("tap", "edge", (event) => edgeDetails(event.target.data("raw")));
  window.uniragGraph = view.cy; // the browser tests read the rendered nodes from here
  return view.cy;
}

function colourOf(community) {
  if (!community) return NO_COMMUNITY;
  if (!view.colours.has(community)) view.colours.set(community, PALETTE[view.colours.size % PALETTE.length]);
  return view.colours.get(community);
}

function label(node) {
  return String(node.name || node.title || node.id);
}

function elementsOf(page) {
  const nodes = page.nodes.map((node) => ({ group: "nodes", data: {
    id: node.id, label: label(node), raw: node, centre: node.hops === 0,
    colour: colourOf(node.community), size: node.hops === 0 ? 30 : 20 } }));
  const edges = page.edges.map((edge, i) => ({ group: "edges", data: {
    id: `e:${page.offset}:${i}:${edge.source}->${edge.target}`, source: edge.source, target: edge.target,
    label: edge.relation || "", raw: edge } }));
  return [...nodes, ...edges];
}

function status(page, cy) {
  const around = page.entity ? `around ${page.entity} (${page.hops} hops)` : "best-connected nodes";
  const hierarchy = page.hierarchy ? ` · coloured by ${page.hierarchy} level ${page.level}` : "";
  replace($("graph-status"), `${page.type}: ${cy.nodes().length} of ${number(page.total_nodes)} nodes ${around}, `,
    `${cy.edges().length} edges${hierarchy}`, staleNote(page));
}

// The server flags what it shows when the corpus changed after it was built (a killed index
// or delete): say so rather than show deleted documents' entities as current.
function staleNote(page) {
  if (!page.stale) return "";
  const names = Object.keys(page.stale_artifacts || {}).join(", ");
  return el("span", { className: "warning", id: "graph-stale" },
    ` · stale: ${names || "what is shown"} built before the last corpus change; run unirag index to refresh`);
}

async function load(append) {
  const cy = renderer();
  const query = { ...view.query, offset: append ? view.next : 0 };
  const ticket = ++view.asked;
  const page = await getJSON(`/graph/${segment(query.type)}`, {
    entity: query.entity, hops: query.hops, limit: PAGE, offset: query.offset,
    hierarchy: query.hierarchy, level: query.level });
  if (ticket !== view.asked) return;
  if (!append) {
    cy.elements().remove();
    view.colours.clear();
    levelPicker(page);
  }
  cy.add(elementsOf(page));
  view.next = page.next_offset;
  $("graph-more").disabled = view.next === null || view.next === undefined;
  cy.layout({ name: "cose", animate: false, randomize: !append, nodeRepulsion: () => 400000,
    idealEdgeLength: () => 90, nodeOverlap: 40, componentSpacing: 90, gravity: 0.2, numIter: 1500,
    padding: 30 }).run();
  cy.fit(undefined, 30);
  status(page, cy);
}

function levelPicker(page) {
  const select = $("graph-level");
  select.hidden = !page.hierarchy;
  if (!page.hierarchy) return;
  replace(select, (page.levels || []).map((level) => el("option", { value: String(level),
    selected: level === page.level }, `level ${level}`)));
}

function readQuery() {
  const hierarchy = $("graph-hierarchy").value;
  return { type: $("graph-type").value, entity: $("graph-entity").value.trim() || null,
    hops: $("graph-hops").value, hierarchy: hierarchy || null,
    level: hierarchy && !$("graph-level").hidden ? $("graph-level").value : null };
}

function field(name, value) {
  if (value === null || value === undefined || value === "") return null;
  return el("div", { className: "field" }, el("span", { className: "muted" }, name), el("span", {}, String(value)));
}

async function communityDetails(node, box) {
  const hierarchy = view.query && view.query.hierarchy;
  if (!hierarchy || !node.community) return;
  replace(box, el("p", { className: "muted" }, "loading the community…"));
  try {
    const c = await getJSON(`/communities/${segment(hierarchy)}/${segment(node.community)}`);
    replace(box, el("h3", {}, el("span", { className: "swatch", style: `background:${colourOf(c.id)}` }),
      c.title || c.id),
    field("hierarchy", `${hierarchy}, level ${c.level}`), field("entities", c.entities),
    field("rating", c.rating), el("p", { className: "summary" }, c.summary || "(no summary)"));
  } catch (error) {
    replace(box, el("p", { className: "error" }, error.message));
  }
}

function nodeDetails(node) {
  const community = el("div", { className: "community" });
  replace($("graph-details"), el("h2", {}, label(node)),
    field("id", node.id), field("kind", node.kind), field("type", node.type), field("hops", node.hops),
    el("p", { className: "description" }, node.description || "(no description)"),
    node.chunk_ids && node.chunk_ids.length ? el("div", {}, el("h3", {}, "Source passages"),
      el("div", { className: "item-passages" }, passageButtons(node.chunk_ids))) : null,
    el("button", { type: "button", className: "recentre", onclick: () => {
      $("graph-entity").value = label(node);
      show();
    } }, "Show its neighbourhood"),
    community);
  communityDetails(node, community);
}

function edgeDetails(edge) {
  const name = (id) => { const node = view.cy.getElementById(id); return node.length ? node.data("label") : id; };
  replace($("graph-details"), el("h2", {}, `${name(edge.source)} → ${name(edge.target)}`),
    field("relation", edge.relation), field("weight", edge.weight),
    el("p", { className: "description" }, edge.description || "(no description)"),
    edge.chunk_ids && edge.chunk_ids.length ? el("div", {}, el("h3", {}, "Source passages"),
      el("div", { className: "item-passages" }, passageButtons(edge.chunk_ids))) : null);
}

async function show(report) {
  view.query = readQuery();
  try {
    await load(false);
  } catch (error) {
    replace($("graph-status"), el("span", { className: "error" }, error.message));
    if (report) report(error, false);
  }
}

async function hierarchies() {
  if (view.hierarchiesLoaded) return;
  const stats = await getJSON("/stats");
  replace($("graph-hierarchy"), el("option", { value: "" }, "none"),
    Object.keys(stats.communities || {}).map((name) => el("option", { value: name }, name)));
  view.hierarchiesLoaded = true;
}

async function suggest() {
  const text = $("graph-entity").value.trim();
  if (text.length < 2) return;
  try {
    const found = await getJSON(`/graph/${segment($("graph-type").value)}/search`, { q: text, limit: 12 });
    replace($("graph-suggestions"), found.nodes.map((node) => el("option", { value: node.label },
      `${node.kind || "node"}, ${node.degree} links`)));
  } catch (_) {
    replace($("graph-suggestions")); // suggestions are a help, a failure shows nothing
  }
}

export async function showGraph(report) {
  await hierarchies();
  if (!view.query) await show(report);
  else if (view.cy) view.cy.resize();
}

export function installGraph(report) {
  $("graph-form").addEventListener("submit", (event) => { event.preventDefault(); show(report); });
  $("graph-more").addEventListener("click", async () => {
    try { await load(true); } catch (error) { report(error, false); }
  });
  $("graph-hierarchy").addEventListener("change", () => { $("graph-level").hidden = true; show(report); });
  $("graph-level").addEventListener("change", () => show(report));
  $("graph-type").addEventListener("change", () => show(report));
  let timer = null;
  $("graph-entity").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(suggest, 200); });
}
