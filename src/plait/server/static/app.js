// The plait dev page: a client of plait's HTTP API, and of nothing else.
// Text from the server is only ever set as text (textContent, text nodes), never as HTML.
"use strict";

const KEY_STORE = "plait.apiKey";
const AGENT_STORE = "plait.agent";
const $ = (id) => document.getElementById(id);
const state = {
  session: "",
  running: false,
  lastPath: null,
  handoffs: new Set(),
  runId: null, // the run whose steps are listed
  step: null, // the step shown, to fork from
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
  if (action.interrupted) parts.push(["interrupt", el("span", "label", "paused: asks a person")]);
  if (event.error) parts.push(["error", el("span", "", errorLine(event.error))]);
  return parts;
}

function renderEvent(event) {
  const depth = event.depth || 0;
  const path = (event.run_path || []).join(" › ");
  if (path !== state.lastPath) {
    state.lastPath = path;
    addAuthor(depth, event.agent_name, path);
  }
  for (const [kind, ...nodes] of eventParts(event)) addRow(depth, kind, ...nodes);
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

// ---- the trace: the run's OpenTelemetry spans as a waterfall --------------------------

// [span, depth] in tree order: each span after its parent, siblings by start time. A span
// whose parent is not in the list (the run started under a caller's span) is a root.
function spanRows(spans) {
  const ids = new Set(spans.map((span) => span.span_id));
  const children = new Map();
  for (const span of spans) {
    const parent = span.parent_id && ids.has(span.parent_id) ? span.parent_id : "";
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(span);
  }
  const rows = [];
  const visit = (parent, depth) => {
    const list = (children.get(parent) || []).sort((a, b) => a.start_ns - b.start_ns);
    for (const span of list) {
      rows.push([span, depth]);
      visit(span.span_id, depth + 1);
    }
  };
  visit("", 0);
  return rows;
}

function millis(value) {
  return value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0);
}

function percent(part, whole) {
  return (Math.min(Math.max(part / whole, 0), 1) * 100).toFixed(3) + "%";
}

function spanRow(span, depth, start, total) {
  const bar = el("span", "bar");
  bar.style.setProperty("--left", percent(span.start_ns - start, total));
  bar.style.setProperty("--width", percent(span.end_ns - span.start_ns, total));
  const name = el("span", "span-name", span.name);
  name.style.setProperty("--depth", String(depth));
  const operation = span.attributes["gen_ai.operation.name"] || "other";
  const failed = span.status.code === "ERROR";
  const row = el(
    "li",
    `span op-${operation}${failed ? " failed" : ""}`,
    name,
    el("span", "track", bar),
    el("span", "ms", millis(span.duration_ms) + " ms"),
  );
  row.dataset.depth = String(depth);
  row.dataset.name = span.name;
  const events = span.events.map((event) => event.name);
  row.title = show({ ...span.attributes, ...(events.length ? { events } : {}) });
  return row;
}

function hideTrace() {
  $("trace").hidden = true;
  $("spans").replaceChildren();
  $("trace-total").textContent = "";
}

function showTrace(spans) {
  const rows = spanRows(spans);
  if (!rows.length) return hideTrace();
  const start = Math.min(...spans.map((span) => span.start_ns));
  const end = Math.max(...spans.map((span) => span.end_ns));
  const total = Math.max(end - start, 1);
  $("spans").replaceChildren(...rows.map(([span, depth]) => spanRow(span, depth, start, total)));
  $("trace-total").textContent = `${count(rows.length, "span")} · ${millis(total / 1e6)} ms`;
  $("trace").hidden = false;
}

// Show the spans this server kept of a run (none when tracing is off: the trace is hidden).
async function loadTrace(runId) {
  if (!runId) return hideTrace();
  try {
    const found = await getJSON(`/v1/runs/${encodeURIComponent(runId)}/spans`);
    if (found.enabled) showTrace(found.spans);
    else hideTrace();
  } catch (_) {
    hideTrace(); // the trace is extra: the run's view stands without it
  }
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
  if (summary.error) addRow(0, "error", el("span", "", errorLine(summary.error)));
  $("interrupts").replaceChildren();
  if (summary.status === "paused") {
    for (const pending of summary.interrupts || []) {
      $("interrupts").append(interruptForm(summary.checkpoint_id, pending));
    }
  }
  $("events").scrollTop = $("events").scrollHeight;
}

function setRunning(running) {
  state.running = running;
  $("send").disabled = running;
  document.body.classList.toggle("running", running);
}

async function stream(path, body) {
  setRunning(true);
  hideTrace();
  let summary = null;
  let runId = null;
  try {
    const payload = JSON.stringify({ ...body, stream: true });
    const response = await api(path, { method: "POST", body: payload });
    runId = response.headers.get("x-plait-checkpoint-id");
    fact("status", "running");
    fact("run", runId || "—");
    fact("checkpoint", runId || "—");
    await readEvents(response, (name, data) => {
      if (name === "agent_event") renderEvent(data);
      else if (name === "run_end") summary = data;
    });
    if (summary) showSummary(summary);
    else notice("The stream ended early; GET /v1/runs/{checkpoint_id} has the run's summary.");
    await loadTrace(runId);
  } catch (error) {
    notice(error.message);
  } finally {
    setRunning(false);
  }
  refreshSessions();
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
  await stream(path, { input: text, session_id: state.session });
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
  const form = el(
    "form",
    "interrupt",
    el("h3", "", "Paused: this run needs an answer"),
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

async function resume(form, checkpointId, interruptId, value) {
  if (state.running) return;
  notice("");
  form.inert = true;
  addRow(0, "user", el("span", "who", "you"), el("div", "text", "answered " + show(value)));
  state.lastPath = null;
  const path = `/v1/runs/${encodeURIComponent(checkpointId)}/resume`;
  await stream(path, { targets: { [interruptId]: value } });
  form.inert = false; // still shown only if the resume was refused
}

// ---- time travel: a run's kept steps, and forks from them --------------------------------

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

// ---- agents and sessions -------------------------------------------------------------

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
}

function setSession(id) {
  state.session = id;
  $("session-id").textContent = id;
  for (const button of $("sessions").querySelectorAll("button")) {
    button.setAttribute("aria-current", String(button.dataset.session === id));
  }
}

async function refreshSessions() {
  try {
    const sessions = await getJSON("/v1/sessions");
    const items = sessions.map((session) => {
      const when = new Date(session.updated_at).toLocaleString();
      const button = el("button", "session", session.session_id, el("small", "", when));
      button.type = "button";
      button.dataset.session = session.session_id;
      button.addEventListener("click", () => openSession(session.session_id));
      return el("li", "", button);
    });
    $("sessions").replaceChildren(...items);
    setSession(state.session);
  } catch (error) {
    notice(error.message);
  }
}

function clearView(sessionId) {
  notice("");
  state.lastPath = null;
  state.handoffs.clear();
  for (const id of ["events", "interrupts", "handoffs", "run-facts", "steps"]) {
    $(id).replaceChildren();
  }
  $("history").hidden = true;
  state.runId = null;
  state.step = null;
  hideTrace();
  setSession(sessionId);
}

function newSession() {
  const random = Math.random().toString(36).slice(2, 8);
  clearView(`chat-${Date.now().toString(36)}-${random}`);
}

async function openSession(id) {
  if (state.running) return;
  try {
    const detail = await getJSON(`/v1/sessions/${encodeURIComponent(id)}`);
    clearView(id);
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
  } catch (error) {
    notice(error.message);
  }
}

// ---- start ---------------------------------------------------------------------------

async function reload() {
  notice("");
  try {
    await loadAgents();
    await refreshSessions();
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
  $("agent").addEventListener("change", describeAgent);
  $("new-session").addEventListener("click", () => state.running || newSession());
  $("send-form").addEventListener("submit", send);
  $("fork-form").addEventListener("submit", fork);
  $("input").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("send-form").requestSubmit();
  });
  newSession();
  reload();
}

start();
