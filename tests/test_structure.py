"""The shape of the source: the folders of its layers with imports pointing down, no import
cycle, short modules and functions, the run context's internals kept inside it, and the
pause signal kept inside the kernel."""

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


#: The internal context and run state: what the kernel, the agents and the composites use,
#: and no capability (a capability reads the run through `AgentContext` and `HookContext`).
INTERNAL_CONTEXT = {
    "plait.core.context",
    "plait.core.context_run",
    "plait.core.context_pause",
    "plait.core.context_events",
    "plait.core.run_state",
}


def test_no_capability_reaches_the_internal_context() -> None:
    """The capabilities are written on the public seams: none imports the internal context
    or the run state, nor converts a context to it with `inside()`."""
    graph = import_graph()
    imports = [
        f"{module} -> {found}"
        for module, targets in sorted(graph.items())
        if module.startswith("plait.capabilities.")
        for found in sorted(targets & INTERNAL_CONTEXT)
    ]
    conversions = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path, tree in _modules()
        if path.parent.name == "capabilities"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "inside")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "inside")
        )
    ]
    assert imports == [] and conversions == []


def test_the_capability_check_sees_a_reach_into_the_internal_context() -> None:
    graph = import_graph()
    graph["plait.capabilities.limits"].add("plait.core.run_state")
    reached = [
        m
        for m, targets in graph.items()
        if m.startswith("plait.capabilities.") and targets & INTERNAL_CONTEXT
    ]
    assert reached == ["plait.capabilities.limits"]


def test_only_the_signal_module_raises_and_only_the_kernel_catches_the_pause_signal() -> None:
    raisers = [
        str(path.relative_to(SRC))
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Raise) and "InterruptSignal" in ast.unparse(node)
    ]
    catchers = [
        str(path.relative_to(SRC))
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ExceptHandler)
        and node.type is not None
        and "InterruptSignal" in ast.unparse(node.type)
    ]
    assert raisers == ["core/signal.py"]
    assert set(catchers) == {"core/kernel.py"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Return, for each module of `src/plait`, the plait modules it imports: at the top,
    under `TYPE_CHECKING` or inside a function alike (the root package's lazy exports
    aside)."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [f"{base}.{alias.name}" for alias in node.names]
            if isinstance(node, ast.Call) and _imports_by_name(node):
                targets = [node.args[0].value]  # type: ignore[attr-defined]
            for target in targets:
                found = resolve(target) if target.startswith("plait") else None
                if found is not None and found != name and name != "plait":
                    graph[name].add(found)
    return graph


def _imports_by_name(node: ast.Call) -> bool:
    """Whether `node` is `import_module("plait...")` (or `importlib.import_module`)."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return (
        name == "import_module"
        and len(node.args) >= 1
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the import cycles of `graph` (its strongly connected parts of two or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = import_graph()
    graph["plait.core.context"].add("plait.core.kernel")  # what the kernel once needed
    assert any({"plait.core.context", "plait.core.kernel"} <= set(cycle) for cycle in cycles(graph))


def test_the_kernel_stands_above_the_context_and_the_agent_interface() -> None:
    graph = import_graph()
    assert "plait.core.context" in graph["plait.core.kernel"]
    assert "plait.core.kernel" not in graph["plait.core.context"]
    assert "plait.core.context" not in graph["plait.core.agent"]
    for local in ("plait.models.local", "plait.models._local_prompt"):
        assert not any(name.startswith("plait.agents") for name in graph[local])


def test_only_the_kernel_enters_an_agent() -> None:
    """Every agent is entered through the kernel: no other module calls an agent's
    `run(input, ctx)` (nor drives a handoff loop's `run(ctx, enter)`)."""
    callers = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "run"
        and len(node.args) == 2
        and path.name != "kernel.py"
    ]
    assert callers == []


def test_every_loop_decides_with_one_step_vocabulary() -> None:
    """The ReAct loop, the handoff loop, the workflows and the graph say what comes next with
    the steps of `plait.core.steps`, each read with one `match`."""
    loops = [
        "agents/react.py",
        "core/handoff.py",
        "agents/workflow.py",
        "graph/state_graph.py",
    ]
    for name in loops:
        tree = ast.parse((SRC / name).read_text())
        imports = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "plait.core.steps"
        ]
        matches = [node for node in ast.walk(tree) if isinstance(node, ast.Match)]
        assert imports and matches, name
    assert "class Step(" not in (SRC / "agents/react.py").read_text()


# --- the layers as folders -------------------------------------------------------------------

#: The layers of `src/plait`, bottom first: a module imports only from its own folder and
#: from folders below it. The root's nouns are `messages` and `events` (`errors` sits below
#: everything). The server and the protocols mounted on it are one layer: the server's door
#: (hosts, keys, body limit, runs, SSE) is what every protocol route uses, and `create_app`
#: mounts them. `testing` and the stores' conformance kits run agents to test a model or a
#: store: they stand high, under the examples that use them.
LAYERS: list[set[str]] = [
    {"errors"},
    {"_util"},
    {"nouns"},
    {"core"},
    {"stores"},
    {"tools"},
    {"models"},
    {"capabilities"},
    {"agents"},
    {"team", "graph"},
    {"prebuilt"},
    {"run"},
    {"memory", "eval"},
    {"server", "protocols"},
    {"temporal"},
    {"kits"},
    {"examples"},
    {"cli"},
]
#: The package's faces: the root (`plait`, lazily exporting every public name) and the
#: modules that keep their documented paths by re-exporting (`plait.hooks`, ...).
FACES = {"plait", "plait.__main__", "plait.hooks", "plait.cassette", "plait.tracing"}
KITS = {"plait.testing", "plait.stores.conformance", "plait.stores.conformance_effects"}
ROOT_MODULES = 8


def _layer_of(module: str) -> str:
    if module in KITS:
        return "kits"
    parts = module.split(".")
    if len(parts) > 2 or (SRC / parts[1]).is_dir():
        return parts[1]
    return "errors" if parts[1] == "errors" else "nouns"


def _lazy_reexport(module: str, found: str) -> bool:
    """Whether package `module` imports `found` only on first use (in a function, or for the
    type checker), as `plait.tools` does `MCPToolset`: its face, not its layer."""
    path = SRC.parent.joinpath(*module.split("."), "__init__.py")
    if not path.exists():
        return False
    at_top = [
        node.module
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ImportFrom) and node.module is not None
    ]
    return not any(name == found or name.startswith(f"{found}.") for name in at_top)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Return the imports of `graph` that point up the layers."""
    level = {name: i for i, names in enumerate(LAYERS) for name in names}
    upward = []
    for module, targets in sorted(graph.items()):
        for found in sorted(targets - FACES):
            here, there = _layer_of(module), _layer_of(found)
            if module in FACES or level[there] <= level[here]:
                continue
            if not _lazy_reexport(module, found):
                upward.append(f"{module} ({here}) -> {found} ({there})")
    return upward


def test_the_root_holds_the_nouns_and_the_faces_only() -> None:
    modules = sorted(p.stem for p in SRC.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(modules) <= ROOT_MODULES, modules
    assert {"messages", "events", "errors"} <= set(modules)


def test_imports_between_folders_point_down() -> None:
    assert upward_imports(import_graph()) == []


def test_every_folder_has_its_layer() -> None:
    folders = {p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders - set().union(*LAYERS) == set()


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = import_graph()
    graph["plait.core.kernel"].add("plait.run.runner")
    assert upward_imports(graph) == ["plait.core.kernel (core) -> plait.run.runner (run)"]


def test_no_module_is_longer_than_600_lines() -> None:
    long = [
        f"{path.relative_to(SRC)} ({n} lines)"
        for path in sorted(SRC.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > 600
    ]
    assert long == []


def test_a_run_is_configured_once_in_one_place() -> None:
    """The run stream configures a run's context, once, before it enters the root agent."""
    callers = [
        f"{path.relative_to(SRC)}"
        for path, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "configure"
    ]
    assert callers == ["run/stream.py"]
