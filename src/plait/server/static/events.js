// The dev page's event tree: a run's events indented by depth under their agent's run path
// (streamed text, tool calls and results, transfers, handoffs, pauses, errors, the answer),
// each event's raw JSON in place on demand; and a session's messages drawn the same way.
// It uses api.js's helpers and state. Server text is only set as text.
"use strict";

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

function addUser(text) {
  addRow(0, "user", el("span", "who", "you"), el("div", "text", text));
  state.lastPath = null;
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
  if (output.custom != null) parts.push(customPart(output.custom));
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

// What a tool or a graph sent (`output.custom`): a graph node's update under its name; a
// long value folded to its first line (it opens in place).
function customPart(custom) {
  if (custom && typeof custom === "object" && "node" in custom && "update" in custom) {
    return ["custom", el("span", "label", "node " + custom.node), el("pre", "", pretty(custom.update))];
  }
  const line = JSON.stringify(custom);
  if (line.length <= 160) return ["custom", el("pre", "", line)];
  const folded = el("details", "", el("summary", "", line.slice(0, 120) + "…"), el("pre", "", show(custom)));
  return ["custom", folded];
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

// A button that shows (or hides) the event's raw JSON in place, under its rows.
function rawToggle(index) {
  const toggle = button("", "raw"); // its "{ }" is drawn by the style sheet
  toggle.title = "Show the event's JSON";
  toggle.setAttribute("aria-label", "raw JSON");
  toggle.addEventListener("click", (click) => {
    click.stopPropagation();
    const open = $("events").querySelector(`.raw-json[data-event="${index}"]`);
    if (open) return open.remove();
    const rows = $("events").querySelectorAll(`.row[data-event="${index}"]`);
    const pre = el("pre", "", JSON.stringify(state.events[index], null, 2));
    const item = el("li", "row raw-json", pre);
    item.dataset.event = String(index);
    item.style.setProperty("--depth", rows[0].dataset.depth);
    rows[rows.length - 1].after(item);
    item.scrollIntoView({ block: "nearest" });
  });
  return toggle;
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
function agentsOf(address) {
  const parts = (address || "").split(";").filter((part) => part.startsWith("agent:"));
  return parts.map((part) => part.slice(6));
}

function askerOf(address) {
  const agents = agentsOf(address);
  return agents.length ? agents[agents.length - 1] : null;
}

// What an interrupt asks, in one line.
function questionOf(info) {
  if (info && typeof info === "object") {
    if (typeof info.question === "string") return info.question;
    if (info.approval) return `approve ${info.approval.tool}?`;
    if (info.unknown_outcome) return `did ${info.unknown_outcome.tool} happen?`;
  }
  return info == null ? "" : pretty(info);
}

// Draw each pause under the agent whose tool asked (not the agent at the top of the run):
// one line saying who asks what; the pause panel below the events has the rest.
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
    const row = addRow(at, "interrupt", label, el("div", "question", questionOf(pending.info)));
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

// ---- the answer ----------------------------------------------------------------------

// The text that answers the run: its output when that is text; else (a graph's state, a
// structured output) the last message the top agent wrote in this run.
function answerOf(output) {
  if (typeof output === "string") return output;
  for (let i = state.events.length - 1; i >= state.firstEvent; i--) {
    const event = state.events[i];
    const variant = (event.output || {}).message;
    if (!variant || (event.depth || 0) !== 0) continue;
    const message = messageOf(variant);
    if (message.role === "assistant" && message.content && !(message.tool_calls || []).length) {
      return message.content;
    }
  }
  return show(output);
}

function addAnswer(output) {
  const row = addRow(0, "final", el("span", "label", "final answer"));
  row.append(el("div", "text", answerOf(output)));
  if (output !== null && typeof output === "object") {
    const whole = el("details", "output", el("summary", "", "output (JSON)"));
    whole.append(el("pre", "", show(output)));
    row.append(whole);
  }
  return row;
}

// ---- a session's messages, drawn as a run's --------------------------------------------

// Draw messages (each with its `author`) as a run's rows: the person's turns, each agent's
// messages under it, and (`answers`) the last message of each turn as its answer.
function drawMessages(messages, answers = true) {
  let author = null;
  const ends = [];
  messages.forEach((message, i) => {
    if (message.role === "user") {
      addUser(message.content);
      author = null;
      return;
    }
    if (message.author !== author) addAuthor(0, message.author, message.author);
    author = message.author;
    for (const [kind, ...nodes] of messageParts(message)) addRow(0, kind, ...nodes);
    const next = messages[i + 1];
    const last = !next || next.role === "user";
    const plain = message.role === "assistant" && !(message.tool_calls || []).length;
    if (answers && last && plain) {
      const label = el("span", "label", "final answer");
      ends.push(addRow(0, "final", label, el("div", "text", message.content)));
    }
  });
  state.lastPath = null;
  return ends;
}
