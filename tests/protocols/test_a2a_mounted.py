"""A2A on plait's server (`create_app(..., a2a=True)`): every agent at `/a2a/{agent}`, behind
the server's Host guard, body limit and API keys, each user with their own tasks; and the
same guard and limit on the standalone `plait.protocols.a2a.app`."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_text_parts
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

from plait import ChatModelAgent, Runner
from plait.errors import UsageError
from plait.protocols import a2a
from plait.server import create_app
from plait.stores import MemoryStore
from plait.testing import FunctionModel, reply
from tests.protocols.a2a_support import WAIT
from tests.server.support import ServerThread

KEYS = {"key-ana": "ana", "key-bo": "bo"}
ANA = {"authorization": "Bearer key-ana"}
BO = {"authorization": "Bearer key-bo"}
CARD = "/.well-known/agent-card.json"


def echo() -> ChatModelAgent:
    def answer(messages: list[Any], tools: Any) -> Any:
        heard = [m.content for m in messages if m.role == "user"]
        return reply("heard: " + " / ".join(heard))

    return ChatModelAgent("echo", FunctionModel(answer), description="Echoes.")


@pytest.fixture
def serve() -> Iterator[Any]:
    """Return a function that serves an app until the test ends; it returns the URL."""
    with contextlib.ExitStack() as stack:
        yield lambda app: stack.enter_context(ServerThread(app)).url


def send(text: str, **ids: str) -> dict[str, Any]:
    message = {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": text}
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": message | ids},
    }


def get(task_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}}


async def test_the_sdk_client_calls_a_mounted_agent(serve: Any) -> None:
    url = serve(create_app([echo()], store=MemoryStore(), a2a=True)) + "/a2a/echo"
    async with httpx.AsyncClient(timeout=WAIT) as http:
        client = await create_client(url, client_config=ClientConfig(httpx_client=http))
        message = Message(role=Role.ROLE_USER, message_id=f"m{time.monotonic_ns()}")
        message.parts.append(Part(text="hello"))
        responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
    states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    [update] = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    assert get_text_parts(update.artifact.parts) == ["heard: hello"]


def test_the_card_names_the_agents_endpoint_for_1_0_and_0_3(serve: Any) -> None:
    base = serve(create_app([echo()], store=MemoryStore(), a2a=True))
    card = httpx.get(base + "/a2a/echo" + CARD, timeout=WAIT).json()
    endpoint = base + "/a2a/echo/"
    assert card["url"] == endpoint and card["protocolVersion"] == "0.3"
    assert {(i["url"], i["protocolVersion"]) for i in card["supportedInterfaces"]} == {
        (endpoint, "1.0"),
        (endpoint, "0.3"),
    }
    assert "securitySchemes" not in card  # no keys: nothing to present
    assert httpx.get(base + "/a2a/nobody" + CARD, timeout=WAIT).status_code == 404
    unmounted = serve(create_app([echo()], store=MemoryStore()))  # a2a is off by default
    assert httpx.get(unmounted + "/a2a/echo" + CARD, timeout=WAIT).status_code == 404


def test_the_card_names_the_agent_by_its_public_name_quoted_in_the_endpoint(serve: Any) -> None:
    base = serve(create_app({"my echo": echo()}, store=MemoryStore(), a2a=True))
    card = httpx.get(base + "/a2a/my%20echo" + CARD, timeout=WAIT).json()
    assert (card["name"], card["url"]) == ("my echo", base + "/a2a/my%20echo/")
    task = httpx.post(card["url"], json=send("hi"), timeout=WAIT).json()["result"]
    assert task["artifacts"][0]["parts"][0]["text"] == "heard: hi"


def test_keys_are_required_and_each_user_has_their_own_tasks(serve: Any) -> None:
    base = serve(create_app([echo()], store=MemoryStore(), api_keys=KEYS, a2a=True))
    with httpx.Client(base_url=base + "/a2a/echo", timeout=WAIT) as http:
        assert http.get(CARD).status_code == 401
        assert http.post("/", json=send("hi")).status_code == 401
        assert (
            http.post("/", json=send("hi"), headers={"authorization": "Bearer no"}).status_code
            == 401
        )
        card = http.get(CARD, headers=ANA).json()
        assert card["securitySchemes"]["bearer"]["scheme"] == "bearer"
        task = http.post("/", json=send("first"), headers=ANA).json()["result"]
        assert task["status"]["state"] == "completed"
        assert (
            http.post("/", json=get(task["id"]), headers=ANA).json()["result"]["id"] == task["id"]
        )
        assert http.post("/", json=get(task["id"]), headers=BO).json()["error"]["code"] == -32001
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        assert "error" in http.post("/", json=send("into ana's task", **ids), headers=BO).json()
        # the context is the session: ana's second task goes on with it, bo's does not see it
        context = {"contextId": task["contextId"]}
        again = http.post("/", json=send("second", **context), headers=ANA).json()["result"]
        other = http.post("/", json=send("other", **context), headers=BO).json()["result"]
    assert again["artifacts"][0]["parts"][0]["text"] == "heard: first / second"
    assert other["artifacts"][0]["parts"][0]["text"] == "heard: other"
    with httpx.Client(base_url=base, timeout=WAIT) as http:
        sessions = [s["session_id"] for s in http.get("/v1/sessions", headers=ANA).json()]
        assert task["contextId"] in sessions


async def test_a_remote_agent_calls_a_mounted_agent_with_a_key(serve: Any) -> None:
    base = serve(create_app([echo()], store=MemoryStore(), api_keys=KEYS, a2a=True))
    remote = a2a.RemoteAgent(base + "/a2a/echo", headers=ANA)
    assert (remote.name, remote.description) == ("echo", "Echoes.")
    result = await Runner(remote).query("over A2A").collect()
    assert result.error is None, result.error
    assert result.final_output == "heard: over A2A"


def test_a_hostile_host_is_refused_mounted_and_standalone(serve: Any) -> None:
    mounted = serve(create_app([echo()], store=MemoryStore(), a2a=True)) + "/a2a/echo"
    alone = serve(a2a.app(echo()))
    public = serve(a2a.app(echo(), url="https://agents.example/echo/"))
    for url in (mounted, alone, public):
        for headers in ({"host": "evil.example"}, {"origin": "http://evil.example"}):
            card = httpx.get(url + CARD, headers=headers, timeout=WAIT)
            assert card.status_code == 403, url
            rpc = httpx.post(url + "/", json=send("hi"), headers=headers, timeout=WAIT)
            assert rpc.status_code == 403, url
        assert httpx.get(url + CARD, timeout=WAIT).status_code == 200
    # the host of the public URL the card names is answered
    named = httpx.get(public + CARD, headers={"host": "agents.example"}, timeout=WAIT)
    assert named.status_code == 200
    anywhere = serve(a2a.app(echo(), allowed_hosts=["*"]))
    assert (
        httpx.get(anywhere + CARD, headers={"host": "evil.example"}, timeout=WAIT).status_code
        == 200
    )


def test_an_oversized_body_is_refused_mounted_and_standalone(serve: Any) -> None:
    mounted = serve(create_app([echo()], store=MemoryStore(), max_request_bytes=2048, a2a=True))
    small = serve(a2a.app(echo(), max_request_bytes=2048))
    default = serve(a2a.app(echo()))
    for url, size in ((mounted + "/a2a/echo", 4096), (small, 4096), (default, 2_000_000)):
        answer = httpx.post(url + "/", json=send("x" * size), timeout=WAIT)
        assert answer.status_code == 413, url
        assert "over the limit" in answer.json()["error"]["message"]
        assert httpx.post(url + "/", json=send("fits"), timeout=WAIT).status_code == 200


def test_bad_arguments_of_the_standalone_app_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="max_request_bytes"):
        a2a.app(echo(), max_request_bytes=0)
    with pytest.raises(UsageError, match="allowed_hosts"):
        a2a.app(echo(), allowed_hosts="agents.example")  # type: ignore[arg-type]
