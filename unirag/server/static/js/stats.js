// Stats: counts per graph and hierarchy, usage per stage, stale artifacts (GET /stats).

import { getJSON } from "./api.js";
import { $, el, number, replace, seconds, table } from "./dom.js";

function card(name, value) {
  return el("div", { className: "card" }, el("div", { className: "card-value" }, value), el("div", { className: "muted" }, name));
}

export async function showStats() {
  const s = await getJSON("/stats");
  const usage = Object.values(s.usage_by_stage || {});
  const sum = (key) => usage.reduce((total, u) => total + (u[key] || 0), 0);
  replace($("stats-cards"), card("documents", number(s.documents)), card("passages", number(s.chunks)),
    card("passage tokens", number(s.chunk_tokens)), card("LLM calls", number(sum("llm_calls"))),
    card("prompt + completion tokens", number(sum("prompt_tokens") + sum("completion_tokens"))),
    card("stale artifacts", number(Object.keys(s.stale_artifacts || {}).length)));
  const graphs = Object.entries(s.graphs || {});
  replace($("stats-graphs"), graphs.length
    ? table(["graph", "nodes", "edges"], graphs.map(([name, g]) => [name, number(g.nodes), number(g.edges)]))
    : el("p", { className: "muted" }, "no graph built yet"));
  const hierarchies = Object.entries(s.communities || {});
  replace($("stats-hierarchies"), hierarchies.length
    ? table(["hierarchy", "communities per level", "last update"], hierarchies.map(([name, h]) => [name,
      Object.entries(h.levels || {}).map(([level, count]) => `L${level}: ${number(count)}`).join(" · "),
      h.update ? `${h.update.mode}${h.update.reason ? ` (${h.update.reason})` : ""}` : ""]))
    : el("p", { className: "muted" }, "no community hierarchy built yet"));
  const stale = Object.entries(s.stale_artifacts || {});
  replace($("stats-stale"), stale.length
    ? table(["artifact", "why"], stale.map(([name, why]) => [name, typeof why === "string" ? why : JSON.stringify(why)]))
    : el("p", { className: "ok" }, "none: every built artifact matches the corpus"));
  const stages = Object.entries(s.usage_by_stage || {});
  replace($("stats-usage"), stages.length
    ? table(["stage", "LLM calls", "cache hits", "prompt tokens", "completion tokens", "embedded texts", "time"],
      stages.map(([name, u]) => [name, number(u.llm_calls), number(u.cache_hits), number(u.prompt_tokens),
        number(u.completion_tokens), number(u.embedded_texts), seconds(u.seconds)]))
    : el("p", { className: "muted" }, "no model use recorded"));
  const artifacts = Object.entries(s.artifacts || {});
  replace($("stats-artifacts"), table(["artifact", "items", "built", "seconds", "corpus version"],
    artifacts.map(([name, a]) => [name, number(a.count ?? a.entities), a.built_at || "", a.seconds ?? "",
      a.corpus_version ?? ""])));
}
