"""`plait serve --a2a`: every served agent over A2A at `/a2a/{agent}`, behind the API keys."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.cli.support import ServeProcess, sqlite_url, target

pytest.importorskip("uvicorn")
pytest.importorskip("a2a")

pytestmark = pytest.mark.timeout(120)

CARD = "/.well-known/agent-card.json"


def _send(text: str) -> dict[str, object]:
    message = {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": "m1"}
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


def test_serve_a2a_mounts_every_agent_behind_the_keys(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("key-ana ana\n")
    args = [target("helper"), target("desk"), "--a2a", "--api-keys", str(keys)]
    store = ("--store", sqlite_url(tmp_path / "plait.db"))
    key = {"authorization": "Bearer key-ana"}
    with (
        ServeProcess([*args, *store], tmp_path / "logs") as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        assert http.get("/a2a/helper" + CARD).status_code == 401
        for name in ("helper", "desk"):
            card = http.get(f"/a2a/{name}" + CARD, headers=key).json()
            assert (card["name"], card["url"]) == (name, f"{server.url}/a2a/{name}/")
        task = http.post("/a2a/helper", json=_send("hello there"), headers=key).json()["result"]
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0]["text"] == "echo: hello there"
    with (
        ServeProcess([target("helper"), *store], tmp_path / "logs") as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        assert http.get("/a2a/helper" + CARD).status_code == 404  # not without --a2a
