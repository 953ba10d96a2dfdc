"""What the stores that talk to a server share: a time bound on every operation, and errors
that name the operation and the server's address (never its password)."""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from plait.errors import StoreError, UsageError

__all__ = [
    "DEFAULT_TIMEOUT",
    "check_timeout",
    "failed",
    "timed_out",
    "url_address",
]

#: Seconds a store operation may take, unless the store is given another `timeout`.
DEFAULT_TIMEOUT = 10.0


def check_timeout(store: str, timeout: float) -> float:
    """Return `timeout` as a float if it is a positive, finite number of seconds.

    Raises:
        UsageError: It is not.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise UsageError(f"{store} timeout must be a number of seconds, got {timeout!r}")
    if not (timeout > 0 and math.isfinite(timeout)):
        raise UsageError(f"{store} timeout must be a positive number of seconds, got {timeout}")
    return float(timeout)


def url_address(url: str, default_port: int) -> str:
    """Return the `host:port` a server URL points at, without user or password."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return "an unreadable URL"
    if parts.scheme == "unix":
        return parts.path or "a unix socket"
    return f"{host or 'localhost'}:{port or default_port}"


_UNKNOWN = " It may or may not have been applied: read the record to know."


def timed_out(
    operation: str, server: str, address: str, timeout: float, *, write: bool
) -> StoreError:
    """Return the error for an operation that got no answer from the server in time."""
    return StoreError(
        f"{operation} timed out at {address} ({server}): no answer within {timeout:g} s."
        " Check that the server is up and reachable; if it is only slow, give the store a"
        f" longer timeout.{_UNKNOWN if write else ''}",
        operation=operation,
    )


def failed(
    operation: str, server: str, address: str, exc: BaseException, *, write: bool
) -> StoreError:
    """Return the error for an operation the server or the connection to it refused."""
    detail = " ".join(str(exc).split()) or "no detail"
    return StoreError(
        f"{operation} failed at {address} ({server}): {type(exc).__name__}: {detail}."
        f" Check that the server is up and reachable.{_UNKNOWN if write else ''}",
        operation=operation,
    )
