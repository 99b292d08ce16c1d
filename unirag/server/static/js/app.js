// The page's entry point: the views behind #hash tabs, the API key form, one banner for
// errors. Each view loads its data when it is shown.

import { setApiKey, apiKey } from "./api.js";
import { $, replace } from "./dom.js";
import { installAsk, showAsk } from "./ask.js";
import { installCompare, showCompare } from "./compare.js";
import { installDocuments, showDocuments } from "./documents.js";
import { installGraph, showGraph } from "./graph.js";
import { installPassageDialog } from "./passages.js";
import { showStats } from "./stats.js";

const VIEWS = { ask: showAsk, compare: showCompare, graph: showGraph, documents: showDocuments, stats: showStats };

/** Show an error in the banner; a 401 asks for the key. */
function report(error, sticky = true) {
  const banner = $("banner");
  const text = error.status === 401
    ? "This server needs an API key: enter it above and press Use."
    : error.message;
  replace(banner, text);
  banner.hidden = false;
  banner.dataset.sticky = String(sticky);
}

function clearBanner() {
  $("banner").hidden = true;
}

async function route() {
  const name = (location.hash || "#ask").slice(1);
  const show = VIEWS[name] ? name : "ask";
  for (const view of Object.keys(VIEWS)) $(`view-${view}`).hidden = view !== show;
  for (const tab of document.querySelectorAll("#tabs a")) tab.classList.toggle("active", tab.dataset.view === show);
  clearBanner();
  try {
    await VIEWS[show](report);
    document.body.dataset.view = show;
  } catch (error) {
    report(error);
  }
}

function installKeyForm() {
  $("api-key").value = apiKey();
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setApiKey($("api-key").value.trim());
    location.reload();
  });
}

installKeyForm();
installPassageDialog();
installAsk(report);
installCompare(report);
installGraph(report);
installDocuments(report);
window.addEventListener("hashchange", route);
route();
