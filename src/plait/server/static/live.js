// The dev page's live side: the runs that go on (GET /v1/runs?status=running: every
// worker's), each re-attached to with a click (its events from the start of its stream, then
// as they come) or stopped from the list; the run this tab followed is re-attached to by
// itself after a reload. And the app is watched: when `plait dev` reloads it (a new
// /ui/instance), the page reads its agents again without being reloaded.
// It uses the other scripts' helpers. Server text is only set as text.
"use strict";

const POLL_MS = 2500;
const watched = { instance: null, down: false };

function appStatus(text) {
  $("app-status").textContent = text || "";
  $("app-status").hidden = !text;
}

function liveItem(run) {
  const open = button("", "live-run", () => reattachListed(run));
  open.append(el("b", "", run.agent), el("span", "", " " + (run.session_id || "(no session)")));
  open.append(el("small", "", "since " + when(run.updated_at)));
  open.title = "Follow this run: its events so far, then as they come";
  open.dataset.run = run.run_id;
  const halt = button("Stop", "stop-run", () => stopListed(run));
  halt.dataset.run = run.run_id;
  halt.title = "Stop this run at its next safe point";
  return el("li", "", open, halt);
}

async function refreshLive() {
  let runs;
  try {
    runs = (await getJSON("/v1/runs?status=running&limit=50")).runs;
  } catch (_) {
    return; // the inbox says why reads are refused
  }
  const ids = runs.map((run) => run.run_id).join(",");
  $("live-count").textContent = runs.length ? String(runs.length) : "";
  if ($("live").dataset.shown === ids) return; // keep the list still between two looks
  $("live").dataset.shown = ids;
  $("live").replaceChildren(...runs.map(liveItem));
  if (!runs.length) $("live").append(el("li", "muted", "no run goes on"));
}

function refreshSidebar() {
  return Promise.all([refreshSessions(), refreshInbox(), refreshLive()]);
}

// Follow a listed run: as this tab started it (remembered), or as any other run of the API.
async function reattachListed(run) {
  if (state.running) {
    notice(`The page follows run ${state.liveId} already: stop it or let it end first.`);
    return;
  }
  const kept = remembered();
  let live = kept && kept.run_id === run.run_id ? kept : null;
  if (!live) {
    const turn = await readTurn(run.run_id);
    const request = turn ? lastUserText(turn.request) : "";
    live = { kind: "v1", run_id: run.run_id, agent: run.agent, session: run.session_id, request };
  }
  showView("run");
  await reattach(live);
}

async function stopListed(run) {
  try {
    await api(`/v1/runs/${encodeURIComponent(run.run_id)}/cancel`, { method: "POST" });
    if (state.liveId && state.running) fact("status", "stopping…");
  } catch (error) {
    notice(error.message);
  }
}

// After a reload: follow again the run this tab followed, if it still goes on.
async function reattachRemembered() {
  const live = remembered();
  if (!live || !live.run_id) return;
  try {
    const summary = await getJSON(`/v1/runs/${encodeURIComponent(live.run_id)}`);
    if (summary.status === "running") return await reattach(live);
  } catch (_) {
    // the run is gone (another key, an expired record): nothing to follow
  }
  remember(null);
}

async function appReloaded() {
  appStatus(`The app was reloaded at ${new Date().toLocaleTimeString()}: its agents were read again.`);
  try {
    await loadAgents();
    state.agent = ""; // draw the selected agent again: it may have changed
    await selectAgent($("agent").value);
    await refreshSidebar();
  } catch (error) {
    notice(error.message);
  }
}

// Look whether the app is still the one the page read (a `plait dev` reload starts another).
async function watchApp() {
  let found;
  try {
    const response = await fetch("/ui/instance", { cache: "no-store" });
    found = (await response.json()).instance;
  } catch (_) {
    watched.down = true;
    appStatus("The server does not answer: the page waits for it.");
    return;
  }
  if (watched.instance !== null && found !== watched.instance) await appReloaded();
  else if (watched.down) appStatus("");
  watched.instance = found;
  watched.down = false;
}

async function tick() {
  if (document.hidden) return;
  await watchApp();
  await Promise.all([refreshInbox(), refreshLive()]);
}

function liveStart() {
  $("refresh-inbox").addEventListener("click", refreshInbox);
  setInterval(tick, POLL_MS);
  watchApp();
}
