"""Loading a TARGET: the agent a command runs, named `path/file.py:name` or `package.module:name`.

`name` (dotted attributes allowed: `module:teams.support`) is an `Agent`, or a function
taking no arguments that returns one. Anything that keeps a TARGET from loading — no such
file, a module that cannot be imported, a missing name, something that is not an agent —
is a `UsageError` whose one-line message names the TARGET and says what to do.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from plait._util.quote import quote
from plait.core.agent import Agent
from plait.errors import PlaitError, UsageError

__all__ = ["load_target", "load_targets"]

_FORM = "path/to/file.py:name or package.module:name"
#: The longest TARGET taken, in characters.
MAX_TARGET = 1024


def load_target(target: str) -> Agent:
    """Return the agent `target` names (calling its factory if it names one).

    Raises:
        UsageError: The target cannot be loaded; the message says why and what to do.
        PlaitError: The factory raised one (such as a model that cannot be made).
    """
    return _load(target, {})


def load_targets(targets: list[str]) -> list[Agent]:
    """Return the agent of each target, in order (a file named twice is imported once)."""
    files: dict[Path, ModuleType] = {}
    return [_load(target, files) for target in targets]


def _cut(text: str, limit: int = 80) -> str:
    """Return `text` cut to `limit` characters (a TARGET's parts are echoed in messages)."""
    return text if len(text) <= limit else f"{text[:limit]}…"


def _load(target: str, files: dict[Path, ModuleType]) -> Agent:
    """Return the agent of `target`, importing a file only once per `files`."""
    if len(target) > MAX_TARGET:
        raise UsageError(
            f"TARGET {quote(target, 80)} is longer than {MAX_TARGET} characters; it must be {_FORM}"
        )
    source, sep, name = target.rpartition(":")
    if not sep or not source or not name:
        raise UsageError(f"TARGET {quote(target)} must be {_FORM}")
    is_file = _is_path(source)
    module = _load_file(source, target, files) if is_file else _load_module(source, target)
    found = _attribute(module, name, target, Path(source).name if is_file else source)
    return _as_agent(found, name, target)


def _is_path(source: str) -> bool:
    """Whether the part before the colon names a file rather than a module."""
    return source.endswith(".py") or "/" in source or "\\" in source


def _load_file(source: str, target: str, files: dict[Path, ModuleType]) -> ModuleType:
    """Import a Python file as a module of its own (its directory goes on `sys.path`, so
    it can import its neighbours)."""
    path = Path(source).expanduser()
    if not path.is_file():
        hint = "" if path.suffix == ".py" else " (a file TARGET ends in .py)"
        raise UsageError(
            f"TARGET {quote(target)}: no file {quote(str(path))}{hint}; check the path"
        )
    path = path.resolve()
    if path in files:
        return files[path]
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"_plait_target_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"TARGET {quote(target)}: {quote(str(path))} cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        sys.modules.pop(module_name, None)
        if not isinstance(exc, Exception):
            raise
        raise UsageError(
            f"TARGET {quote(target)}: importing {path.name} failed: {_brief(exc)}"
        ) from None
    files[path] = module
    return module


def _load_module(source: str, target: str) -> ModuleType:
    """Import `package.module` (the working directory first on `sys.path`)."""
    if not all(part.isidentifier() for part in source.split(".")):
        raise UsageError(f"TARGET {quote(target)} must be {_FORM}")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (source == exc.name or source.startswith(exc.name + ".")):
            raise UsageError(
                f"TARGET {quote(target)}: no module named {quote(exc.name or '', 80)}; "
                "run from the directory that holds it, install its package, or give a file "
                "path (path/to/file.py:name)"
            ) from None
        raise UsageError(
            f"TARGET {quote(target)}: importing {_cut(source)} failed: {_brief(exc)}"
        ) from None
    except Exception as exc:
        raise UsageError(
            f"TARGET {quote(target)}: importing {_cut(source)} failed: {_brief(exc)}"
        ) from None


def _attribute(module: ModuleType, name: str, target: str, shown: str) -> Any:
    """Return `module.name`, following dots (`shown` names the module in errors)."""
    found: Any = module
    for part in name.split("."):
        if not part.isidentifier() or not hasattr(found, part):
            agents = sorted(k for k, v in vars(module).items() if _looks_like_agent(v))
            known = f"; it has: {', '.join(agents)}" if agents else ""
            raise UsageError(
                f"TARGET {quote(target)}: {_cut(shown)} has no {quote(name, 80)}{known}"
            )
        found = getattr(found, part)
    return found


def _looks_like_agent(value: Any) -> bool:
    return not isinstance(value, type) and isinstance(value, Agent)


def _as_agent(found: Any, name: str, target: str) -> Agent:
    """Return `found` if it is an agent, else call it if it is a zero-argument factory."""
    if _looks_like_agent(found):
        return found  # type: ignore[no-any-return]
    if not callable(found):
        raise UsageError(
            f"TARGET {quote(target)}: {_cut(name)} is of type {type(found).__name__}, not an "
            "Agent or a "
            "function that takes no arguments and returns one"
        )
    _check_no_arguments(found, name, target)
    if inspect.iscoroutinefunction(found):
        raise UsageError(f"TARGET {quote(target)}: {_cut(name)} is async; make it a plain function")
    try:
        made = found()
    except PlaitError:
        raise
    except Exception as exc:
        raise UsageError(
            f"TARGET {quote(target)}: calling {_cut(name)}() failed: {_brief(exc)}"
        ) from None
    if not _looks_like_agent(made):
        raise UsageError(
            f"TARGET {quote(target)}: {_cut(name)}() returned a value of type "
            f"{type(made).__name__}, "
            "not an Agent"
        )
    return made  # type: ignore[no-any-return]


def _check_no_arguments(found: Any, name: str, target: str) -> None:
    try:
        inspect.signature(found).bind()
    except TypeError:
        raise UsageError(
            f"TARGET {quote(target)}: {_cut(name)} needs arguments; name an Agent, or a function "
            "that takes none and returns one"
        ) from None
    except ValueError:  # no signature to check (a builtin): try calling it
        return


def _brief(exc: BaseException) -> str:
    """Return `Type: message (file:line)` of an exception, on one line: the place in the
    user's code it comes from (`_where`)."""
    text = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
    text = " ".join(text.split())
    where = _where(exc)
    where = f" ({where})" if where else ""
    return f"{type(exc).__name__}: {text}{where}" if text else f"{type(exc).__name__}{where}"


def _where(exc: BaseException) -> str:
    """Return `file:line` of where `exc` comes from, or "" when no file is known.

    A syntax error is where the parser stopped; anything else the deepest frame of the
    user's code in its traceback: not Python's import machinery (`<frozen ...>`), not this
    module, and not the standard library or an installed package unless every frame is.
    """
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f"{_shown_file(exc.filename)}:{exc.lineno}"
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<") and frame.filename != __file__
    ]
    if not frames:
        return ""
    libraries = _library_folders()
    users = [frame for frame in frames if not frame.filename.startswith(libraries)]
    frame = (users or frames)[-1]
    return f"{_shown_file(frame.filename)}:{frame.lineno}"


def _library_folders() -> tuple[str, ...]:
    """The folders of the standard library and of installed packages."""
    import sysconfig

    paths = sysconfig.get_paths()
    return tuple({paths[key] + "/" for key in ("stdlib", "platstdlib", "purelib", "platlib")})


def _shown_file(filename: str) -> str:
    """Return a file's path from the working directory when it is under it (and that is
    not the root folder), else its name."""
    path = Path(filename)
    try:
        here = Path.cwd()
        if here != Path(here.anchor):
            return str(path.resolve().relative_to(here))
    except (OSError, ValueError):
        pass
    return path.name
