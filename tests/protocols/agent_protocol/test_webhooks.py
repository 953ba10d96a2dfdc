"""Webhooks through the official langgraph-sdk client: a run's record POSTed, signed, to
a real local receiver when the run ends; retried; never holding the run up; targets
checked."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from langgraph_sdk.errors import APIStatusError

from plait.errors import UsageError
from plait.server import create_app
from tests.protocols.agent_protocol.receiver import Receiver, receiving
from tests.protocols.agent_protocol.support import Served, make_agents, serve
from tests.server.support import WAIT

SECRET = "webhook-secret"
HI = {"messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
async def hooked(tmp_path: Path) -> AsyncIterator[tuple[Served, Receiver]]:
    """A server that signs webhooks and allows the loopback receiver it is given."""
    with receiving() as receiver:
        async with serve(tmp_path, webhook_secret=SECRET, webhook_allow=["127.0.0.1"]) as found:
            yield found, receiver


async def test_a_run_end_is_posted_to_its_webhook_signed(
    hooked: tuple[Served, Receiver],
) -> None:
    served, receiver = hooked
    thread = await served.ann.threads.create()
    run = await served.ann.runs.create(thread["thread_id"], "echo", input=HI, webhook=receiver.url)
    [got] = await asyncio.to_thread(receiver.wait_for, 1)
    assert got.json["run_id"] == run["run_id"]
    assert got.json["thread_id"] == thread["thread_id"]
    assert got.json["status"] == "success"
    digest = hmac.new(SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    assert got.headers["x-plait-signature"] == f"sha256={digest}"
    assert (await served.ann.runs.get(thread["thread_id"], run["run_id"]))["status"] == "success"


async def test_a_failed_delivery_is_tried_again(hooked: tuple[Served, Receiver]) -> None:
    served, receiver = hooked
    receiver.fail = 1
    thread = await served.ann.threads.create()
    await served.ann.runs.wait(thread["thread_id"], "echo", input=HI, webhook=receiver.url)
    first, second = await asyncio.to_thread(receiver.wait_for, 2)
    assert first.body == second.body
    assert second.json["status"] == "success"


async def test_a_slow_receiver_does_not_hold_the_run_up(hooked: tuple[Served, Receiver]) -> None:
    served, receiver = hooked
    receiver.hold = True
    thread = await served.ann.threads.create()
    waiting = served.ann.runs.wait(thread["thread_id"], "echo", input=HI, webhook=receiver.url)
    values = await asyncio.wait_for(waiting, WAIT)  # the receiver holds on longer than that
    assert values["messages"][-1]["content"] == "echo: hi"
    await asyncio.to_thread(receiver.wait_for, 1)
    assert (await served.ann.threads.get(thread["thread_id"]))["status"] == "idle"
    receiver.release.set()


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com/hook",  # not https
        "https://127.0.0.1/hook",  # loopback
        "https://10.1.2.3/hook",  # private
        "https://169.254.169.254/latest",  # link-local
        "https://100.64.0.1/hook",  # shared (carrier NAT)
        "https://[::ffff:127.0.0.1]/hook",  # loopback, mapped
        "https://[::1]/hook",  # loopback
        "https://localhost/hook",  # resolves to loopback
        "not a url",
    ],
)
async def test_a_webhook_plait_must_not_send_to_is_refused(served: Served, url: str) -> None:
    thread = await served.ann.threads.create()
    with pytest.raises(APIStatusError) as refused:
        await served.ann.runs.create(thread["thread_id"], "echo", input=HI, webhook=url)
    assert refused.value.response.status_code == 422
    assert await served.ann.runs.list(thread["thread_id"]) == []


async def test_an_allowed_host_may_be_plain_http_and_loopback(tmp_path: Path) -> None:
    with receiving() as receiver:
        async with serve(tmp_path, webhook_allow=["127.0.0.1"]) as served:
            thread = await served.ann.threads.create()
            await served.ann.runs.wait(thread["thread_id"], "echo", input=HI, webhook=receiver.url)
            [got] = await asyncio.to_thread(receiver.wait_for, 1)
    assert "x-plait-signature" not in got.headers  # no secret, no signature


def test_a_webhook_secret_must_be_a_non_empty_string() -> None:
    with pytest.raises(UsageError, match="webhook_secret"):
        create_app(make_agents(), webhook_secret="")
