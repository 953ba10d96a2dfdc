// The plait dev page: a client of plait's HTTP API, and of nothing else.
// Text from the server is only ever set as text (textContent, text nodes), never as HTML.
"use strict";

const KEY_STORE = "plait.apiKey";
const AGENT_STORE = "plait.agent";
const $ = (id) => document.getElementById(id);
const state = {
  session: "",
  agent: "", // the agent selected
  running: false,
  lastPath: null,
  handoffs: new Set(),
  runId: null, // the run whose steps are listed
  step: null, // the step shown, to fork from
  steps: [], // the kept steps of that run
  events: [], // the events of the run in view, in order
  selected: null, // the index of the event whose state is shown
  streaming: new Map(), // run path -> the row its streamed text goes into
  errorShown: false, // the run's error is on the page already
  pauseShown: false, // its pause too
  liveId: null, // the checkpoint id of the live run (what Stop cancels)
  ended: true, // the live run's stream has ended
};

// ---- small helpers -------------------------------------------------------------------

function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  for (const child of children) {
    if (child !== null && child !== undefined && child !== "") node.append(child);
  }
  return node;
}

function show(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

// Tool arguments (JSON text): on one line when short, indented when long.
function pretty(jsonText) {
  try {
    const value = JSON.parse(jsonText);
    const line = JSON.stringify(value);
    return line.length > 80 ? show(value) : line;
  } catch (_) {
    return jsonText;
  }
}

function errorLine(error) {
  return `${error.type}: ${error.message}`;
}

// A run ends with RunCancelled when it was stopped (Stop, or the server going down): it is
// saved and can go on, so it is drawn as stopped, not as a failure or a question.
function isStop(error) {
  return Boolean(error) && error.type === "RunCancelled";
}

// The row parts of a run's error: [kind, ...nodes].
function errorPart(error) {
  if (!isStop(error)) return ["error", el("span", "", errorLine(error))];
  return ["stopped", el("span", "label", "stopped"), el("div", "muted", error.message)];
}

function count(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function notice(text) {
  $("notice").textContent = text || "";
  $("notice").hidden = !text;
}

function fact(name, value) {
  let dd = $("run-facts").querySelector(`dd[data-fact="${name}"]`);
  if (!dd) {
    dd = el("dd");
    dd.dataset.fact = name;
    $("run-facts").append(el("dt", "", name), dd);
  }
  dd.textContent = value;
}

// ---- the API -------------------------------------------------------------------------

function headers(hasBody) {
  const found = hasBody ? { "content-type": "application/json" } : {};
  const key = localStorage.getItem(KEY_STORE);
  if (key) found.authorization = "Bearer " + key;
  return found;
}

async function errorText(response) {
  let message = response.statusText;
  try {
    message = (await response.json()).error.message;
  } catch (_) {
    // not a plait error body: keep the status text
  }
  if (response.status === 401) return "This server needs a valid API key: enter it above.";
  return `${response.status}: ${message}`;
}

async function api(path, options = {}) {
  const init = { ...options, headers: headers(options.body !== undefined) };
  const response = await fetch(path, init);
  if (!response.ok) throw new Error(await errorText(response));
  return response;
}

async function getJSON(path) {
  return (await api(path)).json();
}

// Read a text/event-stream body (EventSource cannot POST): call onEvent(name, data).
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let name = "message";
  let data = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    const lines = buffer.split(/\r?\n/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === "") {
        if (data.length) onEvent(name, JSON.parse(data.join("\n")));
        name = "message";
        data = [];
      } else if (line.startsWith("event:")) {
        name = line.slice(6).trim();
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      } // ":" lines are keep-alive comments
    }
  }
}

// ---- the event tree ------------------------------------------------------------------

function addRow(depth, kind, ...nodes) {
  const row = el("li", "row " + kind, ...nodes);
  row.dataset.depth = String(depth);
  row.style.setProperty("--depth", String(depth));
  $("events").append(row);
  row.scrollIntoView({ block: "nearest" });
  return row;
}

function addAuthor(depth, name, path) {
  const row = addRow(depth, "agent", el("span", "who", name), el("span", "path", path));
  row.dataset.agent = name;
}

// The whole message of an event: as sent, or merged from its streamed chunks.
function messageOf(variant) {
  if (variant.message) return variant.message;
  const chunks = variant.stream || [];
  const calls = [];
  const byIndex = new Map();
  for (const chunk of chunks) {
    for (const part of chunk.tool_calls || []) {
      let call = part.index != null ? byIndex.get(part.index) : calls[calls.length - 1];
      const fresh = part.index == null && part.id && call && call.id && part.id !== call.id;
      if (!call || fresh) {
        call = { id: "", name: "", arguments: "" };
        calls.push(call);
        if (part.index != null) byIndex.set(part.index, call);
      }
      call.id = call.id || part.id || "";
      call.name = call.name || part.name || "";
      call.arguments += part.arguments || "";
    }
  }
  const content = chunks.map((chunk) => chunk.content || "").join("");
  return { role: variant.role, content, tool_calls: calls, name: variant.tool_name };
}

function messageParts(message) {
  if (message.role === "tool") {
    const label = el("span", "label", "← " + (message.name || "tool") + " result");
    return [["tool-result", label, el("pre", "", message.content)]];
  }
  const parts = [];
  if (message.content) parts.push(["text", el("div", "text", message.content)]);
  for (const call of message.tool_calls || []) {
    const label = el("span", "label", "→ " + call.name);
    parts.push(["tool-call", label, el("pre", "", pretty(call.arguments))]);
  }
  return parts;
}

function eventParts(event) {
  const parts = [];
  const output = event.output || {};
  const action = event.action || {};
  const transfer = action.transfer_to_agent;
  if (output.message && !transfer) parts.push(...messageParts(messageOf(output.message)));
  if (output.custom != null) parts.push(["custom", el("pre", "", show(output.custom))]);
  if (transfer) {
    const why = transfer.reason ? ` (${transfer.reason})` : "";
    parts.push(["transfer", el("span", "label", "transfer → " + transfer.dest_agent_name + why)]);
  }
  if (event.handoff) {
    addHandoff(event.handoff);
    const h = event.handoff;
    parts.push(["handoff", el("span", "label", `handoff ${h.from_agent} → ${h.to_agent}`)]);
  }
  if (event.error) parts.push(errorPart(event.error));
  return parts;
}

function pathOf(event) {
  return (event.run_path || []).join(" › ");
}

function authorFor(event) {
  const path = pathOf(event);
  if (path !== state.lastPath) {
    state.lastPath = path;
    addAuthor(event.depth || 0, event.agent_name, path);
  }
}

// A button that shows (or hides) the event's raw JSON under its rows.
function rawToggle(index) {
  const button = el("button", "raw"); // its "{ }" is drawn by the style sheet
  button.type = "button";
  button.title = "Show the event's JSON";
  button.setAttribute("aria-label", "raw JSON");
  button.addEventListener("click", (click) => {
    click.stopPropagation();
    const open = $("events").querySelector(`.raw-json[data-event="${index}"]`);
    if (open) return open.remove();
    const rows = $("events").querySelectorAll(`.row[data-event="${index}"]`);
    const pre = el("pre", "", JSON.stringify(state.events[index], null, 2));
    const item = el("li", "row raw-json", pre);
    item.dataset.event = String(index);
    item.style.setProperty("--depth", rows[0].dataset.depth);
    rows[rows.length - 1].after(item);
  });
  return button;
}

function renderEvent(event) {
  const index = state.events.length;
  state.events.push(event);
  const depth = event.depth || 0;
  const key = (event.run_path || []).join("/");
  const live = state.streaming.get(key);
  const message = (event.output || {}).message;
  if (live && message && message.role === "assistant") {
    live.remove(); // its text comes whole with the event
    state.streaming.delete(key);
  }
  authorFor(event);
  const parts = eventParts(event);
  if (event.error) state.errorShown = true;
  const rows = parts.map(([kind, ...nodes]) => addRow(depth, kind, ...nodes));
  const interrupted = (event.action || {}).interrupted;
  const paused = interrupted && !isStop(event.error); // a stopped run asks nobody
  if (paused) rows.push(...drawPause(interrupted.contexts || [], depth));
  // an event without a message after streamed text: the event of a reply cut short
  if (!rows.length && live && state.streaming.get(key) === live) rows.push(cutShort(key));
  if (!rows.length) rows.push(addRow(depth, "event", el("span", "muted", "event")));
  for (const row of rows) {
    row.dataset.event = String(index);
    row.addEventListener("click", () => selectEvent(index));
  }
  rows[0].prepend(rawToggle(index));
  markTopology(event.run_path, null);
}

// The agent whose tool asked: the last agent named in an interrupt's address.
function askerOf(address) {
  const agents = (address || "").split(";").filter((part) => part.startsWith("agent:"));
  return agents.length ? agents[agents.length - 1].slice(6) : null;
}

// Draw each pause under the agent whose tool asked (not the agent at the top of the run).
function drawPause(contexts, depth) {
  state.pauseShown = true;
  const rows = [];
  for (const pending of contexts.length ? contexts : [{ address: "" }]) {
    const asker = askerOf(pending.address);
    const named = `.row.agent[data-agent="${CSS.escape(asker || "")}"]`;
    const under = [...$("events").querySelectorAll(named)].pop();
    const current = [...$("events").querySelectorAll(".row.agent")].pop();
    const at = under ? Number(under.dataset.depth) : depth;
    if (asker && (!current || current.dataset.agent !== asker)) {
      addAuthor(at, asker, under ? under.querySelector(".path").textContent : "");
      state.lastPath = null;
    }
    const label = el("span", "label", `paused: ${asker || "the run"} asks a person`);
    const info = pending.info != null ? el("pre", "", show(pending.info)) : null;
    const row = addRow(at, "interrupt", label, info);
    row.dataset.asker = asker || "";
    rows.push(row);
    markTopology(null, asker);
  }
  return rows;
}

// A chunk of streamed text: into its agent's live row, as it comes.
function renderDelta(delta) {
  const key = (delta.run_path || []).join("/");
  let row = state.streaming.get(key);
  if (!row) {
    authorFor(delta);
    row = addRow(delta.depth || 0, "text streaming", el("div", "text", ""));
    state.streaming.set(key, row);
  }
  row.querySelector(".text").append(delta.delta);
  row.scrollIntoView({ block: "nearest" });
}

function addHandoff(h) {
  const key = [h.timestamp, h.from_agent, h.to_agent].join("|");
  if (state.handoffs.has(key)) return;
  state.handoffs.add(key);
  const time = el("time", "", String(h.timestamp).slice(11, 19)); // UTC, as the log says
  $("handoffs").append(
    el(
      "li",
      "",
      el("div", "", time, " ", el("b", "", h.from_agent), " → ", el("b", "", h.to_agent)),
      h.reason ? el("div", "", "reason: " + h.reason) : null,
      h.message ? el("div", "muted", "“" + h.message + "”") : null,
      el("div", "muted", `${count(h.step_count, "step")} · ${count(h.tokens_used, "token")}`),
    ),
  );
}

// ---- runs ----------------------------------------------------------------------------

function showSummary(summary) {
  const usage = summary.usage || {};
  fact("status", summary.status);
  fact("checkpoint", summary.checkpoint_id || "—");
  fact("tokens", `${usage.input_tokens || 0} in · ${usage.output_tokens || 0} out`);
  (summary.handoffs || []).forEach(addHandoff);
  if (summary.status === "completed") {
    const answer = el("div", "text", show(summary.final_output));
    addRow(0, "final", el("span", "label", "final answer"), answer);
  }
  if (summary.error && !state.errorShown) {
    addRow(0, ...errorPart(summary.error)); // once: not also its event's
  }
  state.errorShown = state.errorShown || Boolean(summary.error);
  if (summary.status === "paused" && !state.pauseShown) drawPause(summary.interrupts || [], 0);
  $("events").scrollTop = $("events").scrollHeight;
}

// What the person can do next with an ended run: answer its questions, or resume it after a
// stop. Drawn once the run is no longer running, so a control is never shown that ignores a click.
function showNextSteps(summary) {
  $("interrupts").replaceChildren();
  if (summary.status === "paused") {
    for (const pending of summary.interrupts || []) {
      $("interrupts").append(interruptForm(summary.checkpoint_id, pending));
    }
  }
  if (summary.status === "cancelled" && summary.checkpoint_id) {
    $("interrupts").append(stoppedPanel(summary.checkpoint_id));
  }
}

function setRunning(running) {
  state.running = running;
  $("send").disabled = running;
  $("stop").hidden = !running;
  $("stop").disabled = !running;
  document.body.classList.toggle("running", running);
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

// Streamed text whose whole message never came (the run stopped or failed mid-reply): no
// longer drawn as being written. Return its row.
function cutShort(key) {
  const row = state.streaming.get(key);
  state.streaming.delete(key);
  row.classList.replace("streaming", "cut");
  row.title = "The reply stopped here.";
  return row;
}

// The run's stream ended: any text still being written was cut short.
function endStreaming() {
  for (const key of [...state.streaming.keys()]) cutShort(key);
}

async function stream(path, body) {
  setRunning(true);
  hideTrace();
  state.errorShown = false;
  state.pauseShown = false;
  state.ended = false;
  state.streaming.clear();
  markTopology(null, null);
  let summary = null;
  let runId = null;
  try {
    const payload = JSON.stringify({ ...body, stream: true });
    const response = await api(path, { method: "POST", body: payload });
    runId = state.liveId = response.headers.get("x-plait-checkpoint-id");
    fact("status", "running");
    fact("run", runId || "—");
    fact("checkpoint", runId || "—");
    await readEvents(response, (name, data) => {
      if (name === "agent_delta") renderDelta(data);
      else if (name === "agent_event") renderEvent(data);
      else if (name === "run_end") summary = data;
    });
    state.ended = true;
    endStreaming();
    if (summary) showSummary(summary);
    else notice("The stream ended early; GET /v1/runs/{checkpoint_id} has the run's summary.");
    await loadTrace(runId);
  } catch (error) {
    notice(error.message);
  } finally {
    state.ended = true;
    state.liveId = null;
    setRunning(false);
  }
  if (summary) showNextSteps(summary);
  refreshSessions();
  refreshInbox();
  if (runId) await loadHistory(runId);
  return summary;
}

async function send(event) {
  event.preventDefault();
  const text = $("input").value.trim();
  const agent = $("agent").value;
  if (!text || !agent || state.running) return;
  $("input").value = "";
  notice("");
  $("interrupts").replaceChildren();
  state.handoffs.clear();
  $("handoffs").replaceChildren();
  fact("agent", agent);
  addRow(0, "user", el("span", "who", "you"), el("div", "text", text));
  state.lastPath = null;
  const path = `/v1/agents/${encodeURIComponent(agent)}/runs`;
  await stream(path, { input: text, session_id: state.session, deltas: true });
}

function interruptForm(checkpointId, pending) {
  const value = el("textarea");
  value.rows = 2;
  value.placeholder = 'A JSON value, e.g. {"approved": true}';
  const button = (text, kind) => {
    const b = el("button", kind, text);
    b.type = kind === "value" ? "submit" : "button";
    return b;
  };
  const approve = button("Approve", "approve");
  const reject = button("Reject", "reject");
  const asker = askerOf(pending.address);
  const form = el(
    "form",
    "interrupt",
    el("h3", "", `Paused: ${asker || "this run"} needs an answer`),
    el("pre", "info", show(pending.info)),
    el("p", "muted", pending.address),
    el("div", "answers", approve, reject, value, button("Send value", "value")),
  );
  const answer = (v) => resume(form, checkpointId, pending.id, v);
  // a tool's approval (docs/approvals.md) is answered bound to the arguments it shows
  const asked = pending.info && pending.info.approval;
  const verdict = (yes) => (asked ? { approved: yes, fingerprint: asked.fingerprint } : yes ? "approve" : "reject");
  approve.addEventListener("click", () => answer(verdict(true)));
  reject.addEventListener("click", () => answer(verdict(false)));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    try {
      answer(JSON.parse(value.value));
    } catch (error) {
      notice("The answer is not JSON: " + error.message);
    }
  });
  return form;
}

function resume(form, checkpointId, interruptId, value) {
  const body = { targets: { [interruptId]: value }, deltas: true };
  return goOn(form, checkpointId, "answered " + show(value), body);
}

// Resume a run (streamed) from `panel`, the form or panel that offered it; say `said`.
async function goOn(panel, checkpointId, said, body) {
  if (state.running) return;
  notice("");
  panel.inert = true;
  addRow(0, "user", el("span", "who", "you"), el("div", "text", said));
  state.lastPath = null;
  await stream(`/v1/runs/${encodeURIComponent(checkpointId)}/resume`, body);
  panel.inert = false; // still shown only if the resume was refused
}

// A stopped run's panel: Resume goes on from its checkpoint (a resume with no answers).
function stoppedPanel(checkpointId) {
  const button = el("button", "continue", "Resume");
  button.type = "button";
  const panel = el(
    "div",
    "stopped",
    el("h3", "", "Stopped: the run can go on from where it stopped"),
    el("p", "muted", "checkpoint " + checkpointId),
    button,
  );
  const body = { deltas: true };
  button.addEventListener("click", () => goOn(panel, checkpointId, "resumed the run", body));
  return panel;
}

// ---- start ---------------------------------------------------------------------------

async function reload() {
  notice("");
  try {
    await loadAgents();
    await Promise.all([refreshSessions(), refreshInbox(), loadTopology($("agent").value)]);
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
  $("agent").addEventListener("change", agentChanged);
  $("new-session").addEventListener("click", () => state.running || newSession());
  $("refresh-inbox").addEventListener("click", refreshInbox);
  $("stop").addEventListener("click", stop);
  $("send-form").addEventListener("submit", send);
  $("fork-form").addEventListener("submit", fork);
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("send-form").requestSubmit();
  });
  newSession();
  reload();
}

// The page's other scripts (deferred, after this one) define the rest: start once all ran.
document.addEventListener("DOMContentLoaded", start);
