// Building DOM from data without ever parsing it as HTML: every text goes through
// textContent, so a passage, a title or an error from the server cannot inject markup.

/** An element: `attrs` are properties (className, type, ...), `data-*`/`aria-*` attributes,
 * or `on<event>` listeners; children are nodes, strings (as text) or null (skipped). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else if (name.startsWith("data-") || name.startsWith("aria-") || name === "role" || name === "title") {
      node.setAttribute(name, String(value));
    } else node[name] = value;
  }
  append(node, children);
  return node;
}

/** Add children (nodes, text, arrays of either; null skipped). */
export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Replace every child of `node`. */
export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

export const $ = (id) => document.getElementById(id);

/** A table from a header row and rows of cells (text or nodes). */
export function table(head, rows, className = "table") {
  return el("table", { className },
    el("thead", {}, el("tr", {}, head.map((cell) => el("th", {}, cell)))),
    el("tbody", {}, rows.map((row) => el("tr", {}, row.map((cell) => el("td", {}, cell))))));
}

/** Numbers as people read them: 12,345 / 0.42 / 3.1 s. */
export function number(value, digits = 0) {
  if (value === null || value === undefined || Number.isNaN(value)) return "–";
  return Number(value).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  return value < 1 ? `${number(value * 1000, 1)} ms` : `${number(value, 2)} s`;
}
