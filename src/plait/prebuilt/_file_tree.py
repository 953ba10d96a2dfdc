"""The tree of files a file tool sees: `FileBackend`, paths confined to a root, glob patterns
and bounded walks over any backend, and `MemoryBackend`."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator, Mapping
from fnmatch import fnmatchcase
from itertools import islice
from typing import Literal, Protocol, TextIO, runtime_checkable

__all__ = ["FileBackend", "MemoryBackend", "PathOutsideRoot"]

_Kind = Literal["file", "dir"] | None
_MAGIC = re.compile(r"[*?[]")
_ALL = 1 << 62  # no limit on a walk


class PathOutsideRoot(PermissionError):
    """A path would reach outside the backend's root; `path` is the path as given."""

    def __init__(self, path: str, reason: str = "is outside the root") -> None:
        super().__init__(f"path {path!r} {reason}")
        self.path = path


@runtime_checkable
class FileBackend(Protocol):
    """Text files under a root; every path is relative to the root ("/" is the root).

    The file tools reach files only through these methods and bound their own work: `scan`
    and `open` let them stop reading a directory or a file once they have seen enough.
    """

    def normalize(self, path: str) -> str:
        """Return `path` as seen from the root ("/notes/a.md"), refusing paths outside it."""
        ...

    def ls(self, path: str) -> list[str]:
        """Return the entries of directory `path` as root paths, directories ending in "/"."""
        ...

    def scan(self, path: str, limit: int) -> list[str]:
        """Return at most `limit` entries of directory `path` to walk, unsorted: names,
        directories ending in "/"; leave out what a walk must not enter or read."""
        ...

    def read(self, path: str) -> str:
        """Return the text of file `path`."""
        ...

    def open(self, path: str) -> TextIO:
        """Open file `path` to read its text in pieces, line endings kept; the caller closes it."""
        ...

    def write(self, path: str, content: str) -> None:
        """Create or overwrite file `path`, creating its parent directories."""
        ...

    def exists(self, path: str) -> bool:
        """Return whether a file or directory `path` exists."""
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


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


# --- glob patterns: `**` spans directories; matched segment by segment, never backtracking ---


def _closure(parts: list[str], states: set[int]) -> frozenset[int]:
    """Add the states reached by letting each `**` match no directory at all."""
    done: set[int] = set()
    todo = list(states)
    while todo:
        state = todo.pop()
        if state not in done:
            done.add(state)
            if state < len(parts) and parts[state] == "**":
                todo.append(state + 1)
    return frozenset(done)


def _step(parts: list[str], states: frozenset[int], name: str) -> frozenset[int]:
    """Return the states after one more path segment `name` (a state counts matched parts)."""
    after = {
        state if parts[state] == "**" else state + 1
        for state in states
        if state < len(parts) and (parts[state] == "**" or fnmatchcase(name, parts[state]))
    }
    return _closure(parts, after)


def _glob_match(pattern: str) -> Callable[[str], bool]:
    """Return a test for root paths: `**` spans directories; `*`, `?` and `[]` stay in one."""
    parts = _relative(pattern).split("/")

    def match(file: str) -> bool:
        states = _closure(parts, {0})
        for name in file[1:].split("/"):
            states = _step(parts, states, name)
        return len(parts) in states

    return match


def _file_filter(glob: str | None) -> Callable[[str], bool]:
    """Return a test for root paths: file names match a glob without "/", paths one with it."""
    if not glob:
        return lambda _: True
    rel = _relative(glob)
    if "/" in rel:
        return _glob_match(rel)
    return lambda file: fnmatchcase(file.rpartition("/")[2], rel)


class _Walk:
    """A depth-first walk over a backend's files in sorted path order, visiting at most
    `max_entries` directory entries, `max_depth` levels down; `notes` says what it left out."""

    def __init__(self, backend: FileBackend, max_entries: int, max_depth: int) -> None:
        self.backend = backend
        self.max_entries = max_entries
        self.max_depth = max_depth
        self.visited = 0
        self.notes: list[str] = []

    def glob(self, pattern: str) -> Iterator[str]:
        """Yield the files matching `pattern`, starting below its leading plain segments."""
        parts = _relative(pattern).split("/")
        plain = 0
        while plain < len(parts) - 1 and not _MAGIC.search(parts[plain]):
            plain += 1
        return self.files("/".join(parts[:plain]), parts[plain:])

    def files(self, rel: str, parts: list[str]) -> Iterator[str]:
        """Yield as root paths the files under directory `rel` whose path below it matches the
        glob segments `parts`; a directory is entered only while some match is possible."""
        todo: list[tuple[str, frozenset[int], int]] = [(rel, _closure(parts, {0}), 0)]
        while todo:
            path, states, depth = todo.pop()
            if depth < 0:
                yield "/" + path
                continue
            found = []
            for name in self._scan(path, first=path == rel and depth == 0):
                child, is_dir = _join(path, name.rstrip("/")), name.endswith("/")
                after = _step(parts, states, name.rstrip("/"))
                if is_dir and after and depth >= self.max_depth:
                    self._note(f"left out directories over {self.max_depth} levels deep")
                elif is_dir and after:
                    found.append((child, after, depth + 1))
                elif not is_dir and len(parts) in after:
                    found.append((child, after, -1))
            todo.extend(reversed(found))

    def _scan(self, rel: str, first: bool) -> list[str]:
        left = self.max_entries - self.visited
        stopped = f"stopped after visiting {self.max_entries} directory entries"
        if left <= 0:
            self._note(stopped)
            return []
        try:
            names = self.backend.scan("/" + rel, left + 1)
        except PathOutsideRoot:
            if first:
                raise
            return []
        except OSError:  # missing, not a directory, or gone since it was listed
            return []
        if len(names) > left:
            self._note(stopped)
            names = names[:left]
        self.visited += len(names)
        return sorted(names)

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)


# --- the backends -----------------------------------------------------------------------------


class _TreeBackend:
    """The public backend methods, over a few primitives on normalized "a/b" paths."""

    __slots__ = ()

    def _rel(self, path: str) -> str:
        return _relative(path)

    def _kind(self, rel: str) -> _Kind:
        raise NotImplementedError

    def _children(self, rel: str, limit: int | None, walk: bool) -> list[str]:
        raise NotImplementedError

    def _reader(self, rel: str) -> TextIO:
        raise NotImplementedError

    def _store(self, rel: str, content: str) -> None:
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
        return sorted(base + name for name in self._children(rel, None, walk=False))

    def scan(self, path: str, limit: int) -> list[str]:
        """Return at most `limit` entries of directory `path` to walk, unsorted: names,
        directories ending in "/"; symlinked directories are left out."""
        return self._children(self._expect(path, "dir"), limit, walk=True)

    def read(self, path: str) -> str:
        """Return the text of file `path`."""
        rel = self._expect(path, "file")
        with self._reader(rel) as f:
            try:
                return f.read()
            except UnicodeDecodeError:
                raise ValueError(f"/{rel} is not a UTF-8 text file") from None

    def open(self, path: str) -> TextIO:
        """Open file `path` to read its text in pieces, line endings kept; the caller closes it."""
        return self._reader(self._expect(path, "file"))

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
        return [f"/{rel}"] if kind == "file" else list(_Walk(self, _ALL, _ALL).files(rel, ["**"]))

    def glob(self, pattern: str) -> list[str]:
        """Return the files matching `pattern` (`**` spans directories) as sorted root paths."""
        return list(_Walk(self, _ALL, _ALL).glob(pattern))


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

    def _children(self, rel: str, limit: int | None, walk: bool) -> list[str]:
        prefix = rel + "/" if rel else ""
        names = (n[len(prefix) :] for n in list(self._files) if n.startswith(prefix))
        unique = dict.fromkeys(head + slash for head, slash, _ in map(_partition, names))
        return list(islice(unique, limit))

    def _reader(self, rel: str) -> TextIO:
        return io.StringIO(self._files[rel], newline="\n")

    def _store(self, rel: str, content: str) -> None:
        self._files[rel] = content

    def __repr__(self) -> str:
        return f"MemoryBackend({len(self._files)} files)"


def _partition(name: str) -> tuple[str, str, str]:
    return name.partition("/")
