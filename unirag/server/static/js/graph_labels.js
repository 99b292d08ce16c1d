// What the graph shows at a readable size: nodes sized by degree, labels only where they can
// be read. Why not Cytoscape's own `min-zoomed-font-size`: it compares against the zoom
// rounded *up* to a power of two, so at a fitted zoom of 0.6 it draws 13 px labels at 8 px.
// Here a label keeps one size on screen (11 to 16 px, larger for better-connected nodes)
// whatever the zoom: on each zoom its font (graph units) is set to that size / zoom. At the
// default zoom only the best-connected nodes are named; a node's label appears once one has
// zoomed in far enough for its degree and its place is free of a better-connected node's label
// or circle (the class `quiet` hides it), so zooming in names more nodes without piling
// labels up.

/** The smallest label, in screen pixels, that is ever drawn. */
export const READABLE_PX = 11;
/** The largest label at the default zoom (a hub's), in screen pixels. */
const LARGEST_PX = 16;
/** Edge labels appear at this multiple of the default zoom when there are many edges. */
const EDGE_ZOOM = 1.6;
const FEW_EDGES = 20;
const SHORT_LABEL = 24;
/** Labels longer than this many font sizes end in an ellipsis (the tooltip has the whole). */
const TEXT_EMS = 11;

const weight = (degree) => Math.log2(degree + 2);

/** How many node labels the default zoom shows: all of a small graph, a quarter of a large one. */
function labelled(count) {
  return count <= 12 ? count : Math.max(12, Math.min(24, Math.round(count / 4)));
}

/** Node diameter (graph units) by degree: a hub stands out, a leaf stays small. */
export function nodeSize(degree, centre) {
  return Math.min(48, 14 + 5 * Math.sqrt(degree)) + (centre ? 4 : 0);
}

/** A relation short enough to sit on an edge: its keywords, else a short relation, else none.
 * The whole text is in the tooltip and the details panel. */
export function shortRelation(edge) {
  const words = Array.isArray(edge.keywords) ? edge.keywords.filter(Boolean) : [];
  const text = words.length ? words.slice(0, 2).join(", ") : String(edge.relation || "");
  return text.length <= SHORT_LABEL ? text : "";
}

/** Size every node by its degree among what is shown (before the layout, which spaces by size). */
export function sizeByDegree(cy) {
  cy.batch(() => cy.nodes().forEach((node) => {
    const degree = node.degree(false);
    node.data({ degree, size: nodeSize(degree, node.data("centre")) });
  }));
}

/** Take the current (fitted) zoom as the default: from it, when each label may appear. */
export function labelsForDefaultZoom(cy) {
  const zoom = cy.zoom();
  const nodes = cy.nodes();
  const weights = nodes.map((node) => weight(node.data("degree"))).sort((a, b) => b - a);
  const threshold = weights[Math.max(0, labelled(nodes.length) - 1)] || 1;
  const edgeZoom = cy.edges().length <= FEW_EDGES ? 1 : EDGE_ZOOM;
  cy.batch(() => {
    nodes.forEach((node) => {
      const ratio = weight(node.data("degree")) / threshold;
      node.data({ px: Math.max(READABLE_PX, Math.min(LARGEST_PX, READABLE_PX * ratio)), reveal: zoom / ratio });
    });
    cy.edges().forEach((edge) => edge.data({ px: READABLE_PX, reveal: zoom * edgeZoom }));
  });
  relabel(cy);
}

/** A label's box on screen (it sits under its node), estimated from its length. */
function labelBox(node, zoom) {
  const px = node.data("px");
  const width = Math.min(px * TEXT_EMS, 0.6 * px * node.data("label").length);
  const at = node.renderedPosition();
  const top = at.y + (node.data("size") * zoom) / 2 + 3 * zoom;
  return { x1: at.x - width / 2, x2: at.x + width / 2, y1: top, y2: top + px * 1.25 };
}

function circleBox(node, zoom) {
  const at = node.renderedPosition();
  const radius = (node.data("size") * zoom) / 2;
  return { x1: at.x - radius, x2: at.x + radius, y1: at.y - radius, y2: at.y + radius };
}

const overlap = (a, b) => a.x1 < b.x2 && b.x1 < a.x2 && a.y1 < b.y2 && b.y1 < a.y2;

/** Fonts for the current zoom; which labels show (called after the fit and on every zoom). */
export function relabel(cy) {
  const zoom = cy.zoom();
  const circles = cy.nodes().map((node) => ({ node, box: circleBox(node, zoom) }));
  const placed = [];
  const due = (element) => zoom >= element.data("reveal") * (1 - 1e-9);
  // elements a page just added have no `px` until labelsForDefaultZoom (the fit zooms before it)
  const order = cy.nodes("[px]").sort((a, b) => Number(Boolean(b.data("centre"))) - Number(Boolean(a.data("centre")))
    || b.data("px") - a.data("px") || b.data("degree") - a.data("degree"));
  cy.batch(() => {
    order.forEach((node) => {
      const box = due(node) ? labelBox(node, zoom) : null;
      // a label may cover a less-connected node's circle (its outline keeps it legible), not a hub's
      const free = box !== null && !placed.some((other) => overlap(box, other))
        && !circles.some((c) => c.node !== node && c.node.data("degree") >= node.data("degree") && overlap(box, c.box));
      if (free) placed.push(box);
      const font = node.data("px") / zoom;
      node.data({ font, textWidth: font * TEXT_EMS });
      node.toggleClass("quiet", !free);
    });
    cy.edges("[px]").forEach((edge) => {
      const font = edge.data("px") / zoom;
      edge.data({ font, textWidth: font * TEXT_EMS });
      edge.toggleClass("quiet", !due(edge) || !edge.data("label"));
    });
  });
}

/** The Cytoscape style: sizes and fonts from the data `sizeForZoom` sets. */
export function graphStyle() {
  return [
    { selector: "node", style: {
      "background-color": "data(colour)", label: "data(label)", "font-size": "data(font)", color: "#1f2933",
      "min-zoomed-font-size": 0, "text-outline-color": "#ffffff", "text-outline-width": 2,
      "text-valign": "bottom", "text-margin-y": 3, width: "data(size)", height: "data(size)",
      "text-wrap": "ellipsis", "text-max-width": "data(textWidth)", "border-width": 1, "border-color": "#ffffff" } },
    { selector: "node[?centre]", style: { "border-width": 3, "border-color": "#1f2933" } },
    { selector: "node:selected", style: { "border-width": 3, "border-color": "#d64545" } },
    { selector: "edge", style: {
      width: 1.2, "line-color": "#c3cad3", "curve-style": "bezier", label: "data(label)", "font-size": "data(font)",
      "min-zoomed-font-size": 0, color: "#52606d", "text-rotation": "autorotate", "text-background-color": "#ffffff",
      "text-background-opacity": 0.85, "text-background-padding": 1, "text-wrap": "ellipsis", "text-max-width": "data(textWidth)" } },
    { selector: ".quiet", style: { label: "" } },
    { selector: "edge.hover, edge:selected", style: { "line-color": "#d64545", width: 3 } },
    { selector: "node.hover", style: { "border-width": 3, "border-color": "#d64545" } },
  ];
}
