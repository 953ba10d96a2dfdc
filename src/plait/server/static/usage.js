// The dev page's Usage view: what the caller's model calls spent (GET /v1/usage, DESIGN §15:
// every call's row, or groups by user, agent, model or day, over a time range), as a table.
// A server that keeps no ledger answers 404: the view says so. It uses api.js's helpers.
// Server text is only set as text.
"use strict";

// The columns of the table: the rows' own keys, in the order of the first row.
function usageColumns(rows) {
  return rows.length ? Object.keys(rows[0]) : [];
}

function usageCell(value) {
  if (typeof value === "number" && !Number.isInteger(value)) return value.toFixed(6);
  return value === null || value === undefined ? "" : typeof value === "object" ? JSON.stringify(value) : String(value);
}

function drawUsage(rows) {
  const columns = usageColumns(rows);
  const head = el("tr", "", ...columns.map((column) => el("th", "", column)));
  const body = rows.map((row) => el("tr", "", ...columns.map((column) => el("td", "", usageCell(row[column])))));
  $("usage-table").replaceChildren(el("thead", "", head), el("tbody", "", ...body));
}

async function loadUsage(event) {
  if (event) event.preventDefault();
  const query = new URLSearchParams();
  const group = $("usage-group").value;
  if (group) query.set("group_by", group);
  for (const side of ["from", "to"]) {
    const value = $(`usage-${side}`).value;
    if (value) query.set(side, new Date(value).toISOString());
  }
  try {
    const found = await getJSON(`/v1/usage?${query}`);
    const rows = group ? found.groups : found.rows;
    drawUsage(rows || []);
    $("usage-status").textContent = count((rows || []).length, group ? "group" : "model call");
  } catch (error) {
    $("usage-table").replaceChildren();
    $("usage-status").textContent =
      error.status === 404
        ? "This server keeps no usage ledger (GET /v1/usage is not served)."
        : error.message;
  }
}

function usageStart() {
  $("usage-form").addEventListener("submit", loadUsage);
}
