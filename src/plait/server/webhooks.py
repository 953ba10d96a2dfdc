"""Webhooks: when a run ends, its record is POSTed to the URL its starter named.

Each body is signed when the app has a secret (`create_app(webhook_secret=...)`):
`x-plait-signature: sha256=<hex HMAC-SHA256 of the body>`. A delivery that fails (no
answer, or a status other than 2xx) is tried again after a backoff that doubles, up to
`ATTEMPTS` tries in all; deliveries run beside the runs and never hold one up. The app
owns them: they are cancelled when it stops.

Targets are checked when a run names one and again before each delivery: the URL must be
`https`, and its host must resolve only to public addresses (global ones: no private,
loopback, link-local, shared, multicast, reserved or unspecified one); the request then
goes to an address so checked (the name still verifies the certificate), so a name that
resolves anew to a private address between the check and the request is not followed. A
host named in `create_app(webhook_allow=[...])` is taken as it is, `http` too.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from plait.errors import UsageError
from plait.server.limits import ApiError

__all__ = ["ATTEMPTS", "SIGNATURE_HEADER", "Webhooks"]

_log = logging.getLogger("plait.server")

#: The header that carries a body's signature.
SIGNATURE_HEADER = "x-plait-signature"
#: Tries of one delivery, the first included.
ATTEMPTS = 4
#: Seconds before the second try; each later wait is twice the one before.
BACKOFF = 0.5
#: Seconds one try may take.
TIMEOUT = 10.0


def _public(address: str) -> bool:
    """Return whether `address` is one a webhook may be sent to."""
    found = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        found = found.ipv4_mapped
    # not global: private, loopback, link-local, shared (carrier NAT), reserved, unspecified
    return found.is_global and not found.is_multicast


class Webhooks:
    """The app's webhook deliveries: the secret they are signed with, the hosts allowed
    as they are, and the deliveries under way."""

    def __init__(
        self,
        secret: str | None = None,
        allow: Sequence[str] | None = None,
        *,
        backoff: float = BACKOFF,
    ) -> None:
        if secret is not None and (not isinstance(secret, str) or not secret):
            raise UsageError("webhook_secret must be a non-empty str")
        self._secret = None if secret is None else secret.encode()
        self._allow = frozenset(host.lower() for host in allow or ())
        self._backoff = backoff
        self._pending: set[asyncio.Task[None]] = set()

    async def check(self, url: str) -> str | None:
        """Return the address to send to `url` at (None: its host is allowed as it is).

        Raises:
            ApiError: `422`, a URL plait does not send to: not `https`, no host, or a host
                that resolves to a private, loopback or link-local address.
        """
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if not host:
            raise ApiError(422, f"webhook '{url[:200]}' has no host")
        if host in self._allow:
            return None
        if parts.scheme != "https":
            raise ApiError(422, f"webhook '{url[:200]}' must be https")
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, parts.port or 443, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise ApiError(422, f"webhook host '{host[:200]}' does not resolve: {exc}") from None
        addresses = [str(info[4][0]) for info in infos]
        refused = [a for a in addresses if not _public(a)]
        if refused or not addresses:
            raise ApiError(
                422, f"webhook host '{host[:200]}' resolves to a non-public address {refused}"
            )
        return addresses[0]

    def send(self, url: str, payload: dict[str, Any]) -> None:
        """Deliver `payload` to `url` beside the caller (who does not wait for it)."""
        task = asyncio.ensure_future(self._deliver(url, payload))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _deliver(self, url: str, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, default=str).encode()
        headers = {"content-type": "application/json"}
        if self._secret is not None:
            digest = hmac.new(self._secret, body, hashlib.sha256).hexdigest()
            headers[SIGNATURE_HEADER] = f"sha256={digest}"
        wait = self._backoff
        for attempt in range(1, ATTEMPTS + 1):
            try:
                if await self._post(url, body, headers):
                    return
            except ApiError as refused:
                _log.warning("webhook %s not sent: %s", url, refused)
                return
            if attempt < ATTEMPTS:
                await asyncio.sleep(wait)
                wait *= 2
        _log.warning("webhook %s not delivered after %d tries", url, ATTEMPTS)

    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> bool:
        """Try one delivery; return whether the target took it (a 2xx)."""
        address = await self.check(url)
        extensions: dict[str, Any] = {}
        target = url
        if address is not None:  # to the address checked; the name verifies the certificate
            parts = urlsplit(url)
            host = f"[{address}]" if ":" in address else address
            netloc = host if parts.port is None else f"{host}:{parts.port}"
            target = urlunsplit(parts._replace(netloc=netloc))
            headers = {**headers, "host": parts.netloc.rsplit("@", 1)[-1]}
            extensions["sni_hostname"] = parts.hostname
        try:
            async with httpx.AsyncClient(timeout=TIMEOUT) as http:
                answer = await http.post(
                    target, content=body, headers=headers, extensions=extensions
                )
        except httpx.HTTPError as exc:
            _log.info("webhook %s: %s", url, exc)
            return False
        return answer.is_success

    async def aclose(self) -> None:
        """Cancel the deliveries under way and wait for them to end."""
        pending = list(self._pending)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
