// The dev page's answers to a tool's approval and to a call whose outcome is unknown
// (docs/approvals.md): Approve / Reject (bound to the exact call shown: its fingerprint,
// with an optional comment) or Done / Retry / Skip. The pause panel (pause.js) offers them;
// the inbox (sidebar.js) names each open one with its call. Answers resume the run as the
// signed-in user. It uses api.js's helpers. Server text is only set as text.
"use strict";

// The kind of question an interrupt asks: "approval", "unknown_outcome" or "question".
function kindOf(info) {
  if (info && typeof info === "object") {
    if (info.approval) return "approval";
    if (info.unknown_outcome) return "unknown_outcome";
  }
  return "question";
}

// The tool call an approval or unknown outcome is about: {tool, arguments, ...} (or null).
function callOf(info) {
  if (!info || typeof info !== "object") return null;
  return info.approval || info.unknown_outcome || null;
}

function answerButton(text, className, onClick) {
  const made = button(text, className, onClick);
  made.dataset.answer = text.toLowerCase();
  return made;
}

// The answers of an approval or an unknown outcome: [the note field, ...buttons]; each
// button calls `answer(value)` with the resume value.
function approvalAnswers(info, answer) {
  const note = el("input", "approval-note");
  note.type = "text";
  const call = callOf(info);
  if (kindOf(info) === "approval") {
    note.placeholder = "comment (optional)";
    note.setAttribute("aria-label", note.placeholder);
    const value = (approved) => ({
      approved,
      fingerprint: call.fingerprint,
      comment: note.value.trim() || null,
    });
    return [
      note,
      answerButton("Approve", "approve", () => answer(value(true))),
      answerButton("Reject", "reject", () => answer(value(false))),
    ];
  }
  note.placeholder = "result or message";
  note.setAttribute("aria-label", note.placeholder);
  return [
    note,
    answerButton("Done", "approve", () => answer({ outcome: "done", result: note.value })),
    answerButton("Retry", "", () => answer({ outcome: "retry" })),
    answerButton("Skip", "reject", () => answer({ outcome: "skip", message: note.value })),
  ];
}
