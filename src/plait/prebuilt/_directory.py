"""`DirectoryBackend`: files on disk, each path opened one component at a time beneath the root
so that checking a path and opening it are one step."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from contextlib import suppress
from itertools import islice
from pathlib import Path
from typing import Literal, TextIO, TypeVar

from plait.errors import UsageError
from plait.prebuilt._file_tree import PathOutsideRoot, _join, _Kind, _relative, _TreeBackend

__all__ = ["DirectoryBackend"]

_T = TypeVar("_T")
_LINK_HOPS = 40  # symlinks followed (and retries after a race) while opening one path
_JUNCTION = 0xA0000003  # stat.IO_REPARSE_TAG_MOUNT_POINT: a Windows junction
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_OPEN = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


_Entry = Literal["file", "dir", "link", "other"]


def _is_link(st: os.stat_result) -> bool:
    """Return whether `st` (from lstat) is a symlink, or a Windows junction."""
    tag = getattr(st, "st_reparse_tag", 0)
    return stat.S_ISLNK(st.st_mode) or tag == _JUNCTION


def _entry_kind(entry: os.DirEntry[str]) -> _Entry:
    if entry.is_symlink():
        return "link"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    return "file" if entry.is_file(follow_symlinks=False) else "other"


def _descriptors_work() -> bool:
    """Return whether this OS opens paths relative to a directory descriptor, not following
    symlinks (Linux, macOS and the BSDs do; Windows does not)."""
    at = {os.open, os.stat, os.mkdir, os.readlink}
    return (
        bool(_NOFOLLOW and _DIRECTORY)
        and at <= os.supports_dir_fd
        and (os.scandir in os.supports_fd)
    )


class _FdDir:
    """A directory held by a descriptor; each call names one entry in it, never following it."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def open(self, name: str, flags: int, mode: int = 0o666) -> int:
        return os.open(name, flags | _NOFOLLOW | _OPEN, mode, dir_fd=self.fd)

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def readlink(self, name: str) -> str:
        return os.readlink(name, dir_fd=self.fd)

    def mkdir(self, name: str) -> None:
        os.mkdir(name, dir_fd=self.fd)

    def child(self, name: str) -> _FdDir:
        return _FdDir(self.open(name, os.O_RDONLY | _DIRECTORY))

    def entries(self, limit: int | None) -> list[tuple[str, _Entry]]:
        with os.scandir(self.fd) as found:
            return [(e.name, _entry_kind(e)) for e in islice(found, limit)]

    def close(self) -> None:
        os.close(self.fd)


class _PathDir:
    """Where descriptors cannot be used (Windows): a directory named by its host path. Each
    step checks for a link and then opens by path, so a link swapped in between is missed."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def open(self, name: str, flags: int, mode: int = 0o666) -> int:
        with suppress(FileNotFoundError):
            self._refuse_link(self.lstat(name), name)
        return os.open(os.path.join(self.path, name), flags | _NOFOLLOW | _OPEN, mode)

    def lstat(self, name: str) -> os.stat_result:
        return os.lstat(os.path.join(self.path, name))

    def readlink(self, name: str) -> str:
        raise OSError(errno.ELOOP, "symlinks are not followed on this platform", name)

    def mkdir(self, name: str) -> None:
        os.mkdir(os.path.join(self.path, name))

    def child(self, name: str) -> _PathDir:
        st = self.lstat(name)
        self._refuse_link(st, name)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", name)
        return _PathDir(os.path.join(self.path, name))

    def entries(self, limit: int | None) -> list[tuple[str, _Entry]]:
        with os.scandir(self.path) as found:
            return [(e.name, _entry_kind(e)) for e in islice(found, limit)]

    def close(self) -> None:
        pass

    @staticmethod
    def _refuse_link(st: os.stat_result, name: str) -> None:
        if _is_link(st):
            raise OSError(errno.ELOOP, "is a symbolic link", name)


_Dir = _FdDir | _PathDir


def _kind_at(here: _Dir, name: str) -> _Kind:
    st = here.lstat(name)
    if _is_link(st):
        raise OSError(errno.ELOOP, "is a symbolic link", name)
    return "dir" if stat.S_ISDIR(st.st_mode) else "file"


def _open_regular(here: _Dir, name: str, flags: int, rel: str) -> int:
    """Open regular file `name` in `here` (never a FIFO or device, which could block forever)."""
    with suppress(FileNotFoundError):
        st = here.lstat(name)
        if not (_is_link(st) or stat.S_ISREG(st.st_mode)):
            raise _not_regular(rel)
    fd = here.open(name, flags | _NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_regular(rel)
    return fd


def _not_regular(rel: str) -> ValueError:
    return ValueError(f"/{rel} is not a regular file; only regular files can be read or written")


def _entries_at(here: _Dir, name: str, limit: int | None) -> list[tuple[str, _Entry]]:
    directory = here.child(name)
    try:
        return directory.entries(limit)
    finally:
        directory.close()


class DirectoryBackend(_TreeBackend):
    """Real UTF-8 files under the directory `root`; nothing outside it is ever opened.

    Each path is opened one component at a time, relative to the directory opened before it
    and without following symlinks (`os.open` with `dir_fd` and `O_NOFOLLOW`), so a symlink
    swapped in while a tool runs cannot lead it outside. A symlink met on the way is read and
    resolved by the backend beneath the root: one staying inside the root is followed (an
    absolute target must start with the root's path); one leading outside, or through more
    than 40 links, raises `PathOutsideRoot`. Walks (`glob`, `grep`) do not enter symlinked
    directories. Only regular files are read or written: a FIFO or device is refused, not
    opened in a way that could block. Where the OS lacks `dir_fd` or `O_NOFOLLOW` (Windows),
    every symlink or junction met is refused instead, and a link swapped in between the check
    and the open is not caught there.

    An absolute path that starts with the root's own path ("/home/me/work/a.txt" for the
    root "/home/me/work") names the file under the root; any other leading "/" is the root.
    """

    __slots__ = ("_descriptors", "_prefixes", "root")

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise UsageError(f"DirectoryBackend root {str(root)!r} is not a directory")
        spellings = {str(Path(root).absolute()).rstrip("/"), str(self.root).rstrip("/")}
        self._prefixes = tuple(p for p in spellings if p)
        self._descriptors = _descriptors_work()

    def _rel(self, path: str) -> str:
        for prefix in self._prefixes:
            if path == prefix or path.startswith(prefix + "/"):
                return _relative(path[len(prefix) :])
        return _relative(path)

    def _root_dir(self) -> _Dir:
        if not self._descriptors:
            return _PathDir(str(self.root))
        try:
            return _FdDir(os.open(self.root, os.O_RDONLY | _DIRECTORY | _OPEN))
        except OSError as exc:
            raise OSError(f"cannot open the root directory ({exc.strerror})") from None

    def _at(self, rel: str, final: Callable[[_Dir, str], _T], create: bool = False) -> _T:
        """Return `final(directory, name)` for the last component of `rel`, having opened each
        directory before it beneath the root; symlinks met are followed inside the root."""
        todo = rel.split("/")[::-1] if rel else ["."]
        dirs: list[_Dir] = [self._root_dir()]
        hops = 0
        try:
            while True:
                name = todo.pop()
                if name in ("", ".", ".."):
                    if name == "..":
                        self._up(dirs, rel)
                    if todo:
                        continue
                    name = "."
                here = dirs[-1]
                try:
                    if not todo:
                        return final(here, name)
                    dirs.append(here.child(name))
                    continue
                except OSError as exc:
                    link = self._link_at(here, name)
                    if not (link or (create and todo and exc.errno == errno.ENOENT)):
                        raise
                hops += 1
                if hops > _LINK_HOPS:
                    raise PathOutsideRoot("/" + rel, "goes through too many symlinks")
                if not link:
                    _make_dir(here, name)
                    todo.append(name)
                elif not self._descriptors:
                    raise PathOutsideRoot(
                        "/" + rel, "goes through a symlink; this OS cannot follow it safely"
                    )
                else:
                    todo.extend(reversed(self._target(rel, here.readlink(name), dirs)))
        except OSError as exc:
            if isinstance(exc, PathOutsideRoot) or exc.errno is None:
                raise
            raise OSError(exc.errno, exc.strerror, "/" + rel) from None  # never the host path
        finally:
            for directory in dirs:
                directory.close()

    @staticmethod
    def _link_at(here: _Dir, name: str) -> bool:
        try:
            return _is_link(here.lstat(name))
        except OSError:
            return False

    @staticmethod
    def _up(dirs: list[_Dir], rel: str) -> None:
        if len(dirs) == 1:
            raise PathOutsideRoot("/" + rel, "leads outside the root through a symlink")
        dirs.pop().close()

    def _target(self, rel: str, target: str, dirs: list[_Dir]) -> list[str]:
        """Return the components of a symlink's `target`; an absolute one restarts at the root."""
        if not target.startswith("/"):
            return target.split("/")
        for prefix in self._prefixes:
            if target == prefix or target.startswith(prefix + "/"):
                while len(dirs) > 1:
                    dirs.pop().close()
                return target[len(prefix) :].split("/")
        raise PathOutsideRoot("/" + rel, "leads outside the root through a symlink")

    def _kind(self, rel: str) -> _Kind:
        try:
            return self._at(rel, _kind_at)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _children(self, rel: str, limit: int | None, walk: bool) -> list[str]:
        names = []
        for name, kind in self._at(rel, lambda here, last: _entries_at(here, last, limit)):
            if kind == "link":
                try:
                    followed = self._kind(_join(rel, name))
                except OSError:  # leads outside the root, or gone
                    continue
                if followed is None or (walk and followed == "dir"):
                    continue
                kind = followed
            if not (walk and kind == "other"):
                names.append(name + "/" if kind == "dir" else name)
        return names

    def _reader(self, rel: str) -> TextIO:
        fd = self._at(rel, lambda here, name: _open_regular(here, name, os.O_RDONLY, rel))
        return open(fd, encoding="utf-8", newline="\n")

    def _store(self, rel: str, content: str) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        fd = self._at(rel, lambda here, name: _open_regular(here, name, flags, rel), create=True)
        with open(fd, "w", encoding="utf-8", newline="") as f:
            f.write(content)

    def __repr__(self) -> str:
        return f"DirectoryBackend({str(self.root)!r})"


def _make_dir(here: _Dir, name: str) -> None:
    with suppress(FileExistsError):  # made by someone else since; opened on the next try
        here.mkdir(name)
