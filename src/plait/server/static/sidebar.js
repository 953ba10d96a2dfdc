// The dev page's side bar: the agents, the selected agent's sessions, and one inbox of the
// runs that wait for a person — paused runs (their approvals and unknown outcomes named with
// the call they are about) and stopped runs that can go on — from the store (every worker's:
// a reload never loses one). It uses the other scripts' helpers. Server text is only set as text.
"use strict";

function describeAgent() {
  const option = $("agent").selectedOptions[0];
  $("agent-description").textContent = option ? option.title : "";
  if (option) localStorage.setItem(AGENT_STORE, option.value);
}

async function loadAgents() {
  const agents = await getJSON("/v1/agents");
  const options = agents.map((agent) => {
    const option = el("option", "", agent.name);
    option.value = agent.name;
    option.title = agent.description;
    return option;
  });
  const kept = $("agent").value || localStorage.getItem(AGENT_STORE);
  $("agent").replaceChildren(...options);
  if (agents.some((agent) => agent.name === kept)) $("agent").value = kept;
  describeAgent();
  state.agent = $("agent").value;
}

// What the page shows of the selected agent: its sessions, picture, input form, assistants.
function agentViews(name) {
  return Promise.all([refreshSessions(), loadTopology(name), loadInputs(name), loadAssistants(name)]);
}

// Select an agent (a session or paused run of it was opened).
async function selectAgent(name) {
  if (!name || state.agent === name) return;
  $("agent").value = state.agent = name;
  describeAgent();
  await agentViews(name);
}

// Another agent was picked: a new session with it (its sessions are listed, not another's).
async function agentChanged() {
  if ($("agent").value === state.agent) return;
  state.agent = $("agent").value;
  describeAgent();
  newSession();
  await agentViews(state.agent);
}

function setSession(id) {
  state.session = id;
  $("session-id").textContent = id;
  for (const item of $("sessions").querySelectorAll("button")) {
    item.setAttribute("aria-current", String(item.dataset.session === id));
  }
}

// The sessions of the selected agent (the agent that wrote each last), newest first.
async function refreshSessions() {
  const agent = $("agent").value;
  if (!agent) return;
  try {
    const sessions = await getJSON(`/v1/sessions?agent=${encodeURIComponent(agent)}`);
    if ($("agent").value !== agent) return; // another agent was picked meanwhile
    const items = sessions.map((session) => {
      const open = () => openSession(session.session_id, session.agent);
      const item = button("", "session", open);
      item.append(session.session_id, el("small", "", when(session.updated_at)));
      item.dataset.session = session.session_id;
      return el("li", "", item);
    });
    $("sessions").replaceChildren(...items);
    $("sessions-agent").textContent = agent;
    setSession(state.session);
  } catch (error) {
    notice(error.message);
  }
}

function clearView(sessionId) {
  notice("");
  Object.assign(state, { lastPath: null, events: [], selected: null, steps: [], runId: null });
  Object.assign(state, { step: null, request: "", endValues: null, firstEvent: 0 });
  state.sessionValues = {};
  state.startValues = {};
  state.handoffs.clear();
  state.streaming.clear();
  state.errorShown = false;
  for (const id of ["events", "interrupts", "handoffs", "run-facts", "steps"]) {
    $(id).replaceChildren();
  }
  $("history").hidden = true;
  $("state-view").hidden = true;
  hideTrace();
  markTopology(null, null);
  setSession(sessionId);
}

function newSession() {
  const random = Math.random().toString(36).slice(2, 8);
  clearView(`chat-${Date.now().toString(36)}-${random}`);
}

// Show a session's messages (its turns so far), drawn as a run's; false when it has none.
async function showSession(id) {
  let detail;
  try {
    detail = await getJSON(`/v1/sessions/${encodeURIComponent(id)}`);
  } catch (_) {
    return false; // a first turn that paused is in no session yet
  }
  drawMessages(detail.messages);
  detail.handoffs.forEach(addHandoff);
  state.sessionValues = detail.values || {};
  return true;
}

async function openSession(id, agent) {
  if (state.running) return;
  try {
    await selectAgent(agent);
    await getJSON(`/v1/sessions/${encodeURIComponent(id)}`); // refused: keep the view
    clearView(id);
    await showSession(id);
  } catch (error) {
    notice(error.message);
  }
}

// ---- the inbox -----------------------------------------------------------------------

// The runs that wait: paused ones and stopped ones with a checkpoint, newest first.
async function waitingRuns() {
  const pages = await Promise.all(
    ["paused", "cancelled"].map((status) => getJSON(`/v1/runs?status=${status}&limit=50`)),
  );
  const runs = pages.flatMap((page) => page.runs).filter((run) => run.checkpoint_id);
  return runs.sort((a, b) => Date.parse(b.updated_at) - Date.parse(a.updated_at));
}

// What a waiting run asks, in one line (an approval: the tool and its exact arguments).
function inboxLine(run) {
  if (run.status === "cancelled") return ["stopped", null];
  const first = (run.interrupts || [])[0];
  if (!first) return ["paused", null];
  const call = callOf(first.info);
  return [questionOf(first.info), call ? pretty(call.arguments) : null];
}

function inboxItem(run) {
  const [line, args] = inboxLine(run);
  const item = button("", "paused-run", () => openPausedRun(run));
  item.append(el("b", "", run.agent), el("span", "", " " + line));
  if (args) item.append(el("code", "inbox-args", args));
  item.append(el("small", "", when(run.updated_at)));
  item.dataset.run = run.run_id;
  item.dataset.status = run.status;
  item.dataset.kind = run.status === "cancelled" ? "stopped" : kindOf((run.interrupts[0] || {}).info);
  return el("li", "", item);
}

async function refreshInbox() {
  try {
    const runs = await waitingRuns();
    $("inbox").dataset.read = "true";
    const shown = runs.map((run) => `${run.run_id}:${run.status}:${run.updated_at}`).join(",");
    if ($("inbox").dataset.shown === shown) return; // keep the list still between two looks
    $("inbox").dataset.shown = shown;
    $("inbox").replaceChildren(...runs.map(inboxItem));
    $("inbox-count").textContent = runs.length ? String(runs.length) : "";
    if (!runs.length) $("inbox").append(el("li", "muted", "nothing waits for you"));
  } catch (error) {
    $("inbox").replaceChildren(el("li", "muted refused", error.message));
    $("inbox").dataset.read = "false";
    delete $("inbox").dataset.shown; // the next read draws the list again
  }
}

// Reopen a paused (or stopped) run, drawn as the live run was: its session so far, its turn
// (the request and what the agents did), the pause under the agent that asked, and its panel
// (the questions beside what led to them, or Resume).
async function openPausedRun(run) {
  if (state.running) return;
  await selectAgent(run.agent);
  clearView(run.session_id || state.session);
  if (run.session_id) await showSession(run.session_id);
  const turn = await readTurn(run.checkpoint_id);
  if (turn) drawMessages(turn.turn, false); // a turn not ended has no answer yet
  state.request = turn ? lastUserText(turn.request) : "";
  fact("agent", run.agent);
  fact("run", run.run_id);
  await showSummary(run);
  await showNextSteps(run);
  await loadHistory(run.checkpoint_id);
}
