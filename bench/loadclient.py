"""The clients `bench/server.py` loads servers with: one keep-alive connection each.

- `LightClient`: a minimal HTTP/1.1 client on asyncio streams (POST a JSON body, read the
  answer line by line as it arrives, chunked or not). It costs the benchmark's process a
  small fraction of what a server spends on a run, so the servers' figures are theirs.
- `HttpxClient`: the same through `httpx.AsyncClient` (one per connection: one client whose
  pool holds 200 connections looks at every connection for every request, which costs
  more than the runs). httpx spends about as much CPU on a run as plait's server does, so
  on a small machine it caps the runs/s it can measure.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx


class Client(Protocol):
    """One connection to the server under load."""

    def lines(self, path: str, body: Any) -> AsyncIterator[str]:
        """POST `body` as JSON to `path`; yield the answer's lines as they arrive."""
        ...

    async def post_json(self, path: str, body: Any) -> Any:
        """POST `body` as JSON to `path`; return the decoded answer."""
        ...

    async def aclose(self) -> None:
        """Close the connection."""
        ...


class HttpError(RuntimeError):
    """The server answered with a status other than 200."""


class LightClient:
    """A minimal HTTP/1.1 keep-alive client (see the module's docstring)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _send(self, path: str, body: Any) -> asyncio.StreamReader:
        """Send the request (on a new connection if the last one was closed)."""
        data = json.dumps(body).encode()
        head = (
            b"POST %b HTTP/1.1\r\nhost: %b:%d\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n"
            % (path.encode(), self.host.encode(), self.port, len(data))
        )
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        self._writer.write(head + data)
        return self._reader

    async def lines(self, path: str, body: Any) -> AsyncIterator[str]:
        """POST `body` as JSON to `path`; yield the answer's lines as they arrive."""
        reader = await self._send(path, body)
        status = await reader.readline()
        if not status:  # the server closed the idle connection: once more on a new one
            await self.aclose()
            reader = await self._send(path, body)
            status = await reader.readline()
        headers = await _headers(reader)
        if headers.get("connection") == "close":
            self._writer = None  # read this answer, then connect again
        if int(status.split()[1]) != 200:
            text = await _read_all(reader, headers)
            raise HttpError(f"{path}: {status.decode().strip()} {text[:500]}")
        if "content-length" in headers:
            for line in (await _read_all(reader, headers)).splitlines():
                yield line
            return
        async for line in _chunked_lines(reader):
            yield line

    async def post_json(self, path: str, body: Any) -> Any:
        """POST `body` as JSON to `path`; return the decoded answer."""
        return json.loads("\n".join([line async for line in self.lines(path, body)]))

    async def aclose(self) -> None:
        """Close the connection."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    return headers


async def _read_all(reader: asyncio.StreamReader, headers: dict[str, str]) -> str:
    if "content-length" in headers:
        return (await reader.readexactly(int(headers["content-length"]))).decode()
    return "\n".join([line async for line in _chunked_lines(reader)])


async def _chunked_lines(reader: asyncio.StreamReader) -> AsyncIterator[str]:
    """Yield the lines of a chunked body as its chunks arrive."""
    rest = b""
    while size := int((await reader.readline()).split(b";")[0], 16):
        chunk = rest + (await reader.readexactly(size + 2))[:-2]
        *complete, rest = chunk.split(b"\n")
        for line in complete:
            yield line.rstrip(b"\r").decode()
    await reader.readline()  # the empty line after the last chunk
    if rest:
        yield rest.rstrip(b"\r").decode()


class HttpxClient:
    """The same over `httpx.AsyncClient`, one connection per client."""

    def __init__(self, url: str) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self._http = httpx.AsyncClient(base_url=url, limits=limits, timeout=120, verify=False)

    async def lines(self, path: str, body: Any) -> AsyncIterator[str]:
        """POST `body` as JSON to `path`; yield the answer's lines as they arrive."""
        async with self._http.stream("POST", path, json=body) as response:
            if response.status_code != 200:
                await response.aread()
                raise HttpError(f"{path}: {response.status_code} {response.text[:500]}")
            async for line in response.aiter_lines():
                yield line

    async def post_json(self, path: str, body: Any) -> Any:
        """POST `body` as JSON to `path`; return the decoded answer."""
        answer = await self._http.post(path, json=body)
        answer.raise_for_status()
        return answer.json()

    async def aclose(self) -> None:
        """Close the connection."""
        await self._http.aclose()


def open_clients(kind: str, host: str, port: int, n: int) -> list[Client]:
    """Return `n` clients of kind "light" or "httpx", one connection each."""
    if kind == "httpx":
        return [HttpxClient(f"http://{host}:{port}") for _ in range(n)]
    return [LightClient(host, port) for _ in range(n)]
