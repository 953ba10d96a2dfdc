"""FileLimits: each file tool bounds what it reads, walks and returns, and says when it stops."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait.core.context import Frame as Ctx  # plait's own context class
from plait.errors import UsageError
from plait.prebuilt.filesystem import (
    DirectoryBackend,
    FileBackend,
    FileLimits,
    MemoryBackend,
    filesystem_tools,
)


@pytest.fixture(params=["memory", "directory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> FileBackend:
    if request.param == "memory":
        return MemoryBackend()
    root = tmp_path / "root"
    root.mkdir()
    return DirectoryBackend(root)


async def run(backend: FileBackend, limits: FileLimits, name: str, **args: object) -> str:
    tools = {t.name: t for t in filesystem_tools(backend, limits)}
    result = await tools[name].call(json.dumps(args), Ctx.root("a", []))
    assert isinstance(result, str)
    return result


async def seed(backend: FileBackend, files: dict[str, str]) -> None:
    for path, content in files.items():
        await run(backend, FileLimits(), "write_file", file_path=path, content=content)


def test_every_limit_must_be_at_least_one() -> None:
    assert FileLimits().max_matches == 200
    for name in ["max_output_chars", "max_read_chars", "max_depth"]:
        with pytest.raises(UsageError, match=f"FileLimits.{name} must be a whole number"):
            FileLimits(**{name: 0})


def test_the_tool_descriptions_state_the_limits() -> None:
    limits = FileLimits(max_output_chars=1234, max_line_chars=56, max_paths=78, max_matches=9)
    described = {t.name: t.description for t in filesystem_tools(MemoryBackend(), limits)}
    assert "at most 1234 characters" in described["read_file"]
    assert "longer than 56 characters is cut" in described["read_file"]
    assert "at most 78" in described["glob"] and "at most 78" in described["ls"]
    assert "at most 9 matches" in described["grep"] and "RE2" in described["grep"]


# --- read_file and edit_file ------------------------------------------------------------------

LINES = "".join(f"{n:03} {'y' * 96}\n" for n in range(1, 51))  # 50 lines of 100 characters


async def test_read_file_pages_when_the_output_is_full(backend: FileBackend) -> None:
    await seed(backend, {"f.txt": LINES})
    limits = FileLimits(max_output_chars=1_000)  # room for 9 numbered lines
    page = (await run(backend, limits, "read_file", file_path="f.txt")).splitlines()
    assert [line[:10] for line in page[:9]] == [f"{n:6}\t{n:03}" for n in range(1, 10)]
    assert page[9:] == ["... /f.txt has 50 lines; read on with offset=10"]
    following = await run(backend, limits, "read_file", file_path="f.txt", offset=10)
    assert following.startswith("    10\t010 ")
    assert following.endswith("... /f.txt has 50 lines; read on with offset=19")


async def test_read_file_reads_at_most_max_read_chars(backend: FileBackend) -> None:
    await seed(backend, {"f.txt": LINES})
    limits = FileLimits(max_read_chars=1_000)
    page = (await run(backend, limits, "read_file", file_path="f.txt", limit=2)).splitlines()
    assert page[2:] == ["... /f.txt has more than 10 lines; read on with offset=3"]
    with pytest.raises(ValueError, match=r"cannot reach line 30 of /f\.txt: .* grep instead"):
        await run(backend, limits, "read_file", file_path="f.txt", offset=30)


async def test_edit_file_refuses_a_file_over_max_read_chars(backend: FileBackend) -> None:
    await seed(backend, {"big.txt": "x" * 150, "small.txt": "x" * 50})
    limits = FileLimits(max_read_chars=100)
    with pytest.raises(ValueError, match=r"/big\.txt is longer than 100 characters"):
        await run(backend, limits, "edit_file", file_path="big.txt", old_string="x", new_string="y")
    assert backend.read("big.txt") == "x" * 150
    args = {"file_path": "small.txt", "old_string": "x", "new_string": "y", "replace_all": True}
    assert (
        await run(backend, limits, "edit_file", **args) == "Replaced 50 occurrences in /small.txt"
    )


# --- ls and glob ------------------------------------------------------------------------------


async def test_ls_shows_at_most_max_paths(backend: FileBackend) -> None:
    await seed(backend, {f"{n}.txt": "" for n in range(5)})
    listing = await run(backend, FileLimits(max_paths=3), "ls")
    assert listing.splitlines() == [
        "/0.txt",
        "/1.txt",
        "/2.txt",
        "... showing 3 of 5 entries; use glob to narrow them",
    ]


async def test_glob_stops_at_max_paths_and_max_entries(backend: FileBackend) -> None:
    await seed(backend, {f"src/{n}.py": "" for n in range(10)})
    paths = await run(backend, FileLimits(max_paths=4), "glob", pattern="**/*.py")
    assert paths.splitlines()[4:] == ["... more files match; showing the first 4"]
    assert len(paths.splitlines()) == 5
    walked = (await run(backend, FileLimits(max_entries=5), "glob", pattern="**")).splitlines()
    assert len(walked) == 5  # "src/" and 4 of the files in it, in the order the OS lists them
    assert all(path.startswith("/src/") for path in walked[:4])
    assert walked[4] == "... stopped after visiting 5 directory entries"


async def test_glob_descends_at_most_max_depth_levels(backend: FileBackend) -> None:
    await seed(backend, {"a/f.txt": "", "a/b/f.txt": "", "a/b/c/f.txt": "", "a/b/c/d/f.txt": ""})
    found = await run(backend, FileLimits(max_depth=3), "glob", pattern="**/f.txt")
    assert found.splitlines() == [
        "/a/b/c/f.txt",
        "/a/b/f.txt",
        "/a/f.txt",
        "... left out directories over 3 levels deep",
    ]
    below = await run(backend, FileLimits(max_depth=1), "glob", pattern="a/b/**/f.txt")
    assert below.splitlines() == [
        "/a/b/c/f.txt",
        "/a/b/f.txt",
        "... left out directories over 1 levels deep",
    ]


# --- grep -------------------------------------------------------------------------------------


async def test_grep_stops_at_max_matches_and_max_files(backend: FileBackend) -> None:
    await seed(backend, {f"{n}.txt": "hit\nhit\n" for n in range(5)})
    matches = await run(backend, FileLimits(max_matches=3), "grep", pattern="hit")
    assert matches.splitlines() == [
        "/0.txt:1:hit",
        "/0.txt:2:hit",
        "/1.txt:1:hit",
        "... stopped at 3 matches; narrow the search",
    ]
    files = await run(backend, FileLimits(max_files=2), "grep", pattern="hit")
    assert files.splitlines()[4:] == ["... stopped after searching 2 files; narrow the search"]
    assert len(files.splitlines()) == 5


async def test_grep_reads_at_most_max_read_chars_in_all(backend: FileBackend) -> None:
    await seed(backend, {f"{n}.txt": "hit " + "y" * 25 + "\n" for n in range(5)})  # 30 each
    found = await run(backend, FileLimits(max_read_chars=70), "grep", pattern="hit")
    assert found.splitlines() == [
        "/0.txt:1:hit " + "y" * 25,
        "/1.txt:1:hit " + "y" * 25,
        "/2.txt:1:hit " + "y" * 6,
        "... stopped after reading 70 characters; narrow the search",
    ]


async def test_grep_cuts_long_lines_around_the_match(backend: FileBackend) -> None:
    await seed(backend, {"a.txt": "x" * 100 + "needle" + "x" * 100 + "\n"})
    found = await run(backend, FileLimits(max_line_chars=20), "grep", pattern="needle")
    assert found == "/a.txt:1:xxxxxneedlexxxxxxxxx [line truncated: characters 96-115 of 206 shown]"


async def test_grep_walks_at_most_max_entries(backend: FileBackend) -> None:
    await seed(backend, {f"{n}.txt": "hit\n" for n in range(8)})
    found = (await run(backend, FileLimits(max_entries=3), "grep", pattern="hit")).splitlines()
    assert len(found) == 4 and all(line.endswith(".txt:1:hit") for line in found[:3])
    assert found[3] == "... stopped after visiting 3 directory entries"
