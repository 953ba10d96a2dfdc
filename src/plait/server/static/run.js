// The dev page's runs: sending a message (as served: POST /v1/agents/{name}/runs; with an
// assistant: the Agent Protocol's POST /threads/{session}/runs/stream), following a run's
// stream (and re-attaching to it), Stop, Resume, and the run's summary.
// It uses api.js's helpers, events.js's tree and pause.js's panel. Server text is only set as text.
"use strict";

const LIVE_STORE = "plait.live"; // the run this tab follows (sessionStorage: kept across reloads)

function setRunning(running) {
  state.running = running;
  $("send").disabled = running;
  $("stop").hidden = !running;
  $("stop").disabled = !running;
  document.body.classList.toggle("running", running);
}

function remember(live) {
  if (live) sessionStorage.setItem(LIVE_STORE, JSON.stringify(live));
  else sessionStorage.removeItem(LIVE_STORE);
}

function remembered() {
  try {
    return JSON.parse(sessionStorage.getItem(LIVE_STORE) || "null");
  } catch (_) {
    return null;
  }
}

// Stop the live run: it ends "cancelled" at its next safe point (and can be resumed).
async function stop() {
  const id = state.liveId;
  if (!state.running || !id) return;
  $("stop").disabled = true;
  try {
    await api(`/v1/runs/${encodeURIComponent(id)}/cancel`, { method: "POST" });
    if (state.liveId === id && !state.ended) fact("status", "stopping…"); // until it ends
  } catch (error) {
    $("stop").disabled = !state.running;
    notice(error.message);
  }
}

// One stream's events, by its format: plait's own (/v1) or the Agent Protocol's.
function onRunEvent(kind, got, name, data) {
  if (kind === "protocol") {
    if (name === "debug" && data && data.type === "event") renderEvent(data.payload);
    return;
  }
  if (name === "agent_delta") renderDelta(data);
  else if (name === "agent_event") renderEvent(data);
  else if (name === "run_end") got.summary = data;
}

// Where a stream that broke goes on from: the same run's events after the last one seen.
function rejoinPath(live) {
  if (live.kind === "protocol") return `${live.location}/stream?stream_mode=debug`;
  return `/v1/runs/${encodeURIComponent(live.run_id)}/stream`;
}

// The summary of a run whose Agent Protocol stream ended: its stream ends as the run's last
// hook runs, a moment before the server writes the summary, so look again until it has.
async function endedSummary(runId) {
  let summary = null;
  for (let look = 0; look < 100; look++) {
    summary = await getJSON(`/v1/runs/${encodeURIComponent(runId)}`);
    if (summary.status !== "running") return summary;
    await new Promise((done) => setTimeout(done, 100));
  }
  return summary;
}

// Read a run's stream to its end, re-attaching once if it breaks while the run goes on.
async function readRun(response, live, got) {
  let seen = -1;
  for (let attempt = 0; ; attempt++) {
    try {
      await readEvents(response, (name, data, id) => {
        seen = id === null ? seen + 1 : id;
        onRunEvent(live.kind, got, name, data);
      });
      return;
    } catch (error) {
      if (attempt > 0 || got.summary) throw error;
      const after = { "last-event-id": String(seen) };
      response = await api(rejoinPath(live), { headers: seen >= 0 ? after : {} });
    }
  }
}

function startFollowing() {
  setRunning(true);
  hideTrace();
  state.errorShown = false;
  state.pauseShown = false;
  state.ended = false;
  state.endValues = null;
  state.firstEvent = state.events.length;
  state.streaming.clear();
  foldTopology();
  markTopology(null, null);
}

// Follow a run: `open()` answers with its stream; `live` says what it is (kind "v1" or
// "protocol", agent, session, request). Return its summary (null: refused or cut short).
async function follow(open, live) {
  startFollowing();
  const got = { summary: null };
  let runId = null;
  try {
    const response = await open();
    // a re-attached protocol stream names no checkpoint: the run's is remembered
    runId = state.liveId = response.headers.get("x-plait-checkpoint-id") || live.run_id || null;
    const location = response.headers.get("content-location");
    live = { ...live, run_id: live.run_id || runId, location: location || live.location };
    remember(live);
    fact("status", "running");
    fact("run", live.run_id || "—");
    fact("checkpoint", runId || "—");
    await readRun(response, live, got);
    if (live.kind === "protocol" && runId) got.summary = await endedSummary(runId);
    state.ended = true;
    endStreaming();
    if (got.summary) await showSummary(got.summary);
    else notice("The stream ended early; GET /v1/runs/{checkpoint_id} has the run's summary.");
    await loadTrace(runId);
  } catch (error) {
    notice(error.message);
  } finally {
    state.ended = true;
    state.liveId = null;
    setRunning(false);
    remember(null);
  }
  if (got.summary) await showNextSteps(got.summary);
  refreshSidebar();
  if (runId) await loadHistory(live.run_id || runId);
  return got.summary;
}

// Start a run of the selected agent on `text` (and the form's session values).
async function send(event) {
  event.preventDefault();
  const text = $("input").value.trim();
  const agent = $("agent").value;
  if (!text || !agent || state.running) return;
  const values = inputValues();
  if (values === undefined) return; // the form said what is wrong
  rememberInput(agent, text, values);
  $("input").value = "";
  notice("");
  $("interrupts").replaceChildren();
  state.handoffs.clear();
  $("handoffs").replaceChildren();
  fact("agent", agent);
  const assistant = selectedAssistant();
  fact("assistant", assistant ? `${assistant.name} (version ${assistant.version})` : "as served");
  addUser(text);
  state.request = text;
  state.startValues = { ...(state.sessionValues || {}), ...values };
  const live = { agent, session: state.session, request: text };
  if (assistant) return followProtocolRun(assistant, text, values, live);
  const path = `/v1/agents/${encodeURIComponent(agent)}/runs`;
  const body = { input: text, session_id: state.session, deltas: true, stream: true };
  if (Object.keys(values).length) body.session_values = values;
  const open = () => api(path, { method: "POST", body: JSON.stringify(body) });
  return follow(open, { ...live, kind: "v1" });
}

// A run with an assistant's configuration: the Agent Protocol's run on the session's thread,
// its events streamed as they are (`stream_mode` debug).
function followProtocolRun(assistant, text, values, live) {
  const body = {
    assistant_id: assistant.assistant_id,
    input: { ...values, messages: [{ role: "user", content: text }] },
    stream_mode: ["debug"],
    if_not_exists: "create",
    on_disconnect: "continue",
  };
  const path = `/threads/${encodeURIComponent(state.session)}/runs/stream`;
  const open = () => api(path, { method: "POST", body: JSON.stringify(body) });
  return follow(open, { ...live, kind: "protocol" });
}

// Re-attach to a run that goes on (after a reload, or from the list of running runs): its
// session so far, then its events from the start of its stream, as they come.
async function reattach(live) {
  if (state.running) return;
  await selectAgent(live.agent);
  clearView(live.session || state.session);
  if (live.session) await showSession(live.session);
  fact("agent", live.agent);
  if (live.request) addUser(live.request);
  state.request = live.request || "";
  addRow(0, "fork", el("span", "label", `re-attached to run ${live.run_id}`));
  const open = () => api(rejoinPath(live));
  return follow(open, live);
}

// ---- the end of a run ----------------------------------------------------------------

async function showSummary(summary) {
  const usage = summary.usage || {};
  fact("status", summary.status);
  fact("checkpoint", summary.checkpoint_id || "—");
  fact("tokens", `${usage.input_tokens || 0} in · ${usage.output_tokens || 0} out`);
  (summary.handoffs || []).forEach(addHandoff);
  if (summary.status === "completed") addAnswer(summary.final_output);
  if (summary.error && !state.errorShown) {
    addRow(0, ...errorPart(summary.error)); // once: not also its event's
  }
  state.errorShown = state.errorShown || Boolean(summary.error);
  if (summary.status === "paused" && !state.pauseShown) drawPause(summary.interrupts || [], 0);
  $("events").scrollTop = $("events").scrollHeight;
  if (summary.status !== "paused" && summary.session_id) await readEndValues(summary.session_id);
}

// The session's values once the run ended: the state after its last kept step.
async function readEndValues(sessionId) {
  try {
    const detail = await getJSON(`/v1/sessions/${encodeURIComponent(sessionId)}`);
    state.endValues = detail.values || {};
    state.sessionValues = state.endValues;
  } catch (_) {
    state.endValues = null; // a run in no session
  }
}

// What the person can do next with an ended run: answer its questions, or resume it after a
// stop. Drawn once the run is no longer running, so a control is never shown that ignores a click.
async function showNextSteps(summary) {
  $("interrupts").replaceChildren();
  if (summary.status === "paused") await showPausePanel(summary);
  if (summary.status === "cancelled" && summary.checkpoint_id) {
    $("interrupts").append(stoppedPanel(summary.checkpoint_id));
  }
}

// Resume a run (streamed) from `panel`, the form or panel that offered it; say `said`.
async function goOn(panel, checkpointId, said, body) {
  if (state.running) return;
  notice("");
  panel.inert = true;
  addUser(said);
  const path = `/v1/runs/${encodeURIComponent(checkpointId)}/resume`;
  const open = () => api(path, { method: "POST", body: JSON.stringify({ ...body, stream: true }) });
  const agent = $("agent").value;
  await follow(open, { kind: "v1", agent, session: state.session, request: state.request });
  panel.inert = false; // still shown only if the resume was refused
}

// A stopped run's panel: Resume goes on from its checkpoint (a resume with no answers).
function stoppedPanel(checkpointId) {
  const resume = button("Resume", "continue");
  const panel = el(
    "div",
    "stopped",
    el("h3", "", "Stopped: the run can go on from where it stopped"),
    el("p", "muted", "checkpoint " + checkpointId),
    resume,
  );
  const body = { deltas: true };
  resume.addEventListener("click", () => goOn(panel, checkpointId, "resumed the run", body));
  return panel;
}
