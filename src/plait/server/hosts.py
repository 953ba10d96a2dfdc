"""Which `Host` (and, from browsers, `Origin`) a server answers: the guard against DNS rebinding.

A web page can rebind its own name to 127.0.0.1 and then talk to a server on this machine
as if it were its own origin; the browser sends the page's name in `Host` and `Origin`.
A server without API keys trusts whoever reaches it, so by default it answers only
requests addressed to a loopback name (`localhost`, `127.0.0.1`, `[::1]`, a name under
`.localhost`) or to the IP address the connection came in on (an IP address cannot be
rebound). `allowed_hosts` adds names (a proxy's public name) or lifts the check (`"*"`).

The app's door (`plait.server.door.Door`) refuses with `403`, before any route runs, a
request whose `Host` is not allowed, or that carries an `Origin` whose host is not allowed
(`host_problem` says why).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

from starlette.types import Scope

from plait.errors import UsageError

__all__ = ["LOOPBACK_NAMES", "HostRule", "host_problem", "host_rule"]

#: Names that always mean this machine.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_MAX_HOST = 253
_ANSWERED = 64  # the most requests' headers a rule remembers as answered


class HostRule:
    """The hosts a server answers: loopback names, the connection's own IP, `names`."""

    def __init__(self, names: Iterable[str], *, any_host: bool) -> None:
        self.names = frozenset(names) | LOOPBACK_NAMES
        self.any_host = any_host
        #: The (`Host`, `Origin`, local IP) of requests answered lately (`host_problem`).
        self.answered: set[tuple[bytes | None, bytes | None, str | None]] = set()

    def allows(self, host: str, local_ip: str | None) -> bool:
        """Whether a request addressed to `host` (no port, lower case) may be answered."""
        if self.any_host or host in self.names or host.endswith(".localhost"):
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        if address.is_loopback:
            return True
        return local_ip is not None and _same_ip(address, local_ip)


def _same_ip(address: ipaddress.IPv4Address | ipaddress.IPv6Address, local: str) -> bool:
    try:
        return address == ipaddress.ip_address(local.split("%", 1)[0])
    except ValueError:
        return False


def host_rule(allowed_hosts: Sequence[str] | None, *, keyed: bool) -> HostRule | None:
    """Return the rule of `create_app(allowed_hosts=...)`, or None when nothing is checked.

    None (the default) checks hosts only on a server without keys; a list is checked
    always; `["*"]` checks nothing.

    Raises:
        UsageError: `allowed_hosts` is not a list of host names.
    """
    if allowed_hosts is None:
        return None if keyed else HostRule((), any_host=False)
    if isinstance(allowed_hosts, str) or not isinstance(allowed_hosts, Sequence):
        raise UsageError("allowed_hosts is a list of host names, e.g. ['agents.example.com']")
    names = []
    for name in allowed_hosts:
        if not isinstance(name, str) or not name or len(name) > _MAX_HOST or not name.isascii():
            raise UsageError(
                f"allowed_hosts holds host names (ASCII, 1 to {_MAX_HOST} characters), "
                f"got {str(name)[:80]!r}"
            )
        names.append(name.strip("[]").lower())
    if "*" in names:
        return None
    return HostRule(names, any_host=False)


def split_host(value: str) -> str | None:
    """Return the host of a `Host` header value (`name:port`, `[v6]:port`), lower case."""
    value = value.strip().lower()
    if not value or len(value) > _MAX_HOST + 8:
        return None
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else None
    host, _, port = value.partition(":")
    if port and not port.isdigit():
        return None
    return host or None


def origin_host(value: str) -> str | None:
    """Return the host of an `Origin` header value, or None for "null" or junk."""
    try:
        parts = urlsplit(value.strip())
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not host:
        return None
    return host.lower()


def host_problem(rule: HostRule, scope: Scope) -> str | None:
    """Return why the request of `scope` is refused under `rule` (its `Host`, or its
    `Origin`, names a host not allowed), or None when it may be answered."""
    host_header = origin_header = None
    for name, value in scope.get("headers", ()):
        if name == b"host":  # the last of each, as a dict of the headers keeps
            host_header = value
        elif name == b"origin":
            origin_header = value
    server = scope.get("server")
    local_ip = server[0] if server else None
    seen = (host_header, origin_header, local_ip)
    if seen in rule.answered:  # (the same headers again: the same answer)
        return None
    problem = _problem(rule, host_header, origin_header, local_ip)
    if problem is None:
        if len(rule.answered) >= _ANSWERED:
            rule.answered.clear()
        rule.answered.add(seen)
    return problem


def _problem(
    rule: HostRule, host_header: bytes | None, origin_header: bytes | None, local_ip: str | None
) -> str | None:
    raw_host = (host_header or b"").decode("latin-1")
    host = split_host(raw_host)
    if host is None or not rule.allows(host, local_ip):
        return (
            f"this server does not answer for host {raw_host[:100]!r}; a server without "
            "API keys answers only its loopback names and its own address (see "
            "allowed_hosts / --allowed-host)"
        )
    if origin_header is None:
        return None
    origin = origin_header.decode("latin-1")
    found = origin_host(origin)
    if found is None or not rule.allows(found, local_ip):
        return f"requests from origin {origin[:100]!r} are not allowed"
    return None
