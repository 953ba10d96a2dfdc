// The plait dev page: where it starts. The other scripts (api.js first) define the views;
// this one switches between them (Run, Assistants, Store, Memory, Usage, Eval) and starts
// the page once all of them ran. Server text is only set as text.
"use strict";

const VIEWS = ["run", "assistants", "store", "memory", "usage", "eval"];

// Show one view in the middle of the page (the side bar and the run's facts stay).
function showView(name) {
  for (const view of VIEWS) {
    $(`${view}-view`).hidden = view !== name;
    const tab = document.querySelector(`#views button[data-view="${view}"]`);
    tab.setAttribute("aria-selected", String(view === name));
  }
  document.body.dataset.view = name;
  if (name === "assistants") drawAssistants();
  if (name === "store") storeOpened();
  if (name === "usage") loadUsage();
}

async function reload() {
  notice("");
  try {
    await loadAgents();
    await Promise.all([agentViews($("agent").value), refreshInbox(), refreshLive()]);
    await reattachRemembered();
  } catch (error) {
    notice(error.message);
  }
}

function start() {
  $("api-key").value = localStorage.getItem(KEY_STORE) || "";
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    if (key) localStorage.setItem(KEY_STORE, key);
    else localStorage.removeItem(KEY_STORE);
    reload();
  });
  for (const tab of document.querySelectorAll("#views button")) {
    tab.addEventListener("click", () => showView(tab.dataset.view));
  }
  $("agent").addEventListener("change", agentChanged);
  $("new-session").addEventListener("click", () => state.running || newSession());
  $("stop").addEventListener("click", stop);
  $("send-form").addEventListener("submit", send);
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("send-form").requestSubmit();
  });
  for (const begin of [historyStart, inputsStart, assistantsStart, storeStart, usageStart, evalStart, liveStart]) {
    begin();
  }
  newSession();
  showView("run");
  reload();
}

// The page's scripts are deferred: they have all run when the document is loaded.
document.addEventListener("DOMContentLoaded", start);
