// The legend of the graph's colours: one entry per community among the shown nodes (its
// colour, title and how many shown nodes it has), so a colour can be read without clicking.
// Titles come from GET /communities/{hierarchy}/{id}, one request per community not seen before.

import { getJSON, segment } from "./api.js";
import { $, el, replace } from "./dom.js";

/** Community titles already fetched, by hierarchy then id (kept for the page's life). */
const titles = new Map();

async function titleOf(hierarchy, id) {
  const known = titles.get(hierarchy) || new Map();
  titles.set(hierarchy, known);
  if (!known.has(id)) {
    known.set(id, getJSON(`/communities/${segment(hierarchy)}/${segment(id)}`)
      .then((c) => c.title || c.id, () => id));
  }
  return known.get(id);
}

/** The shown nodes grouped by community id ("" for none), largest group first. */
function groups(cy) {
  const counts = new Map();
  cy.nodes().forEach((node) => {
    const id = node.data("raw").community || "";
    const group = counts.get(id) || { id, colour: node.data("colour"), count: 0 };
    group.count += 1;
    counts.set(id, group);
  });
  return [...counts.values()].sort((a, b) => b.count - a.count || a.id.localeCompare(b.id));
}

function entry(group, title, hierarchy) {
  return el("li", { className: "legend-entry", "data-community": group.id, title: group.id ? `${title} (${group.id})` : "" },
    el("span", { className: "swatch", style: `background:${group.colour}` }),
    el("span", { className: "legend-title" }, group.id ? title : `not in a ${hierarchy} community`),
    el("span", { className: "muted legend-count" }, String(group.count)));
}

/** A new Show: the old legend would name the previous picture's communities until the new one is drawn. */
export function clearLegend() {
  const box = $("graph-legend");
  replace(box, el("p", { className: "muted" }, "Reading the colours…"));
  box.dataset.entries = "0";
}

/** Draw the legend for what `cy` shows; `isCurrent()` false drops a result a newer Show replaced. */
export async function renderLegend(cy, query, level, isCurrent) {
  const box = $("graph-legend");
  if (!query.hierarchy) {
    replace(box, el("h2", {}, "Colours"),
      el("p", { className: "muted" }, "One colour for all nodes: choose a hierarchy under Communities to colour them by community."));
    box.dataset.entries = "0";
    return;
  }
  const shown = groups(cy);
  const named = await Promise.all(shown.map((group) => (group.id ? titleOf(query.hierarchy, group.id) : "")));
  if (!isCurrent()) return;
  replace(box, el("h2", {}, `Communities: ${query.hierarchy}, level ${level}`),
    el("ul", { className: "legend" }, shown.map((group, i) => entry(group, named[i], query.hierarchy))));
  box.dataset.entries = String(shown.length);
}
