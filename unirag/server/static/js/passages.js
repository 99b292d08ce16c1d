// Context items and their source passages: one list item per context item (kind,
// score, operator, text), a click opens its passage (GET /chunks/{id}) in a dialog.

import { getJSON, segment } from "./api.js";
import { $, el, number, replace, seconds, table } from "./dom.js";

/** The passages an item comes from: a chunk is its own; others name theirs in provenance. */
export function passageIds(item) {
  if (item.kind === "chunk") return [item.id];
  const ids = (item.provenance && item.provenance.chunk_ids) || [];
  return Array.isArray(ids) ? ids : [];
}

/** Open passage `id` in the passage dialog. */
export async function openPassage(id) {
  const dialog = $("passage-dialog");
  replace($("passage-title"), "Loading…");
  replace($("passage-meta"), id);
  replace($("passage-text"));
  if (!dialog.open) dialog.showModal();
  try {
    const chunk = await getJSON(`/chunks/${segment(id)}`);
    replace($("passage-title"), chunk.title || chunk.id);
    replace($("passage-meta"), `${chunk.id} · document ${chunk.document} · passage ${chunk.index + 1} · ${number(chunk.tokens)} tokens`);
    replace($("passage-text"), chunk.text);
  } catch (error) {
    replace($("passage-title"), "Passage not found");
    replace($("passage-text"), error.message);
  }
}

export function installPassageDialog() {
  const dialog = $("passage-dialog");
  $("passage-close").addEventListener("click", () => dialog.close());
  dialog.addEventListener("click", (event) => { if (event.target === dialog) dialog.close(); });
}

/** Buttons that open passages. */
export function passageButtons(ids, shared = new Map()) {
  return ids.map((id) => el("button", {
    type: "button", className: shared.has(id) ? "passage-link shared" : "passage-link",
    title: shared.has(id) ? `also retrieved by ${shared.get(id).join(", ")}` : "open the source passage",
    "data-chunk": id, onclick: (event) => { event.stopPropagation(); openPassage(id); },
  }, id.replace(/^chunk-/, "#")));
}

/** One context item; `shared` maps a passage id to the other methods that retrieved it. */
export function contextItem(item, shared = new Map()) {
  const ids = passageIds(item);
  const isShared = ids.some((id) => shared.has(id));
  const text = item.text.length > 600 ? `${item.text.slice(0, 600)}…` : item.text;
  return el("li", {
    className: isShared ? "context-item shared" : "context-item", tabIndex: 0,
    "data-kind": item.kind, "data-id": item.id,
    onclick: () => { if (ids.length) openPassage(ids[0]); },
    onkeydown: (event) => { if (event.key === "Enter" && ids.length) openPassage(ids[0]); },
  },
  el("div", { className: "item-head" },
    el("span", { className: `kind kind-${item.kind}` }, item.kind),
    el("span", { className: "item-source" }, item.source || item.id),
    el("span", { className: "muted" }, `score ${number(item.score, 3)}`),
    el("span", { className: "operator" }, item.operator || "")),
  el("div", { className: "item-text" }, text),
  ids.length ? el("div", { className: "item-passages" }, el("span", { className: "muted" }, "passages "),
    passageButtons(ids, shared)) : null);
}

/** Short column heads (the panel is narrow), each with its whole meaning on hover. */
const USAGE_HEAD = [["stage", "the query's stage"], ["LLM calls", "chat-model calls (replies from the response cache not counted)"],
  ["tokens in", "prompt tokens"], ["tokens out", "completion tokens"], ["embed calls", "embedding-model calls"],
  ["time", "seconds in the stage"]];

/** A stage name that may wrap after its dots ("query.<wbr>generate"), not inside a word. */
function breakable(stage) {
  return stage.split(".").map((part, i, parts) => (i < parts.length - 1 ? [`${part}.`, el("wbr")] : part));
}

/** The usage table of a result: per stage, then the whole query. */
export function usageTable(result) {
  const stages = Object.entries(result.usage_by_stage || {});
  const timings = result.timings || {};
  const rows = stages.map(([stage, u]) => [breakable(stage), number(u.llm_calls), number(u.prompt_tokens),
    number(u.completion_tokens), number(u.embedding_calls), seconds(u.seconds)]);
  const total = result.usage || {};
  rows.push([el("strong", {}, "query"), number(total.llm_calls), number(total.prompt_tokens),
    number(total.completion_tokens), number(total.embedding_calls), seconds(timings.total)]);
  const head = USAGE_HEAD.map(([name, meaning]) => el("span", { title: meaning }, name));
  const view = [table(head, rows, "table usage")];
  if (total.cache_hits) {
    view.push(el("p", { className: "muted timings", id: "ask-cached" },
      `${cachedReplies(total)} from the response cache: their time is the cache look-up's, not the model's.`));
  }
  const parts = Object.entries(timings).filter(([name]) => name !== "total");
  if (parts.length) {
    view.push(el("p", { className: "muted timings" }, parts.map(([name, value]) => `${name} ${seconds(value)}`).join(" · ")));
  }
  return view;
}

/** "the model's reply" / "2 of 3 model replies", for a result's usage with cache hits. */
export function cachedReplies(usage) {
  const replies = (usage.llm_calls || 0) + (usage.cache_hits || 0);
  if (replies === 1) return "The model's reply came";
  return usage.cache_hits === replies ? `All ${number(replies)} model replies came`
    : `${number(usage.cache_hits)} of ${number(replies)} model replies came`;
}
