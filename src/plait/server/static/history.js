// The dev page's time travel: a run's kept steps (GET /v1/runs/{id}/history), the state as of
// any event of the run in view — editable, and forked from (POST /v1/runs/{id}/fork) — and
// each step's own state with a fork from it. It uses the other scripts' helpers and state.
// Server text is only set as text.
"use strict";

// One line saying what an event was (its agent, and what it carried).
function describeEvent(event) {
  if (!event) return "none";
  const output = event.output || {};
  const action = event.action || {};
  let what = "";
  if (output.message) {
    const message = messageOf(output.message);
    if (message.role === "tool") what = `${message.name || "tool"} result: ${message.content}`;
    else if ((message.tool_calls || []).length) {
      what = "calls " + message.tool_calls.map((call) => call.name).join(", ");
    } else what = message.content;
  } else if (action.transfer_to_agent) {
    what = "transfer → " + action.transfer_to_agent.dest_agent_name;
  } else if (output.custom != null) what = JSON.stringify(output.custom);
  else if (event.error) what = errorLine(event.error);
  return `${event.agent_name}: ${what}`;
}

async function loadHistory(runId) {
  let steps = [];
  try {
    steps = await getJSON(`/v1/runs/${encodeURIComponent(runId)}/history`);
  } catch (_) {
    steps = []; // a run the server keeps no steps of
  }
  state.runId = runId;
  state.step = null;
  state.steps = steps;
  showStateAt(state.selected);
  const items = steps.map((kept) => {
    const pick = button(`step ${kept.step}`, "step", () => showStep(kept));
    pick.append(el("small", "", kept.agent));
    pick.dataset.step = String(kept.step);
    return el("li", "", pick);
  });
  $("steps").replaceChildren(...items);
  $("history").hidden = steps.length === 0;
  $("step-detail").hidden = true;
}

function showStep(kept) {
  state.step = kept.step;
  for (const pick of $("steps").querySelectorAll("button")) {
    pick.setAttribute("aria-current", String(pick.dataset.step === String(kept.step)));
  }
  $("step-title").textContent = `Step ${kept.step} (${kept.agent})`;
  $("step-values").textContent = show(kept.session_values || {});
  $("step-state").textContent = show(kept.state || {});
  $("step-event").textContent = describeEvent(kept.event);
  $("step-event-json").textContent = show(kept.event);
  $("fork-values").value = JSON.stringify(kept.session_values || {}, null, 2);
  $("step-detail").hidden = false;
}

// Fork run `runId` from step `step` with the session values typed in `field`.
async function forkFrom(runId, step, field) {
  if (state.running || runId === null || step === null) return;
  const typed = parseTyped(field.value.trim() || "null", "The session values");
  if (!typed.ok) return notice(typed.message);
  const values = typed.value;
  if (values !== null && (typeof values !== "object" || Array.isArray(values))) {
    return notice("The session values must be a JSON object.");
  }
  notice("");
  state.lastPath = null;
  state.handoffs.clear();
  for (const id of ["events", "interrupts", "handoffs"]) $(id).replaceChildren();
  state.events = [];
  state.selected = null;
  $("state-view").hidden = true;
  fact("forked from", `${runId}, step ${step}`);
  addRow(0, "fork", el("span", "label", `fork of run ${runId} from step ${step}`));
  state.startValues = values || {};
  const path = `/v1/runs/${encodeURIComponent(runId)}/fork`;
  const body = JSON.stringify({ step, session_values: values, stream: true });
  const open = () => api(path, { method: "POST", body });
  await follow(open, { kind: "v1", agent: $("agent").value, session: null, request: state.request });
}

function fork(event) {
  event.preventDefault();
  return forkFrom(state.runId, state.step, $("fork-values"));
}

// ---- the state at an event -------------------------------------------------------------

// JSON text with the keys of every object sorted: the same event, however it was encoded.
function canonical(value) {
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (value && typeof value === "object") {
    const keys = Object.keys(value).filter((k) => value[k] !== null).sort();
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
  }
  return JSON.stringify(value);
}

// The kept step in force at event `index` of the view, with the index of its event
// ({kept: null} when no step was kept at or before it).
function stepAt(index) {
  const seen = state.events.map((event) => canonical(event));
  let found = null;
  let at = -2;
  for (const kept of state.steps || []) {
    const where = kept.event ? seen.lastIndexOf(canonical(kept.event)) : -1;
    if (kept.event && where < 0) continue; // an event of an earlier part of the run
    if (where <= index && where >= at) {
      found = kept;
      at = where;
    }
  }
  return { kept: found, at };
}

// The state at event `index`: {values, team, source, step} — a kept step's (the last kept
// at or before it); after the run's last kept step, the session's values at its end; before
// its first, the values it started with. Null: an event of an earlier part of the run.
function stateAt(index) {
  const { kept, at } = stepAt(index);
  const steps = state.steps || [];
  if (kept && kept === steps[steps.length - 1] && index > at && state.endValues !== null) {
    const source = `the session's values at the run's end (after its last kept step, ${kept.step})`;
    return { values: state.endValues, team: kept.state || {}, source, step: kept.step };
  }
  if (kept) {
    const source = `as of step ${kept.step} (${kept.agent})`;
    return { values: kept.session_values || {}, team: kept.state || {}, source, step: kept.step };
  }
  if (index < state.firstEvent) return null;
  const source = "as the run started (before its first kept step)";
  return { values: state.startValues || {}, team: {}, source, step: null };
}

// Apply a graph node's update to a graph's state, by each key's reducer (the state schema's
// `x-plait-reducer`): appended, merged, or replaced; another reducer's key is marked unknown.
function applyUpdate(graphState, update) {
  const properties = (state.stateSchema || {}).properties || {};
  for (const [key, value] of Object.entries(update || {})) {
    const reducer = (properties[key] || {})["x-plait-reducer"];
    const now = graphState[key];
    if (reducer === "append") graphState[key] = [...(now || []), ...(Array.isArray(value) ? value : [value])];
    else if (reducer === "merge") graphState[key] = { ...(now || {}), ...(value || {}) };
    else if (reducer) graphState[key] = "(unknown: a custom reducer)";
    else graphState[key] = value;
  }
}

// The state of each graph of the run at event `index`, folded from its nodes' updates
// (null: no graph node ran yet).
function graphStatesAt(index) {
  const graphs = new Map();
  const start = { messages: state.request ? [{ role: "user", content: state.request }] : [] };
  const keys = Object.keys((state.stateSchema || {}).properties || {});
  for (const key of keys) if (key in (state.startValues || {})) start[key] = state.startValues[key];
  for (let i = state.firstEvent; i <= index && i < state.events.length; i++) {
    const custom = (state.events[i].output || {}).custom;
    if (!custom || typeof custom !== "object" || !("node" in custom) || !("update" in custom)) continue;
    const path = pathOf(state.events[i]);
    if (!graphs.has(path)) graphs.set(path, JSON.parse(JSON.stringify(start)));
    applyUpdate(graphs.get(path), custom.update);
  }
  return graphs.size ? graphs : null;
}

function showGraphState(index) {
  const graphs = graphStatesAt(index);
  $("state-graph-section").hidden = !graphs;
  if (!graphs) return;
  const shown = [...graphs].map(([path, value]) => (graphs.size > 1 ? path + ": " : "") + show(value));
  $("state-graph").textContent = shown.join("\n\n");
}

function showStateAt(index) {
  if (index === null || index === undefined || !state.events[index]) {
    $("state-view").hidden = true;
    return;
  }
  const event = state.events[index];
  const found = stateAt(index);
  $("state-title").textContent = `After event ${index + 1} (${event.agent_name})`;
  $("state-step").textContent = found ? found.source : "an earlier part of the run: not known here";
  $("state-values").textContent = found ? show(found.values) : "—";
  $("state-team").textContent = found ? show(found.team) : "—";
  showGraphState(index);
  $("state-edit").value = found ? JSON.stringify(found.values, null, 2) : "";
  const step = found ? found.step : null;
  $("state-fork").disabled = step === null;
  $("state-fork").dataset.step = step === null ? "" : String(step);
  $("state-fork-note").textContent =
    step === null
      ? "No step was kept at or before this event: a fork starts from a kept step."
      : `The fork goes on from step ${step} with these session values.`;
  $("state-view").hidden = false;
}

function selectEvent(index) {
  state.selected = index;
  for (const row of $("events").querySelectorAll(".row[aria-selected]")) {
    row.removeAttribute("aria-selected");
  }
  for (const row of $("events").querySelectorAll(`.row[data-event="${index}"]`)) {
    row.setAttribute("aria-selected", "true");
  }
  showStateAt(index);
}

function forkAtEvent(event) {
  event.preventDefault();
  const step = $("state-fork").dataset.step;
  if (step === "") return;
  return forkFrom(state.runId, Number(step), $("state-edit"));
}

function historyStart() {
  $("fork-form").addEventListener("submit", fork);
  $("state-form").addEventListener("submit", forkAtEvent);
}
