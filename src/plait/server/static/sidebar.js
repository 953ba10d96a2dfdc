// The dev page's side bar: the agents, the selected agent's sessions, and the inbox of paused
// and stopped runs (GET /v1/runs?status=…: every worker's, so a reload never loses one).
// It uses app.js's helpers and state. Server text is only set as text.
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
  $("agent").replaceChildren(...options);
  const saved = localStorage.getItem(AGENT_STORE);
  if (agents.some((agent) => agent.name === saved)) $("agent").value = saved;
  describeAgent();
  state.agent = $("agent").value;
}

// Select an agent (a session or paused run of it was opened): its sessions and picture.
async function selectAgent(name) {
  if (!name || state.agent === name) return;
  $("agent").value = state.agent = name;
  describeAgent();
  await Promise.all([refreshSessions(), loadTopology(name)]);
}

// Another agent was picked: a new session with it (its sessions are listed, not another's).
async function agentChanged() {
  if ($("agent").value === state.agent) return;
  state.agent = $("agent").value;
  describeAgent();
  newSession();
  await Promise.all([refreshSessions(), loadTopology($("agent").value)]);
}

function setSession(id) {
  state.session = id;
  $("session-id").textContent = id;
  for (const button of $("sessions").querySelectorAll("button")) {
    button.setAttribute("aria-current", String(button.dataset.session === id));
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
      const when = new Date(session.updated_at).toLocaleString();
      const button = el("button", "session", session.session_id, el("small", "", when));
      button.type = "button";
      button.dataset.session = session.session_id;
      button.addEventListener("click", () => openSession(session.session_id, session.agent));
      return el("li", "", button);
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
  state.lastPath = null;
  state.handoffs.clear();
  state.events = [];
  state.streaming.clear();
  state.errorShown = false;
  state.selected = null;
  state.steps = [];
  for (const id of ["events", "interrupts", "handoffs", "run-facts", "steps"]) {
    $(id).replaceChildren();
  }
  $("history").hidden = true;
  $("state-view").hidden = true;
  state.runId = null;
  state.step = null;
  hideTrace();
  markTopology(null, null);
  setSession(sessionId);
}

function newSession() {
  const random = Math.random().toString(36).slice(2, 8);
  clearView(`chat-${Date.now().toString(36)}-${random}`);
}

// Show a session's messages (its turns so far); false when it has none yet.
async function showSession(id) {
  let detail;
  try {
    detail = await getJSON(`/v1/sessions/${encodeURIComponent(id)}`);
  } catch (_) {
    return false; // a first turn that paused is in no session yet
  }
  let author = null;
  for (const message of detail.messages) {
    if (message.role === "user") {
      addRow(0, "user", el("span", "who", "you"), el("div", "text", message.content));
      author = null;
      continue;
    }
    if (message.author !== author) addAuthor(0, message.author, "");
    author = message.author;
    for (const [kind, ...nodes] of messageParts(message)) addRow(0, kind, ...nodes);
  }
  detail.handoffs.forEach(addHandoff);
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

// ---- the inbox: paused runs waiting for a person, stopped runs that can go on -------------

function pauseQuestion(run) {
  if (run.status === "cancelled") return "stopped";
  const first = (run.interrupts || [])[0];
  if (!first) return "paused";
  const info = first.info;
  if (info && typeof info === "object" && typeof info.question === "string") return info.question;
  return show(info);
}

// The runs that wait: paused ones and stopped ones with a checkpoint, newest first.
async function waitingRuns() {
  const pages = await Promise.all(
    ["paused", "cancelled"].map((status) => getJSON(`/v1/runs?status=${status}&limit=50`)),
  );
  const runs = pages.flatMap((page) => page.runs).filter((run) => run.checkpoint_id);
  return runs.sort((a, b) => Date.parse(b.updated_at) - Date.parse(a.updated_at));
}

async function refreshInbox() {
  try {
    const items = (await waitingRuns()).map((run) => {
      const when = new Date(run.updated_at).toLocaleString();
      const button = el(
        "button",
        "paused-run",
        el("b", "", run.agent),
        el("span", "", " " + pauseQuestion(run)),
        el("small", "", when),
      );
      button.type = "button";
      button.dataset.run = run.run_id;
      button.dataset.status = run.status;
      button.addEventListener("click", () => openPausedRun(run));
      return el("li", "", button);
    });
    $("inbox").replaceChildren(...items);
    $("inbox-count").textContent = items.length ? String(items.length) : "";
  } catch (error) {
    notice(error.message);
  }
}

// Reopen a paused (or stopped) run: its agent, its session so far, its facts and its panel
// (the interrupts to answer, or Resume).
async function openPausedRun(run) {
  if (state.running) return;
  await selectAgent(run.agent);
  clearView(run.session_id || state.session);
  if (run.session_id) await showSession(run.session_id);
  fact("agent", run.agent);
  fact("run", run.run_id);
  const what = run.status === "cancelled" ? "stopped" : "paused";
  addRow(0, "fork", el("span", "label", `${what} run ${run.run_id}`));
  showSummary(run);
  showNextSteps(run);
  await loadHistory(run.checkpoint_id);
}
