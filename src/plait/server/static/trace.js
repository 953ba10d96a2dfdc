// The dev page's trace: the run's OpenTelemetry spans as a waterfall (GET /v1/runs/{id}/spans).
// It uses app.js's helpers (el, $, getJSON, count, show). Server text is only set as text.
"use strict";

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

