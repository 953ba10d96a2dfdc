// The dev page's time travel: a run's kept steps (GET /v1/runs/{id}/history), forks from them,
// and the state (session values, team state) as of any event of the run in view.
// It uses app.js's helpers and state. Server text is only set as text.
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
    const button = el("button", "step", `step ${kept.step}`, el("small", "", kept.agent));
    button.type = "button";
    button.dataset.step = String(kept.step);
    button.addEventListener("click", () => showStep(kept));
    return el("li", "", button);
  });
  $("steps").replaceChildren(...items);
  $("history").hidden = steps.length === 0;
  $("step-detail").hidden = true;
}

function showStep(kept) {
  state.step = kept.step;
  for (const button of $("steps").querySelectorAll("button")) {
    button.setAttribute("aria-current", String(button.dataset.step === String(kept.step)));
  }
  $("step-title").textContent = `Step ${kept.step} (${kept.agent})`;
  $("step-values").textContent = show(kept.session_values || {});
  $("step-state").textContent = show(kept.state || {});
  $("step-event").textContent = describeEvent(kept.event);
  $("step-event-json").textContent = show(kept.event);
  $("fork-values").value = JSON.stringify(kept.session_values || {}, null, 2);
  $("step-detail").hidden = false;
}

async function fork(event) {
  event.preventDefault();
  const runId = state.runId;
  const step = state.step;
  if (state.running || runId === null || step === null) return;
  let values;
  try {
    values = JSON.parse($("fork-values").value.trim() || "null");
  } catch (error) {
    notice("The session values are not JSON: " + error.message);
    return;
  }
  if (values !== null && (typeof values !== "object" || Array.isArray(values))) {
    notice("The session values must be a JSON object.");
    return;
  }
  notice("");
  state.lastPath = null;
  state.handoffs.clear();
  for (const id of ["events", "interrupts", "handoffs"]) $(id).replaceChildren();
  fact("forked from", `${runId}, step ${step}`);
  addRow(0, "fork", el("span", "label", `fork of run ${runId} from step ${step}`));
  const path = `/v1/runs/${encodeURIComponent(runId)}/fork`;
  await stream(path, { step, session_values: values });
}

// ---- the state at an event: the session values and team state as of the last step the run
// kept at or before it (a step records the last event before it)

// JSON text with the keys of every object sorted: the same event, however it was encoded.
function canonical(value) {
  if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
  if (value && typeof value === "object") {
    const keys = Object.keys(value).filter((k) => value[k] !== null).sort();
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
  }
  return JSON.stringify(value);
}

// The kept step in force at event `index` of the view (null: none known).
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
  return found;
}

function showStateAt(index) {
  if (index === null || index === undefined || !state.events[index]) {
    $("state-view").hidden = true;
    return;
  }
  const event = state.events[index];
  const kept = stepAt(index);
  $("state-title").textContent = `After event ${index + 1} (${event.agent_name})`;
  $("state-step").textContent = kept
    ? `as of step ${kept.step} (${kept.agent})`
    : "no step kept yet: the run's state is not known here";
  $("state-values").textContent = kept ? show(kept.session_values || {}) : "—";
  $("state-team").textContent = kept ? show(kept.state || {}) : "—";
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
