// The plait dev page: a client of plait's HTTP API, and of nothing else.
// This file: the page's shared state, small DOM helpers and the API (JSON and event streams).
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
  request: "", // what the person asked the run in view
  startValues: {}, // the session values the run in view started with
  endValues: null, // the session's values once the run in view ended
  firstEvent: 0, // the index of the first event of the run in view (after a fork, a resume)
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

function button(text, className, onClick) {
  const made = el("button", className, text);
  made.type = "button";
  if (onClick) made.addEventListener("click", onClick);
  return made;
}

function show(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

// Tool arguments (JSON text or a value): on one line when short, indented when long.
function pretty(json) {
  let value = json;
  if (typeof json === "string") {
    try {
      value = JSON.parse(json);
    } catch (_) {
      return json;
    }
  }
  const line = JSON.stringify(value);
  return line.length > 80 ? show(value) : line;
}

function errorLine(error) {
  return `${error.type}: ${error.message}`;
}

function count(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
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

// Parse JSON typed by a person: {ok, value} or {ok: false, message}.
function parseTyped(text, what) {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, message: `${what} is not JSON: ${error.message}` };
  }
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
    const body = await response.json();
    message = body.error ? body.error.message || body.error : body.detail || message;
    if (typeof message !== "string") message = JSON.stringify(message);
  } catch (_) {
    // not a JSON error body: keep the status text
  }
  if (response.status === 401) return "This server needs a valid API key: enter it above.";
  return `${response.status}: ${message}`;
}

async function api(path, options = {}) {
  const extra = options.headers || {};
  const init = { ...options, headers: { ...headers(options.body !== undefined), ...extra } };
  const response = await fetch(path, init);
  if (!response.ok) {
    const error = new Error(await errorText(response));
    error.status = response.status;
    throw error;
  }
  return response;
}

async function getJSON(path) {
  return (await api(path)).json();
}

async function sendJSON(method, path, body) {
  const response = await api(path, { method, body: JSON.stringify(body) });
  return response.status === 204 ? null : response.json();
}

// Read a text/event-stream body (EventSource cannot POST nor send a key): call
// onEvent(name, data, id) for each event; return once the stream ends.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let name = "message";
  let data = [];
  let id = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    const lines = buffer.split(/\r?\n/);
    buffer = lines.pop();
    for (const line of lines) {
      if (line === "") {
        if (data.length) onEvent(name, JSON.parse(data.join("\n")), id);
        name = "message";
        data = [];
        id = null;
      } else if (line.startsWith("event:")) {
        name = line.slice(6).trim();
      } else if (line.startsWith("data:")) {
        data.push(line.slice(5).replace(/^ /, ""));
      } else if (line.startsWith("id:")) {
        id = Number(line.slice(3).trim());
      } // ":" lines are keep-alive comments
    }
  }
}
