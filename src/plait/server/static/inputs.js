// The dev page's input form: the message, and a field per session value the selected agent
// reads — built from its input schema (GET /assistants/{name}/schemas: its instructions'
// placeholders, its graphs' state keys, `user_id` for memory) — and the history of the
// inputs sent to it (kept in the browser's localStorage), any of which fills the form again.
// It uses api.js's helpers. Server text is only set as text.
"use strict";

const HISTORY_STORE = "plait.inputs.";
const HISTORY_MAX = 20;

function historyOf(agent) {
  try {
    return JSON.parse(localStorage.getItem(HISTORY_STORE + agent) || "[]");
  } catch (_) {
    return [];
  }
}

function rememberInput(agent, text, values) {
  const same = (item) => item.text === text && JSON.stringify(item.values) === JSON.stringify(values);
  const kept = historyOf(agent).filter((item) => !same(item));
  kept.unshift({ text, values, at: new Date().toISOString() });
  localStorage.setItem(HISTORY_STORE + agent, JSON.stringify(kept.slice(0, HISTORY_MAX)));
  drawHistory(agent);
}

function drawHistory(agent) {
  const items = historyOf(agent).map((item) => {
    const values = Object.keys(item.values || {}).length ? pretty(item.values) : "";
    const pick = button("", "past-input", () => fillInput(item));
    pick.append(el("span", "", item.text), el("code", "", values), el("small", "", when(item.at)));
    return el("li", "", pick);
  });
  $("input-history").replaceChildren(...items);
  if (!items.length) $("input-history").append(el("li", "muted", "nothing sent to this agent yet"));
  $("history-toggle").textContent = `History (${items.length})`;
}

function fillInput(item) {
  $("input").value = item.text;
  for (const field of $("input-fields").querySelectorAll("[data-key]")) {
    const value = (item.values || {})[field.dataset.key];
    if (field.type === "checkbox") field.checked = value === true;
    else if (value === undefined) field.value = "";
    else field.value = typeof value === "string" ? value : JSON.stringify(value);
  }
  $("input-history").hidden = true;
  $("input").focus();
}

// The control of one property of the schema.
function fieldFor(key, schema) {
  let control;
  if (Array.isArray(schema.enum)) {
    control = el("select");
    control.append(el("option", "", ""), ...schema.enum.map((v) => el("option", "", String(v))));
  } else if (schema.type === "boolean") {
    control = el("input");
    control.type = "checkbox";
  } else if (schema.type === "string" || schema.type === "integer" || schema.type === "number") {
    control = el("input");
    control.type = schema.type === "string" ? "text" : "number";
  } else {
    control = el("textarea");
    control.rows = 1;
    control.placeholder = "JSON";
  }
  control.dataset.key = key;
  control.dataset.type = Array.isArray(schema.enum) ? "enum" : schema.type || "json";
  control.id = "field-" + key;
  return control;
}

function drawFields(schema) {
  const required = new Set(schema.required || []);
  const fields = Object.entries(schema.properties || {})
    .filter(([key]) => key !== "messages")
    .map(([key, property]) => {
      const control = fieldFor(key, property);
      control.required = required.has(key);
      const name = key + (required.has(key) ? " *" : "");
      const label = el("label", "", name, control);
      label.title = property.description || `session value ${key}`;
      return label;
    });
  $("input-fields").replaceChildren(...fields);
  $("input-fields").hidden = fields.length === 0;
}

async function loadInputs(agent) {
  state.stateSchema = null;
  $("input-fields").replaceChildren();
  $("input-fields").hidden = true;
  drawHistory(agent);
  try {
    const found = await getJSON(`/assistants/${encodeURIComponent(agent)}/schemas`);
    if ($("agent").value !== agent) return; // another agent was picked meanwhile
    state.stateSchema = found.state_schema;
    drawFields(found.input_schema);
  } catch (_) {
    // no schema served (the Agent Protocol is off): the message alone
  }
}

function fieldValue(field) {
  const text = field.value.trim();
  if (field.type === "checkbox") return field.checked ? true : undefined;
  if (!text) return undefined;
  if (field.dataset.type === "integer" || field.dataset.type === "number") return Number(text);
  if (field.dataset.type === "json") {
    const typed = parseTyped(text, `The value of ${field.dataset.key}`);
    if (!typed.ok) throw new Error(typed.message);
    return typed.value;
  }
  return text;
}

// The session values the form holds (undefined when one is missing or not JSON: it says so).
function inputValues() {
  const values = {};
  try {
    for (const field of $("input-fields").querySelectorAll("[data-key]")) {
      const value = fieldValue(field);
      if (value === undefined && field.required) throw new Error(`${field.dataset.key} is required.`);
      if (value !== undefined) values[field.dataset.key] = value;
    }
  } catch (error) {
    notice(error.message);
    return undefined;
  }
  return values;
}

function inputsStart() {
  $("history-toggle").addEventListener("click", () => {
    $("input-history").hidden = !$("input-history").hidden;
  });
}
