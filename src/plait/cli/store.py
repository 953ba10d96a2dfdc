"""The store a command keeps its runs in: opened from a URL and checked before any run.

`--store` takes the URLs of `plait.stores.from_url`; the default is `sqlite:///plait.db` in
the working directory. A store that cannot be reached (no server on that address, a SQLite
file in a folder that does not exist) is a `UsageError` naming the URL (without its
password) and what to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from plait.errors import UsageError

if TYPE_CHECKING:
    from plait.stores import Store

__all__ = ["DEFAULT_STORE", "check_store", "open_store", "shown_url"]

#: The store of `plait run`, `plait resume` and `plait serve` when `--store` is not given.
DEFAULT_STORE = "sqlite:///plait.db"

#: Seconds to wait for a store to answer its first request.
PROBE_SECONDS = 15.0
_PROBE_ID = "plait-cli-probe"


def shown_url(url: str) -> str:
    """Return `url` as it may be shown: without the password."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
    except ValueError:
        return url.split("://", 1)[0] + "://…"


async def open_store(url: str) -> Store:
    """Open the store `url` names and check that it answers.

    Raises:
        UsageError: The URL is not a store URL, or the store does not answer.
    """
    import asyncio

    from plait.stores import from_url

    store = from_url(url)
    try:
        _check_folder(store)
        async with asyncio.timeout(PROBE_SECONDS):
            await store.get_checkpoint(_PROBE_ID)
    except (Exception, TimeoutError) as exc:
        await _close_quietly(store)
        await asyncio.sleep(0.05)  # let a driver's thread finish with this loop before it ends
        text = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, TimeoutError):
            text = f"no answer in {PROBE_SECONDS:.0f} s"
        raise UsageError(
            f"cannot reach the store {shown_url(url)}: {text}; check the URL and that its "
            f"server is running, or pass another --store (default {DEFAULT_STORE})"
        ) from None
    return store


def _check_folder(store: Store) -> None:
    """Refuse a SQLite file in a folder that does not exist (before trying to open it)."""
    from plait.stores.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        folder = Path(store.path).parent
        if not folder.is_dir():
            raise FileNotFoundError(f"no folder {str(folder)!r} for the SQLite file")


def check_store(url: str) -> None:
    """Open the store `url` names in a loop of its own, check it answers, and close it.

    Raises:
        UsageError: The URL is not a store URL, or the store does not answer.
    """

    import asyncio

    async def probe() -> None:
        await _close_quietly(await open_store(url))

    asyncio.run(probe())


async def _close_quietly(store: Store) -> None:
    try:
        await store.close()
    except Exception:  # closing a store that never opened may fail; nothing to report
        return
