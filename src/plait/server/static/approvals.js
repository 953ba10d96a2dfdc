// The dev page's Approvals inbox: the caller's open questions across runs and workers
// (GET /v1/approvals), each with the exact arguments of its tool call, answered with
// Approve / Reject (an approval) or Done / Retry / Skip (a call whose outcome is unknown),
// which resumes its run (POST /v1/runs/{checkpoint_id}/resume). It uses app.js's helpers
// (api, getJSON, el, $). Server text is only set as text.
"use strict";

const APPROVALS_POLL_MS = 3000;

function approvalsSection() {
  const section = el(
    "section",
    "",
    el("h2", "", "Approvals ", el("button", "", "Refresh")),
    el("p", "muted", ""),
    el("ol", "", ""),
  );
  section.id = "approvals";
  const refresh = section.querySelector("button");
  const status = section.querySelector("p");
  const list = section.querySelector("ol");
  refresh.id = "approvals-refresh";
  refresh.type = "button";
  status.id = "approvals-status";
  status.setAttribute("role", "status");
  list.id = "approvals-list";
  const facts = $("facts");
  if (facts) facts.prepend(section);
  else document.body.append(section);
  return section;
}

function approvalsButton(label, onClick) {
  const button = el("button", "", label);
  button.type = "button";
  button.dataset.answer = label.toLowerCase();
  button.addEventListener("click", onClick);
  return button;
}

function approvalsAnswers(item, note) {
  if (item.kind === "approval") {
    const answer = (approved) => ({
      approved,
      fingerprint: item.fingerprint,
      comment: note.value.trim() || null,
    });
    return [
      approvalsButton("Approve", () => approvalsAnswer(item, answer(true))),
      approvalsButton("Reject", () => approvalsAnswer(item, answer(false))),
    ];
  }
  return [
    approvalsButton("Done", () => approvalsAnswer(item, { outcome: "done", result: note.value })),
    approvalsButton("Retry", () => approvalsAnswer(item, { outcome: "retry" })),
    approvalsButton("Skip", () => approvalsAnswer(item, { outcome: "skip", message: note.value })),
  ];
}

function approvalsItem(item) {
  const what = item.kind === "approval" ? "approve" : "unknown outcome of";
  const head = el("div", "approval-head", `${what} `, el("code", "", item.tool));
  const where = `agent ${item.agent} · run ${item.checkpoint_id}`;
  const expires = item.expires_at ? ` · expires ${item.expires_at}` : "";
  const args = el("pre", "approval-args", JSON.stringify(item.arguments, null, 2));
  const note = el("input");
  note.type = "text";
  note.className = "approval-note";
  note.placeholder = item.kind === "approval" ? "comment (optional)" : "result or message";
  note.setAttribute("aria-label", note.placeholder);
  const li = el(
    "li",
    "approval",
    head,
    el("div", "muted", where + expires),
    args,
    el("div", "muted approval-fingerprint", `fingerprint ${item.fingerprint}`),
    note,
    el("div", "approval-buttons", ...approvalsAnswers(item, note)),
  );
  li.dataset.interrupt = item.interrupt_id;
  li.dataset.kind = item.kind;
  return li;
}

async function approvalsAnswer(item, value) {
  const status = $("approvals-status");
  status.textContent = "resuming…";
  delete status.dataset.failedRead;
  try {
    const response = await api(`/v1/runs/${encodeURIComponent(item.checkpoint_id)}/resume`, {
      method: "POST",
      body: JSON.stringify({ targets: { [item.interrupt_id]: value }, stream: false }),
    });
    const summary = await response.json();
    const output = summary.final_output === null ? "" : `: ${show(summary.final_output)}`;
    status.textContent = `run ${item.checkpoint_id} ${summary.status}${output}`;
  } catch (error) {
    status.textContent = error.message;
  }
  await approvalsLoad();
}

// Read the inbox again. A failure to read it (no valid API key yet, say) stays in the status
// line only until a read succeeds; what an answer said stays until the next answer.
async function approvalsLoad() {
  const list = $("approvals-list");
  const status = $("approvals-status");
  let items;
  try {
    items = await getJSON("/v1/approvals");
  } catch (error) {
    status.textContent = error.message;
    status.dataset.failedRead = "true";
    return;
  }
  if (status.dataset.failedRead) {
    status.textContent = "";
    delete status.dataset.failedRead;
  }
  const ids = items.map((i) => i.interrupt_id).join(",");
  if (list.dataset.shown === ids) return; // keep what is typed
  list.dataset.shown = ids;
  list.replaceChildren(...items.map(approvalsItem));
  if (items.length === 0) list.append(el("li", "muted", "nothing waits for you"));
}

function approvalsStart() {
  approvalsSection();
  $("approvals-refresh").addEventListener("click", approvalsLoad);
  $("key-form").addEventListener("submit", () => setTimeout(approvalsLoad, 0));
  setInterval(() => document.hidden || approvalsLoad(), APPROVALS_POLL_MS);
  approvalsLoad();
}

approvalsStart();
