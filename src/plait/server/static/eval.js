// The dev page's Eval panel: run an eval set on the selected agent (POST /v1/eval) and show
// the pass rate and, for each failed case, what was expected next to what the agent did.
// It uses app.js's helpers (headers, errorText, el, $). Server text is only set as text.
"use strict";

function evalCalls(calls) {
  if (!calls || calls.length === 0) return "(none)";
  return calls
    .map((c) => (c.args === undefined || c.args === null ? c.name : `${c.name}(${JSON.stringify(c.args)})`))
    .join(", ");
}

function evalValue(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

function evalLine(label, value) {
  return el("div", "eval-line", el("span", "muted", label + " "), el("code", "", value));
}

function evalCase(result) {
  const mark = result.passed ? "✓" : "✗";
  const tokens = result.usage.input_tokens + result.usage.output_tokens;
  const head = el(
    "div",
    "eval-head",
    `${mark} ${result.id}`,
    el("span", "muted", ` · ${tokens} tokens · ${result.latency_s.toFixed(2)} s`),
  );
  const item = el("li", result.passed ? "eval-pass" : "eval-fail", head);
  item.dataset.case = result.id;
  if (result.passed) return item;
  const diff = el("div", "eval-diff");
  if (result.error) diff.append(evalLine("error", result.error));
  if (result.trajectory_match === false) {
    diff.append(evalLine("expected tools", evalCalls(result.expected.tools)));
    diff.append(evalLine("actual tools", evalCalls(result.tools)));
  }
  if (result.response_match === false) {
    diff.append(evalLine("expected response", evalValue(result.expected.response)));
    diff.append(evalLine("actual response", evalValue(result.response)));
  }
  item.append(diff);
  return item;
}

function evalShow(report) {
  const passed = report.cases.filter((c) => c.passed).length;
  const rate = Math.round(report.pass_rate * 1000) / 10;
  $("eval-summary").textContent = `pass rate ${rate}% (${passed}/${report.cases.length} cases)`;
  $("eval-cases").replaceChildren(...report.cases.map(evalCase));
}

async function evalRun() {
  $("eval-cases").replaceChildren();
  let evalset;
  try {
    evalset = JSON.parse($("eval-input").value);
  } catch (error) {
    $("eval-summary").textContent = `The eval set is not JSON: ${error.message}`;
    return;
  }
  $("eval-run").disabled = true;
  $("eval-summary").textContent = "running…";
  try {
    const response = await fetch("/v1/eval", {
      method: "POST",
      headers: headers(true),
      body: JSON.stringify({ agent: $("agent").value, evalset }),
    });
    if (!response.ok) {
      $("eval-summary").textContent = await errorText(response);
      return;
    }
    evalShow(await response.json());
  } catch (error) {
    $("eval-summary").textContent = error.message;
  } finally {
    $("eval-run").disabled = false;
  }
}

function evalStart() {
  $("eval-run").addEventListener("click", evalRun);
  $("eval-file").addEventListener("change", async () => {
    const file = $("eval-file").files[0];
    if (file) $("eval-input").value = await file.text();
  });
}

