"""File tools for a deep agent: `ls`, `read_file`, `write_file`, `edit_file`, `glob`, `grep`.

```python
agent = ChatModelAgent("coder", model, tools=filesystem_tools(DirectoryBackend("workspace")))
```

The tools work on a `FileBackend` confined to a root: `MemoryBackend` keeps text in a dict,
`DirectoryBackend` keeps files on disk. Paths the model gives are relative to the root and a
leading "/" means the root ("/notes/a.md" is "notes/a.md"); backslashes are separators too.
A path that would leave the root ("..", a NUL byte, on disk a symlink pointing outside) raises
`PathOutsideRoot`. Paths come back from the root, with a leading "/", in results and errors
alike: the root's own place on the host never reaches the model.

`DirectoryBackend` opens every path one component at a time, each relative to the directory
descriptor opened before it and without following symlinks, so checking a path and opening it
are one step: a link swapped in while a tool runs cannot lead it outside. Symlinks that stay
inside the root are followed (resolved by the backend, never by the OS); see its docstring.

Every tool bounds its work (`FileLimits`): how much it reads, how many entries a walk visits and
how deep, how much it returns. A result cut short ends with a line starting "... " that says
which limit was hit and how to see more. `grep` uses RE2 regular expressions, which match in
time linear in the text: no pattern backtracks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Protocol, TextIO

import re2  # type: ignore[import-untyped]

from plait.errors import UsageError
from plait.prebuilt._directory import DirectoryBackend
from plait.prebuilt._file_tree import (
    FileBackend,
    MemoryBackend,
    PathOutsideRoot,
    _file_filter,
    _Walk,
)
from plait.tools.function import FunctionTool, tool

__all__ = [
    "DirectoryBackend",
    "FileBackend",
    "FileLimits",
    "MemoryBackend",
    "PathOutsideRoot",
    "filesystem_tools",
]

_SKIP = 1 << 16  # characters read at a time while skipping the rest of a long line


@dataclass(frozen=True, kw_only=True)
class FileLimits:
    """How much work one file-tool call may do. A result cut short by a limit ends with a line
    starting "... " that names the limit and says how to see more; nothing fails silently.

    Raises:
        UsageError: A limit is below 1.
    """

    max_output_chars: int = 100_000
    """The most characters one result holds (`read_file`, `ls`, `glob`, `grep`)."""
    max_line_chars: int = 2_000
    """Longer lines are cut in `read_file` and `grep` results, marked "[line truncated ...]"."""
    max_read_chars: int = 20_000_000
    """The most characters one call reads from files: `read_file` on its way to the last line
    it shows, `grep` over all the files it searches; `edit_file` refuses a longer file."""
    max_matches: int = 200
    """The most matching lines `grep` reports."""
    max_paths: int = 1_000
    """The most paths `ls` and `glob` report."""
    max_files: int = 10_000
    """The most files one `grep` searches."""
    max_entries: int = 100_000
    """The most directory entries `glob` and `grep` visit while walking the tree."""
    max_depth: int = 32
    """The most directory levels `glob` and `grep` descend below where they start."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or value < 1:
                raise UsageError(f"FileLimits.{f.name} must be a whole number of at least 1")


# --- the tools ------------------------------------------------------------------------------


def _descriptions(limits: FileLimits) -> dict[str, str]:
    """Describe each tool to the model, with the limits it works within."""
    return {
        "ls": "List a directory, one entry per line; directories end with '/'. Paths are "
        f"relative to the workspace root, written '/'. Shows at most {limits.max_paths} "
        "entries.",
        "read_file": "Read a text file. Lines come numbered like `cat -n` (number, tab, line); "
        "read a long file in pieces with offset and limit (in lines). One call returns at "
        f"most {limits.max_output_chars} characters; a line longer than "
        f"{limits.max_line_chars} characters is cut and marked '[line truncated ...]'. A "
        "result that stops early ends with '... ' and the offset to read on from.",
        "write_file": "Create a file, or overwrite it, with the given content. Parent directories "
        "are created as needed.",
        "edit_file": "Replace old_string with new_string in a file. old_string must match the file "
        "exactly (without the line numbers read_file adds) and occur once, unless replace_all "
        f"is true. Files over {limits.max_read_chars} characters cannot be edited.",
        "glob": "Find files by glob pattern: '*' and '?' match within one directory, '**' spans "
        "directories (e.g. '**/*.py' or '/src/**/test_*.py'). Returns sorted paths, at most "
        f"{limits.max_paths}; it visits at most {limits.max_entries} directory entries, "
        f"{limits.max_depth} levels deep, and ends with '... ' when it stopped early.",
        "grep": "Search files for a regular expression (RE2 syntax: like Python's, without "
        "backreferences or lookaround). Prints path:line_number:line for each matching line, "
        f"at most {limits.max_matches} matches; it searches at most {limits.max_files} files "
        f"and {limits.max_read_chars} characters, and ends with '... ' when it stopped early.",
    }


def filesystem_tools(backend: FileBackend, limits: FileLimits | None = None) -> list[FunctionTool]:
    """Return the tools `ls`, `read_file`, `write_file`, `edit_file`, `glob` and `grep`.

    Writes and edits made through these tools are serialized, so parallel tool calls editing
    the same file do not lose each other's changes.

    Args:
        backend: The files the tools work on.
        limits: How much work one call may do; `FileLimits()` (the defaults) if not given.
    """
    ops = _FileTools(backend, limits or FileLimits())
    return [
        tool(name=name, description=text)(getattr(ops, name))
        for name, text in _descriptions(ops.limits).items()
    ]


class _Output:
    """The lines of one tool result, up to a number of lines and of characters."""

    def __init__(self, max_lines: int, max_chars: int) -> None:
        self.lines: list[str] = []
        self._max_lines = max_lines
        self._left = max_chars

    def add(self, line: str) -> bool:
        """Append `line` and return True, or return False if the result has no room for it."""
        if len(self.lines) >= self._max_lines or len(line) + 1 > self._left:
            return False
        self.lines.append(line)
        self._left -= len(line) + 1
        return True

    def text(self, notes: list[str], empty: str) -> str:
        """Return the lines (or `empty` if there are none), then each note after "... "."""
        return "\n".join([*(self.lines or [empty]), *(f"... {note}" for note in notes)])


class _Lines:
    """The lines of a text stream, endings dropped, each cut to `width` characters (the rest of
    it skipped); reads about `budget` characters at most, `stopped` if more were left."""

    def __init__(self, stream: TextIO, width: int, budget: int, shown: str) -> None:
        self._stream = stream
        self._width = width
        self._left = budget
        self._shown = shown
        self.used = 0
        self.stopped = False

    def __iter__(self) -> Iterator[tuple[str, bool]]:
        """Yield each line and whether it was cut."""
        try:
            while self.used < self._left:
                text = self._read(self._width + 2)
                if not text:
                    return
                whole = text.endswith("\n") or len(text) < self._width + 2
                if whole:
                    text = text.removesuffix("\n").removesuffix("\r")
                else:
                    self._skip_line()
                yield text[: self._width], len(text) > self._width
            self.stopped = self._stream.read(1) != ""
        except UnicodeDecodeError:
            raise ValueError(f"{self._shown} is not a UTF-8 text file") from None

    def _read(self, size: int) -> str:
        text = self._stream.readline(size)
        self.used += len(text)
        return text

    def _skip_line(self) -> None:
        while self.used < self._left:
            rest = self._read(_SKIP)
            if not rest or rest.endswith("\n"):
                return


def _cut_mark(width: int) -> str:
    return f" [line truncated: only its first {width} characters are shown; grep finds the rest]"


def _page(lines: _Lines, shown: str, offset: int, limit: int, limits: FileLimits) -> str:
    """Return lines `offset` to `offset + limit - 1` numbered, within the limits, with a note
    saying where to read on if the file goes on."""
    out = _Output(limit, limits.max_output_chars)
    unshown: int | None = None  # the first line after `offset` not shown
    count = 0
    for count, (line, cut) in enumerate(lines, 1):
        if count >= offset and unshown is None:
            text = f"{count:6}\t{line}" + (_cut_mark(limits.max_line_chars) if cut else "")
            if not out.add(text):
                unshown = count
    if count == 0:
        return f"{shown} is empty"
    if count < offset and lines.stopped:
        raise ValueError(
            f"cannot reach line {offset} of {shown}: read_file reads at most "
            f"{limits.max_read_chars} characters per call; find the place with grep instead"
        )
    if count < offset:
        raise ValueError(f"offset {offset} is past the end of {shown} ({count} lines)")
    if unshown is None and not lines.stopped:
        return out.text([], "")
    size = f"has more than {count} lines" if lines.stopped else f"has {count} lines"
    return out.text([f"{shown} {size}; read on with offset={unshown or count + 1}"], "")


def _clip(line: str, at: int, width: int) -> str:
    """Return `line`, or `width` characters of it around position `at` marked as cut."""
    if len(line) <= width:
        return line
    start = max(0, min(at - width // 4, len(line) - width))
    return (
        f"{line[start : start + width]} [line truncated: characters {start + 1}-"
        f"{start + width} of {len(line)} shown]"
    )


class _Regex(Protocol):
    def search(self, text: str) -> _Match | None: ...


class _Match(Protocol):
    def start(self) -> int: ...


def _compile(pattern: str) -> _Regex:
    """Compile `pattern` with RE2 (matching in linear time), or say why it cannot be."""
    options = re2.Options()
    options.log_errors = False
    try:
        regex: _Regex = re2.compile(pattern, options)
    except (re2.error, ValueError) as exc:
        reason = exc.args[0] if exc.args else exc
        reason = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise ValueError(
            f"invalid regular expression {pattern!r}: {reason} (grep takes RE2 syntax, "
            "which has no backreferences or lookaround)"
        ) from None
    return regex


class _Grep:
    """One grep call: the matches so far, the characters left to read, and why it stopped."""

    def __init__(self, backend: FileBackend, regex: _Regex, limits: FileLimits) -> None:
        self.backend = backend
        self.regex = regex
        self.limits = limits
        self.out = _Output(limits.max_matches, limits.max_output_chars)
        self.left = limits.max_read_chars
        self.notes: list[str] = []

    def search(self, files: Iterator[str]) -> None:
        """Search `files` in order until they run out or a limit is reached."""
        for count, file in enumerate(files):
            if count == self.limits.max_files:
                self.notes.append(f"stopped after searching {count} files; narrow the search")
                return
            if not self._file(file):
                return

    def _file(self, file: str) -> bool:
        """Search one file; return False once a limit is reached."""
        found: list[str] = []
        lines = None
        try:
            with self.backend.open(file) as stream:
                lines = _Lines(stream, self.left, self.left, file)
                for number, (line, _) in enumerate(lines, 1):
                    match = self.regex.search(line)
                    if match is not None:
                        found.append(f"{file}:{number}:{self._show(line, match)}")
                    if len(found) > self.limits.max_matches:
                        break
        except (ValueError, OSError):  # not text, or gone since it was listed
            found = []
        self.left -= lines.used if lines else 0
        if not all(map(self.out.add, found)):
            full = len(self.out.lines) == self.limits.max_matches
            limit = self.limits.max_matches if full else self.limits.max_output_chars
            self.notes.append(
                f"stopped at {limit} {'matches' if full else 'characters'}; narrow the search"
            )
            return False
        if lines is not None and lines.stopped:
            read = self.limits.max_read_chars
            self.notes.append(f"stopped after reading {read} characters; narrow the search")
            return False
        return True

    def _show(self, line: str, match: _Match) -> str:
        return _clip(line, match.start(), self.limits.max_line_chars)


@dataclass(frozen=True)
class _FileTools:
    """The tool functions, bound to one backend and its limits."""

    backend: FileBackend
    limits: FileLimits
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ls(self, path: str = "/") -> str:
        """List a directory.

        Args:
            path: The directory to list; "/" is the root.
        """
        entries = self.backend.ls(path)
        out = _Output(self.limits.max_paths, self.limits.max_output_chars)
        if all(map(out.add, entries)):
            return out.text([], f"{self.backend.normalize(path)} is empty")
        note = f"showing {len(out.lines)} of {len(entries)} entries; use glob to narrow them"
        return out.text([note], "")

    def read_file(self, file_path: str, offset: int = 1, limit: int = 2000) -> str:
        """Read a text file with numbered lines.

        Args:
            file_path: The file to read; "/" is the root.
            offset: The number of the first line to show (1 is the first line).
            limit: The most lines to show.
        """
        if offset < 1 or limit < 1:
            raise ValueError(f"offset and limit must be at least 1 (got {offset}, {limit})")
        shown = self.backend.normalize(file_path)
        width, budget = self.limits.max_line_chars, self.limits.max_read_chars
        with self.backend.open(file_path) as stream:
            return _page(_Lines(stream, width, budget, shown), shown, offset, limit, self.limits)

    def write_file(self, file_path: str, content: str) -> str:
        """Create or overwrite a file.

        Args:
            file_path: The file to write; "/" is the root.
            content: The whole new text of the file.
        """
        with self.lock:
            self.backend.write(file_path, content)
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return f"Wrote {self.backend.normalize(file_path)} ({lines} lines)"

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
            text = self._whole(file_path, shown)
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

    def _whole(self, path: str, shown: str) -> str:
        """Return the text of file `path`, refusing one longer than `max_read_chars`."""
        limit = self.limits.max_read_chars
        with self.backend.open(path) as stream:
            try:
                text = stream.read(limit + 1)
            except UnicodeDecodeError:
                raise ValueError(f"{shown} is not a UTF-8 text file") from None
        if len(text) > limit:
            raise ValueError(
                f"{shown} is longer than {limit} characters, the most edit_file works on; "
                "rewrite it with write_file instead"
            )
        return text

    def glob(self, pattern: str) -> str:
        """Find files matching a glob pattern.

        Args:
            pattern: The pattern, matched against whole paths from the root.
        """
        walk = _Walk(self.backend, self.limits.max_entries, self.limits.max_depth)
        out = _Output(self.limits.max_paths, self.limits.max_output_chars)
        notes = walk.notes
        for file in walk.glob(pattern):
            if not out.add(file):
                notes = [f"more files match; showing the first {len(out.lines)}", *notes]
                break
        return out.text(notes, f"no files match {pattern!r}")

    def grep(self, pattern: str, path: str = "/", glob: str | None = None) -> str:
        """Search files for a regular expression.

        Args:
            pattern: The regular expression (RE2 syntax) to search each line for.
            path: The file or directory to search; "/" is the root.
            glob: Only search files matching this glob; without a "/" it matches file names
                (e.g. "*.py"), with one it matches paths from the root.
        """
        search = _Grep(self.backend, _compile(pattern), self.limits)
        walk = _Walk(self.backend, self.limits.max_entries, self.limits.max_depth)
        search.search(filter(_file_filter(glob), self._files(path, walk)))
        return search.out.text([*search.notes, *walk.notes], f"no matches for {pattern!r}")

    def _files(self, path: str, walk: _Walk) -> Iterator[str]:
        """Return the file `path`, or the files under directory `path`, walked within limits."""
        shown = self.backend.normalize(path)
        try:
            self.backend.scan(path, 0)
        except NotADirectoryError:
            return iter([shown])
        except FileNotFoundError:
            raise FileNotFoundError(f"no such file or directory: {shown}") from None
        return walk.files(shown[1:], ["**"])
