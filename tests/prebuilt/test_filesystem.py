"""File tools over a root: path confinement, numbered reads, exact edits, glob and grep."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from plait import ChatModelAgent, Message, Runner
from plait.core.context import Frame as Ctx  # plait's own context class
from plait.errors import UsageError
from plait.prebuilt.filesystem import (
    DirectoryBackend,
    FileBackend,
    MemoryBackend,
    PathOutsideRoot,
    filesystem_tools,
)
from plait.testing import ScriptedModel, call, reply
from tests.conftest import kinds


@pytest.fixture(params=["memory", "directory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> FileBackend:
    if request.param == "memory":
        return MemoryBackend()
    root = tmp_path / "root"
    root.mkdir()
    return DirectoryBackend(root)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


async def run(backend: FileBackend, name: str, **args: object) -> str:
    tools = {t.name: t for t in filesystem_tools(backend)}
    result = await tools[name].call(json.dumps(args), Ctx.root("a", []))
    assert isinstance(result, str)
    return result


async def seed(backend: FileBackend, files: dict[str, str]) -> None:
    for path, content in files.items():
        await run(backend, "write_file", file_path=path, content=content)


# --- the tools and their schemas ------------------------------------------------------------


def test_six_tools_with_described_parameters(backend: FileBackend) -> None:
    assert isinstance(backend, FileBackend)
    infos = [t.info() for t in filesystem_tools(backend)]
    assert [i.name for i in infos] == ["ls", "read_file", "write_file", "edit_file", "glob", "grep"]
    for info in infos:
        assert info.description
        assert info.parameters["properties"], info.name
        for pname, prop in info.parameters["properties"].items():
            assert prop.get("description"), f"{info.name}.{pname} has no description"
    required = {i.name: i.parameters.get("required", []) for i in infos}
    assert required["read_file"] == ["file_path"]
    assert required["edit_file"] == ["file_path", "old_string", "new_string"]
    assert required["ls"] == []


# --- reading and writing ----------------------------------------------------------------------


async def test_write_then_read_numbers_lines_like_cat_n(backend: FileBackend) -> None:
    wrote = await run(backend, "write_file", file_path="notes/a.md", content="alpha\nbeta\n")
    assert wrote == "Wrote /notes/a.md (2 lines)"
    assert await run(backend, "read_file", file_path="/notes/a.md") == "     1\talpha\n     2\tbeta"
    assert backend.read("notes/a.md") == "alpha\nbeta\n"


async def test_read_file_offset_and_limit(backend: FileBackend) -> None:
    await seed(backend, {"long.txt": "".join(f"line {n}\n" for n in range(1, 13))})
    window = await run(backend, "read_file", file_path="long.txt", offset=10, limit=2)
    assert window.splitlines() == [
        "    10\tline 10",
        "    11\tline 11",
        "... /long.txt has 12 lines; read on with offset=12",
    ]
    assert await run(backend, "read_file", file_path="long.txt", offset=12) == "    12\tline 12"
    first = await run(backend, "read_file", file_path="long.txt", limit=1)
    assert first.splitlines()[0] == "     1\tline 1"
    with pytest.raises(ValueError, match=r"offset 13 is past the end of /long\.txt"):
        await run(backend, "read_file", file_path="long.txt", offset=13)
    with pytest.raises(ValueError, match="at least 1"):
        await run(backend, "read_file", file_path="long.txt", offset=0)


async def test_reading_an_empty_missing_or_directory_path(backend: FileBackend) -> None:
    await seed(backend, {"empty.txt": "", "dir/f.txt": "x"})
    assert await run(backend, "read_file", file_path="empty.txt") == "/empty.txt is empty"
    with pytest.raises(FileNotFoundError, match=r"no such file: /nope\.txt"):
        await run(backend, "read_file", file_path="nope.txt")
    with pytest.raises(IsADirectoryError, match="/dir is not a file"):
        await run(backend, "read_file", file_path="dir")


async def test_spellings_of_one_path_name_the_same_file(backend: FileBackend) -> None:
    await seed(backend, {"/notes/a.md": "same"})
    for spelling in ["notes/a.md", "./notes//a.md", "notes/x/../a.md", "\\notes\\a.md"]:
        assert backend.read(spelling) == "same", spelling
    assert backend.files("/") == ["/notes/a.md"]


async def test_line_endings_survive_an_edit(backend: FileBackend) -> None:
    await seed(backend, {"w.txt": "one\r\ntwo\r\n"})
    assert await run(backend, "read_file", file_path="w.txt") == "     1\tone\n     2\ttwo"
    await run(backend, "edit_file", file_path="w.txt", old_string="two", new_string="2")
    assert backend.read("w.txt") == "one\r\n2\r\n"


async def test_a_file_and_a_directory_cannot_share_a_path(backend: FileBackend) -> None:
    await seed(backend, {"a": "file", "d/x.txt": "x"})
    with pytest.raises(NotADirectoryError, match="/a is a file"):
        await run(backend, "write_file", file_path="a/b.txt", content="")
    with pytest.raises(IsADirectoryError, match="/d is a directory"):
        await run(backend, "write_file", file_path="d", content="")
    assert backend.files("/") == ["/a", "/d/x.txt"]


async def test_ls_lists_sorted_entries_with_directories_marked(backend: FileBackend) -> None:
    await seed(backend, {"b.txt": "", "a/x.txt": "", "a/y/z.txt": ""})
    assert await run(backend, "ls") == "/a/\n/b.txt"
    assert await run(backend, "ls", path="/a") == "/a/x.txt\n/a/y/"
    with pytest.raises(FileNotFoundError, match="no such directory: /zz"):
        await run(backend, "ls", path="zz")
    with pytest.raises(NotADirectoryError, match=r"/b\.txt is not a directory"):
        await run(backend, "ls", path="b.txt")
    assert (backend.exists("a"), backend.exists("/a/y/z.txt"), backend.exists("a/q")) == (
        True,
        True,
        False,
    )


async def test_ls_of_an_empty_root_says_so(backend: FileBackend) -> None:
    assert await run(backend, "ls") == "/ is empty"


def test_memory_backend_takes_initial_files() -> None:
    backend = MemoryBackend({"/a/b.txt": "x", "c.txt": "y"})
    assert backend.files("/") == ["/a/b.txt", "/c.txt"]
    assert backend.read("a/b.txt") == "x"


# --- confinement to the root ------------------------------------------------------------------

ESCAPES = ["../x", "a/../../x", "/../x", "..", "..\\x", "x\x00y"]


@pytest.mark.parametrize("path", ESCAPES)
async def test_paths_that_escape_the_root_are_refused(
    backend: FileBackend, tmp_path: Path, path: str
) -> None:
    for name, args in [
        ("write_file", {"file_path": path, "content": "pwned"}),
        ("read_file", {"file_path": path}),
        ("edit_file", {"file_path": path, "old_string": "a", "new_string": "b"}),
        ("ls", {"path": path}),
        ("grep", {"pattern": "x", "path": path}),
    ]:
        with pytest.raises(PathOutsideRoot) as info:
            await run(backend, name, **args)
        assert repr(path) in str(info.value), name
        assert info.value.path == path
    assert backend.files("/") == []
    assert not (tmp_path / "x").exists()


async def test_globs_that_escape_the_root_are_refused(backend: FileBackend) -> None:
    with pytest.raises(PathOutsideRoot):
        await run(backend, "glob", pattern="../*")
    with pytest.raises(PathOutsideRoot):
        await run(backend, "grep", pattern="x", glob="../*.py")


async def test_an_os_absolute_path_is_read_from_the_root(backend: FileBackend) -> None:
    with pytest.raises(FileNotFoundError, match="no such file: /etc/passwd"):
        await run(backend, "read_file", file_path="/etc/passwd")
    await seed(backend, {"/etc/passwd": "inside"})
    assert await run(backend, "read_file", file_path="/etc/passwd") == "     1\tinside"


async def test_an_absolute_path_under_the_real_root_is_that_file(
    root: Path, tmp_path: Path
) -> None:
    backend = DirectoryBackend(root)
    wrote = await run(backend, "write_file", file_path=f"{root}/a.txt", content="hi")
    assert wrote == "Wrote /a.txt (1 lines)"
    assert (root / "a.txt").read_text() == "hi"
    assert await run(backend, "ls", path=str(root)) == "/a.txt"
    assert not (root / root.relative_to("/")).exists()
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    through_alias = DirectoryBackend(alias)
    assert through_alias.read(f"{alias}/a.txt") == "hi"
    assert through_alias.read(f"{root}/a.txt") == "hi"
    with pytest.raises(FileNotFoundError, match=re.escape(f"no such file: {alias}/a.txt")):
        backend.read(f"{alias}/a.txt")  # another spelling of the root is just a path under it


async def test_symlinks_leading_outside_the_root_are_refused(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "secret.txt").symlink_to(outside / "secret.txt")
    (root / "real").mkdir()
    (root / "real" / "ok.txt").write_text("s3cret inside")
    (root / "inner").symlink_to(root / "real", target_is_directory=True)
    backend = DirectoryBackend(root)
    for name, args in [
        ("read_file", {"file_path": "link/secret.txt"}),
        ("read_file", {"file_path": "secret.txt"}),
        ("write_file", {"file_path": "link/new.txt", "content": "x"}),
        ("edit_file", {"file_path": "secret.txt", "old_string": "s3", "new_string": "x"}),
        ("ls", {"path": "link"}),
    ]:
        with pytest.raises(PathOutsideRoot, match="symlink"):
            await run(backend, name, **args)
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "s3cret"
    assert await run(backend, "ls") == "/inner/\n/real/"
    assert await run(backend, "grep", pattern="s3cret") == "/real/ok.txt:1:s3cret inside"
    assert await run(backend, "glob", pattern="**") == "/real/ok.txt"
    assert await run(backend, "read_file", file_path="inner/ok.txt") == "     1\ts3cret inside"
    (root / "loop").symlink_to(root / "loop")
    assert await run(backend, "ls") == "/inner/\n/real/"
    with pytest.raises(PathOutsideRoot):
        await run(backend, "read_file", file_path="loop")


async def test_symlinks_inside_the_root_are_followed_and_climbing_out_is_refused(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "s.txt").write_text("s3cret")
    (root / "real").mkdir()
    (root / "real" / "ok.txt").write_text("ok")
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "up").symlink_to("../../real")  # relative, stays inside
    (root / "a" / "b" / "out").symlink_to("../../../outside")  # relative, climbs out
    (root / "abs").symlink_to(root / "real")  # absolute, inside
    (root / "chain").symlink_to("a/b/up")  # a link to a link
    backend = DirectoryBackend(root)
    for path in ["a/b/up/ok.txt", "abs/ok.txt", "chain/ok.txt"]:
        assert await run(backend, "read_file", file_path=path) == "     1\tok", path
    await run(backend, "write_file", file_path="chain/new.txt", content="n")
    assert (root / "real" / "new.txt").read_text() == "n"
    for name, args in [
        ("read_file", {"file_path": "a/b/out/s.txt"}),
        ("write_file", {"file_path": "a/b/out/new.txt", "content": "x"}),
        ("ls", {"path": "a/b/out"}),
        ("glob", {"pattern": "a/b/out/*"}),
        ("grep", {"pattern": "s3cret", "path": "a/b/out"}),
    ]:
        with pytest.raises(PathOutsideRoot, match="outside the root through a symlink") as info:
            await run(backend, name, **args)
        assert str(tmp_path) not in str(info.value), name
    assert sorted(p.name for p in outside.iterdir()) == ["s.txt"]


# Points root/d inside, then outside by its absolute path, then outside by "..", in a loop.
FLIP = """
import itertools, os, sys
root, outside = sys.argv[1:]
for n, target in enumerate(itertools.cycle([outside, "../outside", "in"])):
    os.symlink(target, os.path.join(root, ".next"))
    os.replace(os.path.join(root, ".next"), os.path.join(root, "d"))
    if n == 0:
        print("flipping", flush=True)
"""


@pytest.mark.timeout(120)
async def test_a_symlink_swapped_while_the_tools_run_never_leads_outside(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE secret\n")
    (outside / "outside-only.txt").write_text("OUTSIDE\n")
    (root / "in").mkdir()
    (root / "in" / "secret.txt").write_text("inside secret\n")
    (root / "d").symlink_to("in")
    backend = DirectoryBackend(root)
    flipper = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FLIP, root, outside, stdout=asyncio.subprocess.PIPE
    )
    assert flipper.stdout is not None
    assert await flipper.stdout.readline() == b"flipping\n"
    calls = [
        ("read_file", {"file_path": "d/secret.txt"}),
        ("write_file", {"file_path": "d/pwned.txt", "content": "pwned"}),
        ("edit_file", {"file_path": "d/secret.txt", "old_string": "OUTSIDE", "new_string": "x"}),
        ("ls", {"path": "d"}),
        ("grep", {"pattern": "secret", "path": "d"}),
        ("glob", {"pattern": "d/*"}),
    ]
    tools = {t.name: t for t in filesystem_tools(backend)}
    seen: Counter[str] = Counter()
    leaked: list[tuple[str, str]] = []
    try:
        for name, args in calls * 300:
            try:
                result = await tools[name].call(json.dumps(args), Ctx.root("a", []))
            except PathOutsideRoot:
                seen["refused"] += 1
            except ValueError as error:
                seen[f"{name}: {error}"] += 1
            else:
                seen["done"] += 1
                if "OUTSIDE" in result or "outside-only" in result:
                    leaked.append((name, result))
    finally:
        flipper.kill()
        await flipper.wait()
    assert leaked == []
    assert {key for key in seen if ":" in key} <= {
        "edit_file: old_string was not found in /d/secret.txt"
    }
    assert sorted(p.name for p in outside.iterdir()) == ["outside-only.txt", "secret.txt"]
    assert (outside / "secret.txt").read_text() == "OUTSIDE secret\n"
    assert seen["refused"] and seen["done"]  # the link really was swapped under the tools


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
async def test_a_named_pipe_is_refused_not_opened_to_block(root: Path) -> None:
    os.mkfifo(root / "pipe")
    backend = DirectoryBackend(root)
    returned = threading.Event()
    unblocked: list[bool] = []

    def unblock() -> None:  # if a tool is stuck opening the pipe, open its other end
        if not returned.wait(10):
            unblocked.append(True)
            os.close(os.open(root / "pipe", os.O_RDONLY | os.O_NONBLOCK))

    helper = threading.Thread(target=unblock)
    helper.start()
    try:
        with pytest.raises(ValueError, match="/pipe is not a regular file"):
            await run(backend, "write_file", file_path="pipe", content="x")
        with pytest.raises(ValueError, match="/pipe is not a regular file"):
            await run(backend, "read_file", file_path="pipe")
        assert await run(backend, "grep", pattern="x") == "no matches for 'x'"
    finally:
        returned.set()
        helper.join()
    assert unblocked == []


async def test_without_descriptors_every_symlink_is_refused(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "supports_dir_fd", set())  # as on Windows: no open(dir_fd=...)
    (root / "real").mkdir()
    (root / "real" / "ok.txt").write_text("inside")
    (root / "inner").symlink_to(root / "real", target_is_directory=True)
    backend = DirectoryBackend(root)
    await seed(backend, {"notes/a.md": "hello\n"})
    assert await run(backend, "read_file", file_path="notes/a.md") == "     1\thello"
    assert await run(backend, "ls") == "/notes/\n/real/"
    assert await run(backend, "glob", pattern="**") == "/notes/a.md\n/real/ok.txt"
    for name, args in [
        ("read_file", {"file_path": "inner/ok.txt"}),
        ("write_file", {"file_path": "inner/new.txt", "content": "x"}),
    ]:
        with pytest.raises(PathOutsideRoot, match="symlink"):
            await run(backend, name, **args)
    assert sorted(p.name for p in (root / "real").iterdir()) == ["ok.txt"]


async def test_errors_name_paths_from_the_root_never_the_host_path(
    root: Path, tmp_path: Path
) -> None:
    backend = DirectoryBackend(root)
    long = "n" * 300  # longer than a file name may be
    for name, args in [
        ("read_file", {"file_path": long}),
        ("write_file", {"file_path": f"{long}/a.txt", "content": "x"}),
        ("edit_file", {"file_path": long, "old_string": "a", "new_string": "b"}),
        ("ls", {"path": long}),
        ("grep", {"pattern": "x", "path": long}),
    ]:
        with pytest.raises(OSError, match="name too long") as info:
            await run(backend, name, **args)
        assert str(tmp_path) not in str(info.value), name
        assert f"'/{long}" in str(info.value), name
    shutil.rmtree(root)
    for name, args in [
        ("write_file", {"file_path": "a.txt", "content": "x"}),
        ("ls", {}),
    ]:
        with pytest.raises(OSError, match="root directory") as info:
            await run(backend, name, **args)
        assert str(tmp_path) not in str(info.value), name
    assert os.listdir(tmp_path) == []  # the root was not made again


def test_directory_backend_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a directory"):
        DirectoryBackend(tmp_path / "missing")


# --- edit_file --------------------------------------------------------------------------------


async def test_edit_file_needs_a_unique_match_unless_replace_all(backend: FileBackend) -> None:
    await seed(backend, {"m.py": "x = 1\ny = 1\n"})

    async def edit(old: str, new: str, **options: object) -> str:
        return await run(
            backend, "edit_file", file_path="/m.py", old_string=old, new_string=new, **options
        )

    with pytest.raises(ValueError, match=r"occurs 2 times in /m\.py.*replace_all") as info:
        await edit("= 1", "= 2")
    assert "more surrounding context" in str(info.value)
    assert backend.read("m.py") == "x = 1\ny = 1\n"
    assert await edit("= 1", "= 2", replace_all=True) == "Replaced 2 occurrences in /m.py"
    assert backend.read("m.py") == "x = 2\ny = 2\n"
    assert await edit("x = 2", "x = 3") == "Replaced 1 occurrence in /m.py"
    assert backend.read("m.py") == "x = 3\ny = 2\n"
    with pytest.raises(ValueError, match=r"not found in /m\.py"):
        await edit("z = 0", "z = 1")
    with pytest.raises(ValueError, match="old_string is empty"):
        await edit("", "z")
    with pytest.raises(ValueError, match="the same"):
        await edit("y", "y")
    with pytest.raises(FileNotFoundError, match=r"no such file: /other\.py"):
        await run(backend, "edit_file", file_path="other.py", old_string="a", new_string="b")


async def test_parallel_edits_of_one_file_all_land(backend: FileBackend) -> None:
    await seed(backend, {"f.txt": "".join(f"<{n}>" for n in range(30))})
    tools = {t.name: t for t in filesystem_tools(backend)}
    ctx = Ctx.root("a", [])
    edits = [
        json.dumps({"file_path": "f.txt", "old_string": f"<{n}>", "new_string": f"[{n}]"})
        for n in range(30)
    ]
    await asyncio.gather(*(tools["edit_file"].call(args, ctx) for args in edits))
    assert backend.read("f.txt") == "".join(f"[{n}]" for n in range(30))


# --- glob and grep ----------------------------------------------------------------------------

TREE = {
    "a.py": "import os\n",
    "src/b.py": "def foo():\n    return 1\n",
    "src/pkg/c.py": "FOO = 'foo'\n",
    "src/d.txt": "foo bar\n",
    "docs/e.md": "nothing here\nfood\n",
}


async def test_glob_with_double_star(backend: FileBackend) -> None:
    await seed(backend, TREE)

    async def glob(pattern: str) -> list[str]:
        return (await run(backend, "glob", pattern=pattern)).splitlines()

    assert await glob("**/*.py") == ["/a.py", "/src/b.py", "/src/pkg/c.py"]
    assert await glob("src/**/*.py") == ["/src/b.py", "/src/pkg/c.py"]
    assert await glob("*.py") == ["/a.py"]
    assert await glob("/src/*.py") == ["/src/b.py"]
    assert await glob("src/**") == ["/src/b.py", "/src/d.txt", "/src/pkg/c.py"]
    assert await glob("src/[bd].*") == ["/src/b.py", "/src/d.txt"]
    assert await glob("**/?.md") == ["/docs/e.md"]
    assert await glob("**/*.rs") == ["no files match '**/*.rs'"]


async def test_grep_prints_path_line_number_and_line(backend: FileBackend) -> None:
    await seed(backend, TREE)
    assert (await run(backend, "grep", pattern="foo")).splitlines() == [
        "/docs/e.md:2:food",
        "/src/b.py:1:def foo():",
        "/src/d.txt:1:foo bar",
        "/src/pkg/c.py:1:FOO = 'foo'",
    ]
    assert await run(backend, "grep", pattern=r"^\s+return") == "/src/b.py:2:    return 1"
    assert await run(backend, "grep", pattern="(?i)^foo", path="src/pkg") == (
        "/src/pkg/c.py:1:FOO = 'foo'"
    )
    assert await run(backend, "grep", pattern="zzz") == "no matches for 'zzz'"


async def test_grep_with_a_glob_filter(backend: FileBackend) -> None:
    await seed(backend, TREE)
    by_name = await run(backend, "grep", pattern="foo", glob="*.py")
    assert by_name.splitlines() == ["/src/b.py:1:def foo():", "/src/pkg/c.py:1:FOO = 'foo'"]
    by_path = await run(backend, "grep", pattern="foo", glob="src/*")
    assert by_path.splitlines() == ["/src/b.py:1:def foo():", "/src/d.txt:1:foo bar"]
    in_dir = await run(backend, "grep", pattern="o", path="/docs", glob="*.py")
    assert in_dir == "no matches for 'o'"


async def test_grep_refuses_an_invalid_regex(backend: FileBackend) -> None:
    await seed(backend, TREE)
    with pytest.raises(ValueError, match=r"invalid regular expression 'foo\(': missing \)"):
        await run(backend, "grep", pattern="foo(")


async def test_grep_stops_at_200_matches_and_says_so(backend: FileBackend) -> None:
    await seed(backend, {"many.txt": "".join(f"hit {n}\n" for n in range(250))})
    lines = (await run(backend, "grep", pattern="hit")).splitlines()
    assert len(lines) == 201
    assert lines[0] == "/many.txt:1:hit 0"
    assert lines[199] == "/many.txt:200:hit 199"
    assert lines[200] == "... stopped at 200 matches; narrow the search"


async def test_grep_skips_files_that_are_not_text(root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\xff\xfefoo\n")
    (root / "text.txt").write_text("foo\n")
    backend = DirectoryBackend(root)
    assert await run(backend, "grep", pattern="foo") == "/text.txt:1:foo"
    with pytest.raises(ValueError, match=r"/blob\.bin is not a UTF-8 text file"):
        await run(backend, "read_file", file_path="blob.bin")


# --- bounded work -----------------------------------------------------------------------------


async def test_read_file_cuts_a_huge_line_and_says_so(backend: FileBackend) -> None:
    await seed(backend, {"min.js": "x" * 20_000_000, "long.txt": "x" * 100_000 + "\nsecond\n"})
    huge = await run(backend, "read_file", file_path="min.js")
    assert huge == "     1\t" + "x" * 2_000 + (
        " [line truncated: only its first 2000 characters are shown; grep finds the rest]"
    )
    first = await run(backend, "read_file", file_path="long.txt", limit=1)
    assert first.startswith("     1\t" + "x" * 2_000 + " [line truncated")
    assert first.endswith("]\n... /long.txt has 2 lines; read on with offset=2")
    assert await run(backend, "read_file", file_path="long.txt", offset=2) == "     2\tsecond"


@pytest.mark.timeout(120)
async def test_glob_with_many_double_stars_ends_quickly(backend: FileBackend) -> None:
    await seed(
        backend, {"/".join(f"d{n}" for n in range(depth)) + "/f.txt": "" for depth in range(17)}
    )
    pattern = "/".join(["**"] * 10)
    started = time.monotonic()
    assert await run(backend, "glob", pattern=pattern + "/nothing") == (
        f"no files match '{pattern}/nothing'"
    )
    assert time.monotonic() - started < 5  # matching never backtracks over the segments
    assert len((await run(backend, "glob", pattern=pattern + "/f.txt")).splitlines()) == 17


@pytest.mark.timeout(120)
async def test_grep_with_a_backtracking_pattern_ends_quickly() -> None:
    backend = MemoryBackend({"a.txt": ("a" * 26 + "b\n") * 3 + "aaa\n"})
    started = time.monotonic()
    assert await run(backend, "grep", pattern="(a+)+$") == "/a.txt:4:aaa"
    assert time.monotonic() - started < 5  # RE2 matches in linear time


async def test_grep_tells_the_model_what_re2_cannot_do(backend: FileBackend) -> None:
    await seed(backend, TREE)
    for pattern in [r"(o)\1", "foo(?=d)"]:
        with pytest.raises(ValueError, match="RE2 syntax, which has no backreferences") as info:
            await run(backend, "grep", pattern=pattern)
        assert f"invalid regular expression {pattern!r}" in str(info.value)


async def test_grep_output_is_bounded_and_shows_long_lines_around_the_match(
    backend: FileBackend,
) -> None:
    long_line = "x" * 40_000 + "needle" + "x" * 40_000
    await seed(backend, {"a.txt": "".join(f"needle {n} {'y' * 3_000}\n" for n in range(100))})
    await seed(backend, {"b.txt": long_line + "\n"})
    lines = (await run(backend, "grep", pattern="needle", path="b.txt")).splitlines()
    assert len(lines) == 1 and len(lines[0]) < 2_200
    assert (
        "needle" in lines[0]
        and "[line truncated: characters 39501-41500 of 80006 shown]" in lines[0]
    )
    out = await run(backend, "grep", pattern="needle")
    assert len(out) <= 100_000
    assert out.endswith("... stopped at 100000 characters; narrow the search")


# --- inside an agent --------------------------------------------------------------------------


def test_an_agent_writes_reads_and_is_told_about_an_escape(backend: FileBackend) -> None:
    model = ScriptedModel(
        [
            call("write_file", {"file_path": "/todo.md", "content": "buy milk\n"}, id="w"),
            call("read_file", {"file_path": "todo.md"}, id="r"),
            call("read_file", {"file_path": "../etc/passwd"}, id="bad"),
            reply("done"),
        ]
    )
    agent = ChatModelAgent("A", model, tools=filesystem_tools(backend))
    result = Runner(agent).query_sync("note that I need milk")
    assert kinds(result.events) == [
        *["assistant", "tool:write_file"],
        *["assistant", "tool:read_file"],
        *["assistant", "tool:read_file"],
        "assistant",
    ]
    tool_messages = [e.message.message for e in result.events[1:6:2]]  # type: ignore[union-attr]
    assert tool_messages[0] == Message.tool("Wrote /todo.md (1 lines)", "w", name="write_file")
    assert tool_messages[1] == Message.tool("     1\tbuy milk", "r", name="read_file")
    assert tool_messages[2] is not None
    assert tool_messages[2].content == (
        "Error: tool 'read_file' raised PathOutsideRoot: path '../etc/passwd' is outside the root"
    )
    assert result.final_output == "done"
    assert backend.read("todo.md") == "buy milk\n"
