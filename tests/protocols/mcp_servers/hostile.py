"""A misbehaving MCP server for the tests, speaking JSON-RPC on stdio by hand (the SDK's
server refuses to send what this one sends): `python hostile.py MODE`.

Modes: `many` lists 1,001 tools; `bad-schema` lists a tool whose input schema is not an
object schema; `bad-properties` one whose `properties` is not an object; `silent` never
answers the handshake; `silent-parent PIDFILE` never answers either, starts a child process
that outlives it, writes "<own pid> <child pid>" to PIDFILE and exits when its stdin closes
(as `npx` leaves the server it started).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "many"


def _tools() -> list[dict[str, Any]]:
    if MODE == "many":
        return [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(1001)]
    broken: dict[str, Any] = {"type": "string"}
    if MODE == "bad-properties":
        broken = {"type": "object", "properties": ["a", "b"]}
    return [
        {"name": "good", "inputSchema": {"type": "object"}},
        {"name": "broken", "inputSchema": broken},
    ]


def _answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method = request.get("method")
    if "id" not in request:
        return None  # a notification
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": _tools()}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def _parent() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(60)"])
    with open(sys.argv[2], "w") as pids:
        pids.write(f"{os.getpid()} {child.pid}")
    sys.stdin.read()  # until stdin closes; the child is left running


def main() -> None:
    if MODE == "silent-parent":
        _parent()
        return
    if MODE == "silent":
        while sys.stdin.readline():
            time.sleep(0)  # reads and never answers
        return
    for line in sys.stdin:
        answer = _answer(json.loads(line))
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
