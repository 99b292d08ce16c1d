// Documents: the stored documents with their sources, an upload that indexes as a job
// (progress polled from GET /jobs/{id}), and deletion (also a job), two clicks to be sure.
// The file picker accepts what the server says it reads (GET /documents/formats): one list.

import { getJSON, postForm, remove, segment } from "./api.js";
import { $, el, number, replace } from "./dom.js";

const POLL_MS = 400;

async function list() {
  const docs = (await getJSON("/documents"))
    .sort((a, b) => (a.title || a.id).localeCompare(b.title || b.id, undefined, { sensitivity: "base" }));
  replace($("doc-count"), `${docs.length}`);
  replace($("doc-table").tBodies[0], docs.map((doc) => el("tr", { "data-doc": doc.id },
    el("td", {}, doc.title || "(untitled)"), el("td", { className: "mono" }, doc.id),
    el("td", { className: "num" }, number(doc.chunks)), el("td", { className: "num" }, number(doc.chars)),
    el("td", {}, doc.added || ""), sourceCell(doc.sources || []),
    el("td", {}, deleteButton(doc)))));
}

/** Where a document came from: an upload's logical source whole (`upload:COLLECTION/NAME`, short, and
 * the collection tells), a file by its name (the whole path on hover: a path is long, its name tells). */
function sourceCell(sources) {
  const paths = sources.filter(Boolean);
  const shown = paths.map((p) => (p.startsWith("upload:") ? p : p.split(/[\\/]/).pop()));
  return el("td", { className: "source", title: paths.join("\n") }, shown.join(", "));
}

function deleteButton(doc) {
  const button = el("button", { type: "button", className: "danger", "data-delete": doc.id }, "Delete");
  button.addEventListener("click", async () => {
    if (button.dataset.armed !== "true") {
      button.dataset.armed = "true";
      replace(button, "Really delete?");
      setTimeout(() => { button.dataset.armed = "false"; replace(button, "Delete"); }, 4000);
      return;
    }
    button.disabled = true;
    await follow(() => remove(`/documents/${segment(doc.id)}`), `deleting ${doc.title || doc.id}`);
  });
  return button;
}

/** Start a job (`start()` answers 202 with it), show its progress until it is done or failed. */
async function follow(start, what) {
  const box = $("upload-job");
  const bar = $("upload-progress");
  box.hidden = false;
  box.dataset.state = "queued";
  bar.removeAttribute("value");
  replace($("upload-state"), `${what}: starting…`);
  try {
    let job = (await start()).job;
    while (job.state === "queued" || job.state === "running") {
      const p = job.progress || {};
      if (p.total) { bar.max = p.total; bar.value = p.done; } else bar.removeAttribute("value");
      replace($("upload-state"), `${what}: ${job.state}${p.step ? `, ${p.step}` : ""}${p.total ? ` ${p.done}/${p.total}` : ""}`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      job = await getJSON(`/jobs/${segment(job.id)}`);
    }
    box.dataset.state = job.state;
    bar.max = 1;
    bar.value = 1;
    replace($("upload-state"), job.state === "done" ? `${what}: done${summary(job.report)}` : `${what}: failed, ${job.error}`);
  } catch (error) {
    box.dataset.state = "failed";
    replace($("upload-state"), el("span", { className: "error" }, `${what}: ${error.message}`));
  }
  await list();
}

function summary(report) {
  if (!report) return "";
  const parts = [["documents_added", "documents added"], ["documents_removed", "documents removed"],
    ["chunks_added", "passages added"]]
    .filter(([key]) => report[key]).map(([key, name]) => `${name}: ${number(report[key])}`);
  return parts.length ? ` (${parts.join(", ")})` : "";
}

export async function showDocuments() {
  await Promise.all([list(), pickerFormats()]);
}

/** The picker's accept list, from the suffixes the server's upload reads. */
async function pickerFormats() {
  const formats = await getJSON("/documents/formats");
  $("upload-files").accept = formats.suffixes.join(",");
}

export function installDocuments(report) {
  $("upload-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const files = $("upload-files").files;
    if (!files.length) { report(new Error("choose one or more files first"), false); return; }
    const form = new FormData();
    for (const file of files) form.append("files", file, file.name);
    const collection = $("upload-collection").value.trim();
    if (collection) form.append("collection", collection);
    $("upload-submit").disabled = true;
    await follow(() => postForm("/documents", form), `indexing ${files.length} file${files.length > 1 ? "s" : ""}`);
    $("upload-submit").disabled = false;
    $("upload-files").value = "";
  });
}
