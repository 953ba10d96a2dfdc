"""The shape of the source: short functions, the run context's internals kept inside it, and
the pause signal kept inside the kernel."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "plait"
PRIVATE = {"_run", "_budgets", "_emit", "_copy", "_teams", "_history", "_model_messages",
           "_root_input", "_actions", "_answered", "_call_guard"}  # fmt: skip


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text())) for p in sorted(SRC.rglob("*.py"))]


def test_no_function_is_longer_than_60_lines() -> None:
    long = [
        f"{path.relative_to(SRC)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 60
    ]
    assert long == []


def test_only_the_context_module_touches_the_run_contexts_private_fields() -> None:
    reach_ins = [
        f"{path.relative_to(SRC)}:{node.lineno} .{node.attr}"
        for path, tree in _modules()
        if path.name != "context.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in PRIVATE
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]
    assert reach_ins == []


def test_only_the_kernel_raises_or_catches_the_pause_signal() -> None:
    users = [
        str(path.relative_to(SRC))
        for path, tree in _modules()
        if path.name != "kernel.py"
        for node in ast.walk(tree)
        if (isinstance(node, ast.Raise) and "InterruptSignal" in ast.unparse(node))
        or (
            isinstance(node, ast.ExceptHandler)
            and node.type is not None
            and "InterruptSignal" in ast.unparse(node.type)
        )
    ]
    assert users == []
