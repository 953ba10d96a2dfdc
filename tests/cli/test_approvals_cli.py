"""`plait run` on a terminal answers a tool's approval with y or n, bound to its fingerprint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from plait.cli.run import parse_answer
from tests.cli.support import ROOT, plait_env, sqlite_url

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.timeout(90)

PAYER = f"{ROOT / 'tests' / 'cli' / 'payer.py'}:payer"


def test_y_and_n_answer_an_approval_with_its_fingerprint() -> None:
    asked = {"tool": "pay", "fingerprint": "f00"}
    assert parse_answer("y", asked) == {"approved": True, "fingerprint": "f00"}
    assert parse_answer("No", asked) == {"approved": False, "fingerprint": "f00"}
    assert parse_answer('{"approved": true}', asked) == {"approved": True}
    assert parse_answer("y") == "y"  # to any other question, y is text


@pytest.mark.parametrize(("typed", "result"), [("y", "paid 250"), ("n", "rejected by local")])
def test_an_approval_is_answered_on_the_terminal(tmp_path: Path, typed: str, result: str) -> None:
    argv = ["-m", "plait", "run", PAYER, "pay", "--store", sqlite_url(tmp_path / "plait.db")]
    child = pexpect.spawn(
        sys.executable,
        argv,
        cwd=str(ROOT),
        env=plait_env(TERM="dumb"),
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 200),
    )
    try:
        child.expect_exact("answer (y to approve, n to reject, or JSON)> ")
        child.sendline(typed)
        child.expect_exact(f"result: {result}")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
