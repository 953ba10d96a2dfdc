"""File tools for a deep agent: `ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`.

```python
agent = ChatModelAgent("coder", model, tools=filesystem_tools(DirectoryBackend("workspace")))
```

The tools work on a `FileBackend` confined to a root: `MemoryBackend` keeps text in a dict,
`DirectoryBackend` keeps files on disk. Paths the model gives are relative to the root and a
leading "/" means the root ("/notes/a.md" is "notes/a.md"); backslashes are separators too.
A path that would leave the root ("..", a NUL byte, on disk a symlink pointing outside) raises
`PathOutsideRoot` before anything is opened. Paths come back from the root, with a leading "/".
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from plait.errors import UsageError
from plait.tools.function import FunctionTool, tool

__all__ = [
    "DirectoryBackend",
    "FileBackend",
    "MemoryBackend",
    "PathOutsideRoot",
    "filesystem_tools",
]

MAX_GREP_MATCHES = 200

_Kind = Literal["file", "dir"] | None


class PathOutsideRoot(PermissionError):
    """A path would reach outside the backend's root; `path` is the path as given."""

    def __init__(self, path: str, reason: str = "is outside the root") -> None:
        super().__init__(f"path {path!r} {reason}")
        self.path = path


@runtime_checkable
class FileBackend(Protocol):
    """Text files under a root; every path is relative to the root ("/" is the root)."""

    def normalize(self, path: str) -> str:
        """Return `path` as seen from the root ("/notes/a.md"), refusing paths outside it."""
        ...

    def ls(self, path: str) -> list[str]:
        """Return the entries of directory `path` as root paths, directories ending in "/"."""
        ...

    def read(self, path: str) -> str:
        """Return the text of file `path`."""
        ...

    def write(self, path: str, content: str) -> None:
        """Create or overwrite file `path`, creating its parent directories."""
        ...

    def exists(self, path: str) -> bool:
        """Return whether a file or directory `path` exists."""
        ...

    def files(self, path: str) -> list[str]:
        """Return every file at or under `path` as sorted root paths."""
        ...

    def glob(self, pattern: str) -> list[str]:
        """Return the files matching `pattern` (`**` spans directories) as sorted root paths."""
        ...


def _relative(path: str) -> str:
    """Normalize `path` to "a/b" form ("" is the root), refusing NUL bytes and escapes."""
    if "\x00" in path:
        raise PathOutsideRoot(path, "contains a NUL byte")
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            parts.append(part)
        elif parts:
            parts.pop()
        else:
            raise PathOutsideRoot(path)
    return "/".join(parts)


def _glob_match(pattern: str) -> Callable[[str], bool]:
    """Return a test for root paths: `**` spans directories; `*`, `?` and `[]` stay in one."""
    parts = _relative(pattern).split("/")
    return lambda file: _match(parts, file[1:].split("/"))


def _match(parts: list[str], names: list[str]) -> bool:
    """Return whether the glob segments `parts` match the path segments `names`."""
    if not parts:
        return not names
    if parts[0] == "**":
        return any(_match(parts[1:], names[i:]) for i in range(len(names) + 1))
    return bool(names) and fnmatchcase(names[0], parts[0]) and _match(parts[1:], names[1:])


class _TreeBackend:
    """The public backend methods, over a few primitives on normalized "a/b" paths."""

    __slots__ = ()

    def _rel(self, path: str) -> str:
        return _relative(path)

    def _kind(self, rel: str) -> _Kind:
        raise NotImplementedError

    def _children(self, rel: str) -> list[str]:
        raise NotImplementedError

    def _load(self, rel: str) -> str:
        raise NotImplementedError

    def _store(self, rel: str, content: str) -> None:
        raise NotImplementedError

    def _walk(self, rel: str) -> list[str]:
        raise NotImplementedError

    def _expect(self, path: str, want: Literal["file", "dir"]) -> str:
        """Return the normalized `path`, raising unless it is a `want` ("file" or "dir")."""
        rel = self._rel(path)
        kind = self._kind(rel)
        noun = "directory" if want == "dir" else "file"
        if kind is None:
            raise FileNotFoundError(f"no such {noun}: /{rel}")
        if kind != want:
            error = NotADirectoryError if want == "dir" else IsADirectoryError
            raise error(f"/{rel} is not a {noun}")
        return rel

    def normalize(self, path: str) -> str:
        """Return `path` as seen from the root ("/notes/a.md"), refusing paths outside it."""
        return "/" + self._rel(path)

    def ls(self, path: str) -> list[str]:
        """Return the entries of directory `path` as root paths, directories ending in "/"."""
        rel = self._expect(path, "dir")
        base = f"/{rel}/" if rel else "/"
        return sorted(base + name for name in self._children(rel))

    def read(self, path: str) -> str:
        """Return the text of file `path`."""
        return self._load(self._expect(path, "file"))

    def write(self, path: str, content: str) -> None:
        """Create or overwrite file `path`, creating its parent directories."""
        rel = self._rel(path)
        if self._kind(rel) == "dir":
            raise IsADirectoryError(f"/{rel} is a directory, not a file")
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if self._kind(parent) == "file":
                raise NotADirectoryError(f"cannot write /{rel}: /{parent} is a file")
        self._store(rel, content)

    def exists(self, path: str) -> bool:
        """Return whether a file or directory `path` exists."""
        return self._kind(self._rel(path)) is not None

    def files(self, path: str) -> list[str]:
        """Return every file at or under `path` as sorted root paths."""
        rel = self._rel(path)
        kind = self._kind(rel)
        if kind is None:
            raise FileNotFoundError(f"no such file or directory: /{rel}")
        return [f"/{rel}"] if kind == "file" else sorted("/" + f for f in self._walk(rel))

    def glob(self, pattern: str) -> list[str]:
        """Return the files matching `pattern` (`**` spans directories) as sorted root paths."""
        return list(filter(_glob_match(pattern), self.files("/")))


class MemoryBackend(_TreeBackend):
    """An in-memory filesystem: normalized path -> text; directories are implied by files."""

    __slots__ = ("_files",)

    def __init__(self, files: Mapping[str, str] | None = None) -> None:
        self._files: dict[str, str] = {}
        for path, content in (files or {}).items():
            self.write(path, content)

    def _kind(self, rel: str) -> _Kind:
        if rel in self._files:
            return "file"
        prefix = rel + "/"
        return "dir" if not rel or any(n.startswith(prefix) for n in list(self._files)) else None

    def _children(self, rel: str) -> list[str]:
        parts = (name.partition("/") for name in self._walk(rel, strip=True))
        return list({head + slash for head, slash, _ in parts})

    def _load(self, rel: str) -> str:
        return self._files[rel]

    def _store(self, rel: str, content: str) -> None:
        self._files[rel] = content

    def _walk(self, rel: str, strip: bool = False) -> list[str]:
        prefix = rel + "/" if rel else ""
        cut = len(prefix) if strip else 0
        return [n[cut:] for n in list(self._files) if n.startswith(prefix)]  # safe across threads

    def __repr__(self) -> str:
        return f"MemoryBackend({len(self._files)} files)"


class DirectoryBackend(_TreeBackend):
    """Real UTF-8 files under the directory `root`; symlinks leading outside it are refused.

    An absolute path that starts with the root's own path ("/home/me/work/a.txt" for the
    root "/home/me/work") names the file under the root; any other leading "/" is the root.
    """

    __slots__ = ("_prefixes", "root")

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise UsageError(f"DirectoryBackend root {str(root)!r} is not a directory")
        spellings = {str(Path(root).absolute()).rstrip("/"), str(self.root).rstrip("/")}
        self._prefixes = tuple(p for p in spellings if p)

    def _rel(self, path: str) -> str:
        given = path
        for prefix in self._prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                path = path[len(prefix) :]
                break
        rel = _relative(path)
        if not self._inside(self.root / rel):
            raise PathOutsideRoot(given, "leads outside the root through a symlink")
        return rel

    def _inside(self, path: Path) -> bool:
        try:
            return path.resolve().is_relative_to(self.root)
        except RuntimeError:  # a symlink loop
            return False

    def _kind(self, rel: str) -> _Kind:
        disk = self.root / rel
        return "dir" if disk.is_dir() else "file" if disk.is_file() else None

    def _children(self, rel: str) -> list[str]:
        return [
            child.name + ("/" if child.is_dir() else "")
            for child in (self.root / rel).iterdir()
            if self._inside(child)
        ]

    def _load(self, rel: str) -> str:
        try:
            with (self.root / rel).open(encoding="utf-8", newline="") as f:
                return f.read()
        except UnicodeDecodeError:
            raise ValueError(f"/{rel} is not a UTF-8 text file") from None

    def _store(self, rel: str, content: str) -> None:
        disk = self.root / rel
        disk.parent.mkdir(parents=True, exist_ok=True)
        with disk.open("w", encoding="utf-8", newline="") as f:
            f.write(content)

    def _walk(self, rel: str) -> list[str]:
        found = []
        for dirpath, _, filenames in os.walk(self.root / rel):  # symlinked dirs not entered
            for name in filenames:
                file = Path(dirpath, name)
                if self._inside(file) and file.is_file():
                    found.append(file.relative_to(self.root).as_posix())
        return found

    def __repr__(self) -> str:
        return f"DirectoryBackend({str(self.root)!r})"


_DESCRIPTIONS = {
    "ls": "List a directory, one entry per line; directories end with '/'. Paths are "
    "relative to the workspace root, written '/'.",
    "read_file": "Read a text file. Lines come numbered like `cat -n` (number, tab, line); "
    "read a long file in pieces with offset and limit.",
    "write_file": "Create a file, or overwrite it, with the given content. Parent directories "
    "are created as needed.",
    "edit_file": "Replace old_string with new_string in a file. old_string must match the file "
    "exactly (without the line numbers read_file adds) and occur once, unless replace_all "
    "is true.",
    "glob": "Find files by glob pattern: '*' and '?' match within one directory, '**' spans "
    "directories (e.g. '**/*.py' or '/src/**/test_*.py'). Returns sorted paths.",
    "grep": "Search files for a regular expression (Python syntax). Prints "
    f"path:line_number:line for each matching line, at most {MAX_GREP_MATCHES} matches.",
}


def filesystem_tools(backend: FileBackend) -> list[FunctionTool]:
    """Return the tools `ls`, `read_file`, `write_file`, `edit_file`, `glob` and `grep`.

    Writes and edits made through these tools are serialized, so parallel tool calls editing
    the same file do not lose each other's changes.

    Args:
        backend: The files the tools work on.
    """
    ops = _FileTools(backend)
    return [
        tool(name=name, description=text)(getattr(ops, name))
        for name, text in _DESCRIPTIONS.items()
    ]


def _lines(text: str) -> list[str]:
    """Split `text` into lines without their endings ("a\\n" is one line, "" is none)."""
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


@dataclass(frozen=True)
class _FileTools:
    """The tool functions, bound to one backend."""

    backend: FileBackend
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ls(self, path: str = "/") -> str:
        """List a directory.

        Args:
            path: The directory to list; "/" is the root.
        """
        entries = self.backend.ls(path)
        return "\n".join(entries) if entries else f"{self.backend.normalize(path)} is empty"

    def read_file(self, file_path: str, offset: int = 1, limit: int = 2000) -> str:
        """Read a text file with numbered lines.

        Args:
            file_path: The file to read; "/" is the root.
            offset: The number of the first line to show (1 is the first line).
            limit: The most lines to show.
        """
        if offset < 1 or limit < 1:
            raise ValueError(f"offset and limit must be at least 1 (got {offset}, {limit})")
        lines = _lines(self.backend.read(file_path))
        shown = self.backend.normalize(file_path)
        if not lines:
            return f"{shown} is empty"
        if offset > len(lines):
            raise ValueError(f"offset {offset} is past the end of {shown} ({len(lines)} lines)")
        end = min(len(lines), offset - 1 + limit)
        numbered = [f"{n:6}\t{lines[n - 1]}" for n in range(offset, end + 1)]
        if end < len(lines):
            numbered.append(f"... {shown} has {len(lines)} lines; read on with offset={end + 1}")
        return "\n".join(numbered)

    def write_file(self, file_path: str, content: str) -> str:
        """Create or overwrite a file.

        Args:
            file_path: The file to write; "/" is the root.
            content: The whole new text of the file.
        """
        with self.lock:
            self.backend.write(file_path, content)
        return f"Wrote {self.backend.normalize(file_path)} ({len(_lines(content))} lines)"

    def edit_file(
        self, file_path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> str:
        """Replace exact text in a file.

        Args:
            file_path: The file to edit; "/" is the root.
            old_string: The exact text to replace.
            new_string: The text to put in its place.
            replace_all: Replace every occurrence instead of exactly one.
        """
        shown = self.backend.normalize(file_path)
        if not old_string:
            raise ValueError("old_string is empty; use write_file to create or overwrite a file")
        if old_string == new_string:
            raise ValueError("old_string and new_string are the same; there is nothing to change")
        with self.lock:
            text = self.backend.read(file_path)
            count = text.count(old_string)
            if count == 0:
                raise ValueError(f"old_string was not found in {shown}")
            if count > 1 and not replace_all:
                raise ValueError(
                    f"old_string occurs {count} times in {shown}; give more surrounding context "
                    "to make it unique, or set replace_all to true to replace every occurrence"
                )
            done = count if replace_all else 1
            self.backend.write(file_path, text.replace(old_string, new_string, done))
        return f"Replaced {done} occurrence{'s' if done > 1 else ''} in {shown}"

    def glob(self, pattern: str) -> str:
        """Find files matching a glob pattern.

        Args:
            pattern: The pattern, matched against whole paths from the root.
        """
        matches = self.backend.glob(pattern)
        return "\n".join(matches) if matches else f"no files match {pattern!r}"

    def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> str:
        """Search files for a regular expression.

        Args:
            pattern: The regular expression to search each line for.
            path: The file or directory to search; "/" is the root.
            glob: Only search files matching this glob; without a "/" it matches file names
                (e.g. "*.py"), with one it matches paths from the root.
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        found: list[str] = []
        for file in filter(_file_filter(glob), self.backend.files(path)):
            try:
                text = self.backend.read(file)
            except (ValueError, OSError):  # not text, or gone since it was listed
                continue
            for number, line in enumerate(_lines(text), 1):
                if regex.search(line) is None:
                    continue
                if len(found) == MAX_GREP_MATCHES:
                    found.append(f"... stopped at {MAX_GREP_MATCHES} matches; narrow the search")
                    return "\n".join(found)
                found.append(f"{file}:{number}:{line}")
        return "\n".join(found) if found else f"no matches for {pattern!r}"


def _file_filter(glob: str | None) -> Callable[[str], bool]:
    """Return a test for root paths: file names match a glob without "/", paths one with it."""
    if not glob:
        return lambda _: True
    rel = _relative(glob)
    if "/" in rel:
        return _glob_match(rel)
    return lambda file: fnmatchcase(file.rpartition("/")[2], rel)
