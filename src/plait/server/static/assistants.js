// The dev page's Assistants view: the stored configurations of the selected agent (the Agent
// Protocol's assistants, DESIGN §14: `configurable` keys are per-run options — model,
// instruction, max_iterations, model_options), created, edited (each edit a new version),
// their versions listed and any made the one runs use, deleted; and the one the side bar's
// "Run with" picks, which the page's runs then use. It uses api.js's helpers.
// Server text is only set as text.
"use strict";

const assistants = { list: [], editing: null };
const ASSISTANT_STORE = "plait.assistant."; // the assistant picked, per agent

function keepChoice() {
  localStorage.setItem(ASSISTANT_STORE + $("agent").value, $("assistant").value);
}

function isServed(found) {
  return (found.metadata || {}).created_by === "system";
}

// The assistant the next run uses (null: the agent as served, through /v1).
function selectedAssistant() {
  const id = $("assistant").value;
  return assistants.list.find((found) => found.assistant_id === id) || null;
}

function drawAssistantChoice() {
  const kept = localStorage.getItem(ASSISTANT_STORE + $("agent").value) || "";
  const usable = assistants.list.filter((found) => !isServed(found) || found.version > 1);
  const options = usable.map((found) => {
    const option = el("option", "", `${found.name} (version ${found.version})`);
    option.value = found.assistant_id;
    return option;
  });
  const served = el("option", "", "the agent as served");
  served.value = "";
  $("assistant").replaceChildren(served, ...options);
  if (usable.some((found) => found.assistant_id === kept)) $("assistant").value = kept;
}

async function loadAssistants(agent) {
  try {
    const body = { graph_id: agent, limit: 100, sort_by: "created_at", sort_order: "asc" };
    const found = await sendJSON("POST", "/assistants/search", body);
    if ($("agent").value !== agent) return; // another agent was picked meanwhile
    assistants.list = found;
  } catch (_) {
    assistants.list = []; // no Agent Protocol: runs use the agent as served
  }
  drawAssistantChoice();
  drawAssistants();
}

function configOf(found) {
  return ((found.config || {}).configurable) || {};
}

function assistantItem(found) {
  const item = el("li", "assistant");
  item.dataset.assistant = found.assistant_id;
  const title = el("h3", "", found.name, el("small", "", ` version ${found.version}`));
  const settings = el("pre", "assistant-config", show(configOf(found)));
  const actions = el(
    "div",
    "assistant-actions",
    button("Run with it", "use", () => useAssistant(found)),
    button("Edit", "edit", () => editAssistant(found)),
    button("Versions", "versions", () => showVersions(found, item)),
  );
  if (!isServed(found)) actions.append(button("Delete", "delete", () => deleteAssistant(found)));
  const note = isServed(found) ? "the served agent's own configuration" : found.description || "";
  item.append(title, el("p", "muted", note), el("code", "muted", found.assistant_id), settings, actions);
  return item;
}

function drawAssistants() {
  $("assistants-agent").textContent = $("agent").value;
  const items = assistants.list.map(assistantItem);
  $("assistants-list").replaceChildren(...items);
}

function useAssistant(found) {
  if (isServed(found) && found.version === 1) $("assistant").value = "";
  else $("assistant").value = found.assistant_id;
  keepChoice();
  showView("run");
}

// The form's configuration: {configurable: {...}} with the fields filled in (undefined when
// one is not valid: it says so).
function formConfig() {
  const configurable = {};
  const text = (id) => $(id).value.trim();
  if (text("assistant-model")) configurable.model = text("assistant-model");
  if (text("assistant-instruction")) configurable.instruction = $("assistant-instruction").value;
  if (text("assistant-iterations")) configurable.max_iterations = Number(text("assistant-iterations"));
  if (text("assistant-options")) {
    const typed = parseTyped(text("assistant-options"), "The model options");
    if (!typed.ok) return assistantSaid(typed.message);
    configurable.model_options = typed.value;
  }
  return { configurable };
}

function assistantSaid(text) {
  $("assistant-status").textContent = text;
  return undefined;
}

function editAssistant(found) {
  const settings = configOf(found);
  assistants.editing = found.assistant_id;
  $("assistant-name").value = found.name || "";
  $("assistant-description").value = found.description || "";
  $("assistant-model").value = settings.model || "";
  $("assistant-instruction").value = settings.instruction || "";
  $("assistant-iterations").value = settings.max_iterations || "";
  $("assistant-options").value = settings.model_options ? JSON.stringify(settings.model_options) : "";
  $("assistant-save").textContent = `Save as version ${found.version + 1}`;
  $("assistant-cancel").hidden = false;
  assistantSaid(`Editing ${found.name}: saving adds a version.`);
}

function resetAssistantForm() {
  assistants.editing = null;
  $("assistant-form").reset();
  $("assistant-save").textContent = "Create";
  $("assistant-cancel").hidden = true;
}

async function saveAssistant(event) {
  event.preventDefault();
  const config = formConfig();
  if (config === undefined) return;
  const body = {
    config,
    name: $("assistant-name").value.trim() || undefined,
    description: $("assistant-description").value.trim() || undefined,
  };
  try {
    const editing = assistants.editing;
    const saved = editing
      ? await sendJSON("PATCH", `/assistants/${encodeURIComponent(editing)}`, body)
      : await sendJSON("POST", "/assistants", { ...body, graph_id: $("agent").value });
    resetAssistantForm();
    assistantSaid(`${saved.name}: version ${saved.version} saved.`);
    await loadAssistants($("agent").value);
  } catch (error) {
    assistantSaid(error.message);
  }
}

async function showVersions(found, item) {
  const path = `/assistants/${encodeURIComponent(found.assistant_id)}/versions`;
  let versions;
  try {
    versions = await sendJSON("POST", path, { limit: 100 });
  } catch (error) {
    return assistantSaid(error.message);
  }
  const rows = versions.map((version) => {
    const current = version.version === found.version;
    const pick = button(current ? "runs use it" : "Use this version", "latest", () =>
      setLatest(found, version.version),
    );
    pick.disabled = current;
    const line = el("li", "", `version ${version.version} `, pick, el("pre", "", show(configOf(version))));
    line.dataset.version = String(version.version);
    return line;
  });
  const list = item.querySelector(".assistant-versions") || el("ol", "assistant-versions");
  list.replaceChildren(...rows);
  item.append(list);
}

async function setLatest(found, version) {
  try {
    const path = `/assistants/${encodeURIComponent(found.assistant_id)}/latest`;
    await sendJSON("POST", path, { version });
    assistantSaid(`${found.name}: runs use version ${version}.`);
    await loadAssistants($("agent").value);
  } catch (error) {
    assistantSaid(error.message);
  }
}

async function deleteAssistant(found) {
  try {
    await sendJSON("DELETE", `/assistants/${encodeURIComponent(found.assistant_id)}`);
    assistantSaid(`${found.name} deleted.`);
    await loadAssistants($("agent").value);
  } catch (error) {
    assistantSaid(error.message);
  }
}

function assistantsStart() {
  $("assistant").addEventListener("change", keepChoice);
  $("assistant-form").addEventListener("submit", saveAssistant);
  $("assistant-cancel").addEventListener("click", () => {
    resetAssistantForm();
    assistantSaid("");
  });
}
