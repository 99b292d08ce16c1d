// Graph: a k-hop neighbourhood of one entity (or the best-connected nodes), a page at a
// time from GET /graph/{type} (never the whole graph), drawn with Cytoscape.js; nodes
// coloured by their community in a chosen hierarchy (with a legend); labels sized to be read
// (graph_labels.js); full names and relations on hover, details and passages on click.

import cytoscape from "../vendor/cytoscape.esm.min.js";
import { getJSON, segment } from "./api.js";
import { $, el, number, replace } from "./dom.js";
import { graphStyle, labelsForDefaultZoom, relabel, shortRelation, sizeByDegree } from "./graph_labels.js";
import { clearLegend, renderLegend } from "./graph_legend.js";
import { passageButtons } from "./passages.js";

const PAGE = 60;
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
  "#9c755f", "#86bcb6", "#d37295", "#a0cbe8", "#ffbe7d", "#8cd17d", "#b6992d", "#499894", "#fabfd2",
  "#79706e", "#d4a6c8", "#f1ce63"];
/** A default zoom above this makes a small graph's few nodes huge. */
const MOST_FITTED_ZOOM = 1.5;
const NO_COMMUNITY = "#9aa5b1";

// `asked` counts requests: an answer to an older one than the last (a quick second click) is dropped.
const view = { cy: null, query: null, next: null, colours: new Map(), hierarchiesLoaded: false, asked: 0 };

function renderer() {
  if (view.cy) return view.cy;
  view.cy = cytoscape({ container: $("graph-canvas"), minZoom: 0.1, maxZoom: 5, style: graphStyle() });
  view.cy.on("tap", "node", (event) => nodeDetails(event.target.data("raw")));
  view.cy.on("tap", "edge", (event) => edgeDetails(event.target.data("raw")));
  view.cy.on("zoom", () => relabel(view.cy));
  view.cy.on("mouseover", "node, edge", (event) => hover(event.target, event.renderedPosition));
  view.cy.on("mouseout", "node, edge", (event) => { event.target.removeClass("hover"); $("graph-tip").hidden = true; });
  window.uniragGraph = view.cy; // the browser tests read the rendered nodes from here
  return view.cy;
}

/** The whole name or relation under the pointer (labels are short or hidden). */
function hover(element, position) {
  element.addClass("hover");
  const at = position || (element.isNode() ? element.renderedPosition() : element.renderedMidpoint());
  const tip = $("graph-tip");
  replace(tip, element.isNode() ? tipOfNode(element) : tipOfEdge(element.data("raw")));
  tip.hidden = false;
  const room = $("graph-canvas").clientWidth - tip.offsetWidth - 8; // keep it inside the canvas
  tip.style.left = `${Math.max(0, Math.min(Math.round(at.x + 12), room))}px`;
  tip.style.top = `${Math.round(at.y + 12)}px`;
}

function tipOfNode(node) {
  const raw = node.data("raw");
  return [el("strong", {}, label(raw)), el("div", { className: "muted" },
    `${raw.kind || "node"} · ${node.degree(false)} links shown`)];
}

function tipOfEdge(edge) {
  const name = (id) => { const node = view.cy.getElementById(id); return node.length ? node.data("label") : id; };
  const relation = [edge.relation, (edge.keywords || []).join(", ")].filter(Boolean).join(" · ");
  return [el("strong", {}, `${name(edge.source)} → ${name(edge.target)}`),
    relation ? el("div", {}, relation) : null,
    edge.description && edge.description !== edge.relation ? el("div", { className: "muted" }, edge.description) : null];
}

function colourOf(community) {
  if (!community) return NO_COMMUNITY;
  if (!view.colours.has(community)) view.colours.set(community, PALETTE[view.colours.size % PALETTE.length]);
  return view.colours.get(community);
}

function label(node) {
  return String(node.name || node.title || node.id);
}

/** A start position from the node's id: the same graph gets the same picture every time. */
function startPosition(id) {
  let hash = 2166136261;
  for (const char of id) hash = Math.imul(hash ^ char.codePointAt(0), 16777619) >>> 0;
  return { x: (hash % 1000) - 500, y: (Math.floor(hash / 1000) % 1000) - 500 };
}

function elementsOf(page) {
  const nodes = page.nodes.map((node) => ({ group: "nodes", position: startPosition(node.id), data: {
    id: node.id, label: label(node), raw: node, centre: node.hops === 0,
    colour: colourOf(node.community), size: 14, font: 12, textWidth: 140 } }));
  const edges = page.edges.map((edge, i) => ({ group: "edges", data: {
    id: `e:${page.offset}:${i}:${edge.source}->${edge.target}`, source: edge.source, target: edge.target,
    label: shortRelation(edge), raw: edge, font: 11, textWidth: 140 } }));
  return [...nodes, ...edges];
}

function status(page, cy) {
  const around = page.entity ? `around ${page.entity} (${page.hops} hops)` : "best-connected nodes";
  const hierarchy = page.hierarchy ? ` · coloured by ${page.hierarchy} level ${page.level}` : "";
  const quiet = cy.nodes(".quiet").length ? " · zoom in for the names of less-connected nodes" : "";
  replace($("graph-status"), `${page.type}: ${cy.nodes().length} of ${number(page.total_nodes)} nodes ${around}, `,
    `${cy.edges().length} edges${hierarchy}${quiet}`, staleNote(page));
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
    clearDetails();
    clearLegend();
  }
  cy.add(elementsOf(page));
  sizeByDegree(cy);
  view.next = page.next_offset;
  $("graph-more").disabled = view.next === null || view.next === undefined;
  // the canvas's shape as bounds: a wide canvas gets a wide picture, with room for the labels
  cy.layout({ name: "cose", animate: false, randomize: false, randomSeed: 1, nodeRepulsion: () => 800000,
    idealEdgeLength: () => 110, nodeOverlap: 40, componentSpacing: 90, gravity: 0.2, numIter: 1500,
    padding: 30, boundingBox: { x1: 0, y1: 0, w: cy.width(), h: cy.height() } }).run();
  cy.fit(undefined, 30);
  if (cy.zoom() > MOST_FITTED_ZOOM) cy.zoom({ level: MOST_FITTED_ZOOM, renderedPosition: centreOf(cy) });
  labelsForDefaultZoom(cy);
  status(page, cy);
  await renderLegend(cy, query, page.level, () => ticket === view.asked);
}

function centreOf(cy) {
  return { x: cy.width() / 2, y: cy.height() / 2 };
}

/** A new Show: the details of a node of the old picture would describe something no longer shown. */
function clearDetails() {
  replace($("graph-details"), el("p", { className: "muted" },
    "Click a node or an edge for its description and source passages (hover one for its full name)."));
  $("graph-tip").hidden = true;
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
    field("relation", edge.relation), field("keywords", (edge.keywords || []).join(", ")), field("weight", edge.weight),
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
