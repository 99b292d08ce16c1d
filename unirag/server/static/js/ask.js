// Ask: one question to one method, the answer streamed as the model writes it,
// then the context items and the usage per stage.

import { stream } from "./api.js";
import { $, el, number, replace } from "./dom.js";
import { describe, fillSelect, methods } from "./methods.js";
import { contextItem, usageTable } from "./passages.js";

let running = null;

export async function showAsk() {
  const select = $("ask-method");
  if (!select.options.length) {
    const list = await methods();
    fillSelect(select, list, "vanilla");
    const info = () => replace($("ask-method-info"), describe(list, select.value));
    select.addEventListener("change", info);
    info();
  }
}

/** A time measured on cached replies is not the model's: say so next to it (the cache keeps
 * no original time to show instead). */
function cacheNote(usage) {
  if (!usage.cache_hits) return null;
  const all = !usage.llm_calls;
  return el("span", { id: "ask-cached-label", title: "replies from the response cache; the model's own time is not stored" },
    all ? " (cached)" : ` (${number(usage.cache_hits)} of ${number(usage.cache_hits + usage.llm_calls)} replies cached)`);
}

export function installAsk(report) {
  $("ask-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    if (running) running.abort();
    running = new AbortController();
    const body = { question: $("ask-question").value, method: $("ask-method").value,
      retrieve_only: $("ask-retrieve-only").checked };
    const topK = parseInt($("ask-topk").value, 10);
    if (topK > 0) body.top_k = topK;
    const answer = $("ask-answer");
    replace(answer);
    delete answer.dataset.done;
    delete answer.dataset.deltas;
    replace($("ask-context"));
    replace($("ask-usage"));
    replace($("ask-status"), "retrieving…");
    $("ask-submit").disabled = true;
    const started = performance.now();
    try {
      const result = await stream("/query/stream", body, (name, data) => {
        if (name === "delta") {
          replace($("ask-status"), "writing…");
          answer.append(data.text);
          answer.dataset.deltas = String(Number(answer.dataset.deltas || 0) + 1);
        }
      }, running.signal);
      replace(answer, result.answer || (body.retrieve_only ? "(context only)" : "(no answer)"));
      answer.dataset.done = "true";
      const took = ((performance.now() - started) / 1000).toFixed(2);
      replace($("ask-status"), `${result.method} · ${result.context.length} context items · ${took} s`,
        cacheNote(result.usage || {}));
      replace($("ask-context"), result.context.map((item) => contextItem(item)));
      replace($("ask-usage"), usageTable(result),
        (result.warnings || []).map((w) => el("p", { className: "warning" }, w)));
    } catch (error) {
      if (error.name === "AbortError") return;
      replace($("ask-status"));
      replace(answer, el("span", { className: "error" }, error.message));
      report(error);
    } finally {
      $("ask-submit").disabled = false;
    }
  });
}
