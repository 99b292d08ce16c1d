// Compare: one question to 2-6 methods at once; their answers, contexts, tokens and
// latency side by side, the passages two or more of them retrieved highlighted.

import { postJSON } from "./api.js";
import { $, el, number, replace, seconds } from "./dom.js";
import { fillCheckboxes, methods } from "./methods.js";
import { contextItem, passageIds } from "./passages.js";

const MIN = 2;
const MAX = 6;
let chosen = ["vanilla", "bm25"];

export async function showCompare() {
  const box = $("compare-methods");
  if (box.childElementCount) return;
  fillCheckboxes(box, await methods(), chosen, (names) => {
    chosen = names;
    const fine = names.length >= MIN && names.length <= MAX;
    replace($("compare-count"), `${names.length} methods chosen${fine ? "" : ` (choose ${MIN} to ${MAX})`}`);
    $("compare-count").classList.toggle("error", !fine);
    $("compare-submit").disabled = !fine;
  });
}

/** Passage id -> the methods whose context holds it, for passages of two methods or more. */
function sharedPassages(results) {
  const holders = new Map();
  for (const { method, result } of results) {
    if (!result) continue;
    for (const id of new Set(result.context.flatMap(passageIds))) {
      if (!holders.has(id)) holders.set(id, []);
      holders.get(id).push(method);
    }
  }
  return new Map([...holders].filter(([, names]) => names.length > 1));
}

function column(method) {
  return el("article", { className: "panel compare-col", "data-method": method },
    el("h2", {}, method), el("div", { className: "compare-meta muted" }, "waiting…"),
    el("div", { className: "answer" }), el("ol", { className: "context" }));
}

function fill(col, outcome, shared) {
  const [meta, answer, context] = [col.children[1], col.children[2], col.children[3]];
  if (outcome.error) {
    replace(meta);
    replace(answer, el("span", { className: "error" }, outcome.error.message));
    return;
  }
  const { result, latency } = outcome;
  const usage = result.usage || {};
  const mine = new Map([...shared].map(([id, names]) => [id, names.filter((n) => n !== outcome.method)]));
  const sharing = new Set(result.context.flatMap(passageIds).filter((id) => mine.has(id)));
  replace(meta, `${number(usage.prompt_tokens)} prompt + ${number(usage.completion_tokens)} completion tokens · `,
    `${number(usage.llm_calls)} LLM calls${usage.cache_hits ? ` (+${number(usage.cache_hits)} cached)` : ""} · ${seconds(latency)} · ${result.context.length} items · ${sharing.size} shared passages`);
  replace(answer, result.answer || "(no answer)");
  answer.dataset.done = "true";
  replace(context, result.context.map((item) => contextItem(item, mine)));
}

export function installCompare(report) {
  $("compare-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const question = $("compare-question").value;
    const names = [...chosen];
    const grid = $("compare-results");
    grid.style.setProperty("--columns", String(names.length));
    const cols = names.map(column);
    replace(grid, cols);
    $("compare-legend").hidden = false;
    $("compare-picker").open = false;
    $("compare-submit").disabled = true;
    const outcomes = await Promise.all(names.map(async (method) => {
      const started = performance.now();
      try {
        const result = await postJSON("/query", { question, method });
        return { method, result, latency: (performance.now() - started) / 1000 };
      } catch (error) {
        report(error, false);
        return { method, error };
      }
    }));
    const shared = sharedPassages(outcomes);
    outcomes.forEach((outcome, i) => fill(cols[i], outcome, shared));
    $("compare-submit").disabled = false;
  });
}
