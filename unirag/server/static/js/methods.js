// The shipped methods as GET /methods lists them (by group, each with its group from its spec),
// loaded once per page and offered as a grouped picker.

import { getJSON } from "./api.js";
import { el, replace } from "./dom.js";

let loading = null;

/** Every method (cached for the page's life; a failed load is retried next time). */
export function methods() {
  if (!loading) loading = getJSON("/methods").catch((error) => { loading = null; throw error; });
  return loading;
}

/** [[group, [method, ...]], ...] in the server's order. */
export function groups(list) {
  const found = new Map();
  for (const method of list) {
    if (!found.has(method.group)) found.set(method.group, []);
    found.get(method.group).push(method);
  }
  return [...found.entries()];
}

/** Fill a <select> with one <optgroup> per group; `chosen` is selected. */
export function fillSelect(select, list, chosen) {
  replace(select, groups(list).map(([group, members]) => el("optgroup", { label: group },
    members.map((m) => el("option", { value: m.name, selected: m.name === chosen, title: m.description },
      `${m.name} — ${m.title}`)))));
}

/** Checkboxes by group, each with its one-line description; `onChange(names)` on every change. */
export function fillCheckboxes(container, list, chosen, onChange) {
  const picked = () => [...container.querySelectorAll("input:checked")].map((box) => box.value);
  replace(container, groups(list).map(([group, members]) => el("fieldset", { className: "method-group" },
    el("legend", {}, group),
    members.map((m) => el("label", { className: "method-choice", title: m.description },
      el("input", { type: "checkbox", value: m.name, name: "method", checked: chosen.includes(m.name),
        onchange: () => onChange(picked()) }),
      el("span", { className: "method-name" }, m.name),
      el("span", { className: "muted method-desc" }, m.description))))));
  onChange(picked());
}

export function describe(list, name) {
  const method = list.find((m) => m.name === name);
  return method ? `${method.title}: ${method.description} (${method.pipeline})` : "";
}
