"""`plait run` on a real terminal (a pseudo-terminal): an interrupt is answered by typing.

The command runs as `python -m plait` in a child process whose stdin is a terminal, so it
asks for the answer, resumes and goes on; nothing here is simulated in-process.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.support import ROOT, plait_env, sqlite_url, target

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    """Return a function that starts `python -m plait ARGS` on a terminal (killed after)."""
    children: list[Any] = []

    def start(*args: str) -> Any:
        argv = ["-m", "plait", *args, "--store", sqlite_url(tmp_path / "plait.db")]
        child = pexpect.spawn(
            sys.executable,
            argv,
            cwd=str(ROOT),
            env=plait_env(TERM="dumb"),  # no colours: the text is matched as printed
            encoding="utf-8",
            timeout=60,  # what the command shows is waited for; only a hang takes this long
            dimensions=(40, 200),
        )
        children.append(child)
        return child

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)
        child.close(force=True)


def _finish(child: Any) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus)


def test_an_interrupt_is_answered_on_the_terminal_and_the_run_completes(spawn: Any) -> None:
    child = spawn("run", target("helper"), "approve the refund")
    child.expect_exact("→ approve")
    child.expect_exact('? {"question": "approve the refund?"}')
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendline("yes please")
    child.expect_exact("done: the refund=yes please")
    child.expect_exact("completed · usage: 11 input + 4 output tokens")
    assert _finish(child) == 0


def test_a_json_answer_is_passed_as_json(spawn: Any) -> None:
    child = spawn("run", target("helper"), "approve it")
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendline('{"approved": true, "by": "ana"}')
    child.expect_exact("done: it={'approved': True, 'by': 'ana'}")
    assert _finish(child) == 0


def test_two_interrupts_are_asked_in_turn(spawn: Any) -> None:
    child = spawn("run", target("helper"), "two approvals")
    child.expect_exact('? {"question": "approve a?"}')
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendline("1")
    child.expect_exact('? {"question": "approve b?"}')
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendline("2")
    child.expect_exact("done: a=1 | b=2")
    assert _finish(child) == 0


def test_a_chat_answers_interrupts_and_ends_at_exit(spawn: Any) -> None:
    child = spawn("run", target("helper"), "--session", "terminal-chat")
    child.expect_exact("session terminal-chat")
    child.expect_exact("> ")
    child.sendline("hello")
    child.expect_exact("echo: hello")
    child.expect_exact("> ")
    child.sendline("approve the plan")
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendline("ok")
    child.expect_exact("done: the plan=ok")
    child.expect_exact("> ")
    child.sendline("exit")
    assert _finish(child) == 0


def test_end_of_input_at_the_question_leaves_the_run_paused(spawn: Any) -> None:
    child = spawn("run", target("helper"), "approve later")
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendeof()
    child.expect(r"paused: checkpoint (\w+)")
    checkpoint = child.match.group(1)
    child.expect_exact(f"plait resume {checkpoint}")
    assert _finish(child) == 3


def test_ctrl_c_stops_the_command_with_exit_code_130(spawn: Any) -> None:
    child = spawn("run", target("helper"), "slow")
    child.expect_exact("→ slow")  # the slow tool is called: the run is in flight
    child.sendintr()
    child.expect_exact("plait: stopped")
    assert _finish(child) == 130


def test_with_json_the_question_is_asked_too_and_the_last_line_is_the_summary(
    spawn: Any,
) -> None:
    child = spawn("run", target("helper"), "approve it", "--json")
    child.expect_exact('? {"question": "approve it?"}')
    child.expect_exact("answer (JSON, or plain text)> ")
    child.sendline("7")
    child.expect(r'\{"status": "completed", "checkpoint_id": null, "final_output": "done: it=7"')
    assert _finish(child) == 0
