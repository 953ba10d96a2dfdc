// The dev page's pause panel: each pending interrupt's question and its answers, beside what
// led to it — the request, the agents on its path, the tool that asked and its arguments
// (GET /v1/runs/{id}/turn, from the run's checkpoint; the same live or reopened).
// It uses api.js's helpers, events.js's and approvals.js's. Server text is only set as text.
"use strict";

async function readTurn(runId) {
  try {
    return await getJSON(`/v1/runs/${encodeURIComponent(runId)}/turn`);
  } catch (_) {
    return null; // a run the server keeps no checkpoint of: the panel says less
  }
}

function lastUserText(messages) {
  const found = (messages || []).filter((message) => message.role === "user").pop();
  return found ? found.content : "";
}

// The arguments of tool call `callId` among the events in view (null: not seen).
function argumentsSeen(callId) {
  for (const event of state.events) {
    const variant = (event.output || {}).message;
    if (!variant) continue;
    for (const call of messageOf(variant).tool_calls || []) {
      if (call.id === callId) return pretty(call.arguments);
    }
  }
  return null;
}

// What asked, and about what: {agents, tool, arguments} of an interrupt.
function whatAsked(pending, asked) {
  const call = callOf(pending.info);
  const agents = asked ? asked.agents : agentsOf(pending.address);
  let tool = asked ? asked.tool : null;
  let args = asked && asked.arguments != null ? pretty(asked.arguments) : null;
  if (call) {
    tool = call.tool;
    args = pretty(call.arguments);
  }
  if (args === null && asked && asked.call_id) args = argumentsSeen(asked.call_id);
  return { agents, tool, args };
}

function why(name, className, value) {
  const dd = el("dd", className, value);
  return [el("dt", "", name), dd];
}

// The column beside the question: the request, the agent path, the tool and its arguments.
function whyPanel(pending, asked, request) {
  const found = whatAsked(pending, asked);
  const list = el("dl", "why");
  list.append(...why("request", "request", request || "—"));
  list.append(...why("agent path", "agent-path", found.agents.join(" › ") || "—"));
  list.append(...why("tool", "tool", found.tool || "— (not asked by a tool)"));
  if (found.tool) list.append(...why("arguments", "", el("pre", "arguments", found.args || "—")));
  const call = callOf(pending.info);
  if (call && call.fingerprint) list.append(...why("fingerprint", "fingerprint", call.fingerprint));
  if (call && call.expires_at) list.append(...why("expires", "", call.expires_at));
  const raw = el("details", "", el("summary", "", "info (JSON)"), el("pre", "", show(pending.info)));
  list.append(...why("info", "", raw));
  return list;
}

// The answers to a plain question: Approve ("approve"), Reject ("reject") or any JSON value.
function questionAnswers(answer) {
  const value = el("textarea");
  value.rows = 2;
  value.placeholder = 'A JSON value, e.g. {"approved": true}';
  value.setAttribute("aria-label", "answer (JSON)");
  const send = el("button", "value", "Send value");
  send.type = "submit";
  const submit = (event) => {
    event.preventDefault();
    const typed = parseTyped(value.value, "The answer");
    if (typed.ok) answer(typed.value);
    else notice(typed.message);
  };
  return {
    nodes: [
      button("Approve", "approve", () => answer("approve")),
      button("Reject", "reject", () => answer("reject")),
      value,
      send,
    ],
    submit,
  };
}

function interruptForm(checkpointId, pending, asked, request) {
  const kind = kindOf(pending.info);
  const asker = askerOf(pending.address);
  const form = el("form", "interrupt");
  form.dataset.interrupt = pending.id;
  form.dataset.kind = kind;
  const answer = (v) => resume(form, checkpointId, pending.id, v);
  const ask = el(
    "div",
    "ask",
    el("h3", "", `Paused: ${asker || "this run"} needs an answer`),
    el("p", "question", questionOf(pending.info)),
  );
  if (kind === "question") {
    const plain = questionAnswers(answer);
    ask.append(el("div", "answers", ...plain.nodes));
    form.addEventListener("submit", plain.submit);
  } else {
    ask.append(el("div", "answers", ...approvalAnswers(pending.info, answer)));
    form.addEventListener("submit", (event) => event.preventDefault());
  }
  form.append(ask, whyPanel(pending, asked, request));
  return form;
}

function resume(form, checkpointId, interruptId, value) {
  const body = { targets: { [interruptId]: value }, deltas: true };
  return goOn(form, checkpointId, "answered " + show(value), body);
}

// Show a paused run's panel: its questions beside what led to them.
async function showPausePanel(summary) {
  const turn = await readTurn(summary.checkpoint_id);
  const asked = new Map(((turn && turn.interrupts) || []).map((i) => [i.interrupt_id, i]));
  const request = (turn && lastUserText(turn.request)) || state.request;
  $("interrupts").replaceChildren();
  for (const pending of summary.interrupts || []) {
    const form = interruptForm(summary.checkpoint_id, pending, asked.get(pending.id), request);
    $("interrupts").append(form);
  }
}
