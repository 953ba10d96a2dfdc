"""Build the API reference of plait's public modules from their docstrings, with pdoc.

    python scripts/api_docs.py [OUTPUT_DIRECTORY]    # default: build/api

Open OUTPUT_DIRECTORY/index.html in a browser. The build fails (exit 1) when pdoc fails or
warns: a name in a module's `__all__` that does not resolve, an annotation it cannot read.
"""

from __future__ import annotations

import html
import importlib
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "build" / "api"

#: The modules users import, each documented with the names of its `__all__`.
MODULES = (
    "plait",
    "plait.errors",
    "plait.messages",
    "plait.events",
    "plait.hooks",
    "plait.testing",
    "plait.cassette",
    "plait.tracing",
    "plait.stores",
    "plait.models",
    "plait.tools",
    "plait.server",
    "plait.memory",
    "plait.eval",
    "plait.graph",
    "plait.prebuilt",
    "plait.protocols.mcp",
    "plait.protocols.a2a",
    "plait.temporal",
)


def _load(name: str) -> ModuleType:
    """Import `name` and give its lazy exports a value, as pdoc reads a module's names from
    its `__dict__` (a package's `__getattr__` imports them on first use); a name that does
    not resolve is left for pdoc to report."""
    module = importlib.import_module(name)
    for export in getattr(module, "__all__", ()):
        if export not in vars(module) and (value := getattr(module, export, None)) is not None:
            setattr(module, export, value)
    return module


def _summary(docstring: str) -> str:
    """Return the first paragraph of `docstring` on one line, as HTML text."""
    return html.escape(" ".join(docstring.strip().split("\n\n", 1)[0].split()))


def _index(docs: dict[str, Any]) -> str:
    """Return the page that lists every module with the first paragraph of its docstring
    (pdoc's own index only leads to `plait`, whose page lists the modules of its `__all__`)."""
    items = "\n".join(
        f'<li><a href="{name.replace(".", "/")}.html"><code>{name}</code></a> — '
        f"{_summary(module.docstring)}</li>"
        for name, module in docs.items()
    )
    return (
        '<!doctype html>\n<html lang="en">\n<head><meta charset="utf-8">'
        "<title>plait API reference</title></head>\n<body>\n<h1>plait API reference</h1>\n"
        f"<ul>\n{items}\n</ul>\n</body>\n</html>\n"
    )


def build(output: Path) -> list[str]:
    """Write the reference of `MODULES` into `output`; return pdoc's warnings."""
    import pdoc.doc
    import pdoc.render

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = {name: pdoc.doc.Module(_load(name)) for name in MODULES}
        for module in docs.values():
            page = output / f"{module.fullname.replace('.', '/')}.html"
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(pdoc.render.html_module(module, docs), encoding="utf-8")
        (output / "index.html").write_text(_index(docs), encoding="utf-8")
        (output / "search.js").write_text(pdoc.render.search_index(docs), encoding="utf-8")
    return [f"{w.category.__name__}: {w.message}" for w in caught]


def main(argv: list[str]) -> int:
    """Build into the directory given (or `build/api`); exit 1 on a failure or a warning."""
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print("usage: python scripts/api_docs.py [OUTPUT_DIRECTORY]", file=sys.stderr)
        return 2
    output = Path(argv[0]) if argv else DEFAULT_OUTPUT
    try:
        problems = build(output)
    except Exception as exc:  # pdoc failed: say what, not a traceback
        print(f"api docs: pdoc failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for problem in problems:
        print(f"api docs: {problem}", file=sys.stderr)
    if problems:
        print(f"api docs: {len(problems)} warning(s); the reference is incomplete", file=sys.stderr)
        return 1
    print(f"api docs: {len(MODULES)} modules in {output}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
