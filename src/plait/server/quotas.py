"""Per-user quotas of a server: `Quota`, and the admission of runs (`Tenants`).

`create_app(..., quotas={user_id | "*": Quota(...)})` bounds each user (`"*"`: every user
without a quota of their own). A run that would break a quota does not start: the request
is answered `429` with `Retry-After` and `{"error": {"type": "quota_exceeded", "quota",
"retry_after", "message"}}`:

- `max_concurrent_runs`: the user's runs running at once, across the workers sharing the
  store (each running run holds a lease in `<user>/q/runs`, renewed while it runs, so a
  worker that died frees its places within `LEASE_SECONDS`);
- `runs_per_minute`: runs started (or resumed) in the last 60 seconds;
- a daily budget already spent (`tokens_per_day`, `model_calls_per_day`, `cost_per_day`,
  per UTC day): `Retry-After` is the time to the next day.

The daily budgets are also checked before each model call of a running run
(`plait.server.budget`, with the ledger of `plait.server.ledger`). With the Agent Protocol's
`multitask_strategy="enqueue"` a run that `max_concurrent_runs` or `runs_per_minute` refuses
waits for its turn instead (first come, first served), up to `max_queued_runs` of the user's
runs waiting at once. Every count is changed by compare-and-set in the store, so workers sharing one
store (SQLite file, PostgreSQL, Redis) enforce one quota.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from plait.errors import PlaitError, QuotaExceeded, UsageError
from plait.server.ledger import Budgets, Ledger, seconds_to_next_day
from plait.server.shared_docs import change_document
from plait.stores.base import Store

__all__ = ["LEASE_SECONDS", "Quota", "Tenants", "Ticket", "check_admin_keys", "check_quotas"]

_log = logging.getLogger("plait.server")
#: How long a running run's place counts without being renewed (its worker died).
LEASE_SECONDS = 60.0
_RENEW_EVERY = LEASE_SECONDS / 3
_WINDOW = 60.0  # runs_per_minute's window, in seconds
#: How long a queued run waits for its turn before it is refused.
QUEUE_SECONDS = 600.0
_QUEUE_POLL = 0.2  # seconds between two looks of a queued run at its turn
_INTS = ("tokens_per_day", "model_calls_per_day", "runs_per_minute")
_COUNTS = ("max_concurrent_runs", "max_queued_runs")


@dataclasses.dataclass(frozen=True, slots=True)
class Quota:
    """What one user of a server may spend and start (None: no bound).

    Daily budgets, per UTC day: `tokens_per_day` (input plus output tokens),
    `model_calls_per_day`, `cost_per_day` (US dollars, as the ledger prices calls).
    Admission: `runs_per_minute` (runs started in the last 60 seconds),
    `max_concurrent_runs` (running at once), `max_queued_runs` (waiting in the Agent
    Protocol's queues with `multitask_strategy="enqueue"`).
    """

    tokens_per_day: int | None = None
    model_calls_per_day: int | None = None
    cost_per_day: float | None = None
    runs_per_minute: int | None = None
    max_concurrent_runs: int | None = None
    max_queued_runs: int | None = None

    def __post_init__(self) -> None:
        for name in (*_INTS, *_COUNTS):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 0):
                raise UsageError(f"Quota: {name} must be an int of 0 or more, or None")
        cost = self.cost_per_day
        if cost is not None and (
            isinstance(cost, bool)
            or not isinstance(cost, int | float)
            or not math.isfinite(cost)
            or cost < 0
        ):
            raise UsageError("Quota: cost_per_day must be a number of 0 or more, or None")

    @property
    def budgets(self) -> Budgets:
        """Return the daily budgets of this quota."""
        return Budgets(self.tokens_per_day, self.model_calls_per_day, self.cost_per_day)


def check_quotas(quotas: Mapping[str, Quota] | None) -> dict[str, Quota]:
    """Return the user -> `Quota` mapping of `create_app(quotas=...)` after checking it.

    Raises:
        UsageError: Not a mapping of user ids (or "*") to `Quota`s.
    """
    if quotas is None:
        return {}
    if not isinstance(quotas, Mapping):
        raise UsageError('quotas maps user ids (or "*") to plait.server.Quota')
    checked: dict[str, Quota] = {}
    for user, quota in quotas.items():
        if not isinstance(user, str) or not user:
            raise UsageError(f'quotas: {user!r} is not a user id or "*"')
        if not isinstance(quota, Quota):
            raise UsageError(f"quotas[{user!r}] must be a plait.server.Quota, got {quota!r}")
        checked[user] = quota
    return checked


def check_admin_keys(
    admin_keys: Sequence[str] | None, api_keys: Mapping[str, str] | None
) -> frozenset[str]:
    """Return the admin keys of `create_app(admin_keys=...)` after checking them.

    Raises:
        UsageError: Not a list of keys, or a key that is not one of `api_keys`.
    """
    if admin_keys is None:
        return frozenset()
    if isinstance(admin_keys, str) or not isinstance(admin_keys, Sequence | set | frozenset):
        raise UsageError("admin_keys is a list of API keys")
    for key in admin_keys:
        if not isinstance(key, str) or api_keys is None or key not in api_keys:
            raise UsageError(
                "every admin key must be one of api_keys (its user is who the admin is)"
            )
    return frozenset(admin_keys)


def refusal(quota: str, limit: float, retry_after: int, what: str) -> QuotaExceeded:
    """Return the error of a quota that refuses: `what` happened, over `quota=limit`."""
    shown = f"{limit:g}" if isinstance(limit, float) else str(limit)
    return QuotaExceeded(
        f"{what}: over the quota {quota}={shown}; try again in {retry_after} s",
        quota=quota,
        limit=limit,
        retry_after=retry_after,
    )


class Ticket:
    """A running run's place under `max_concurrent_runs`, renewed until released."""

    def __init__(self, tenants: Tenants, user: str, place: str) -> None:
        self.tenants = tenants
        self.user = user
        self.place = place
        self._renewing = asyncio.ensure_future(self._renew())

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(_RENEW_EVERY)
            try:
                await self.tenants.hold_place(self.user, self.place)
            except PlaitError as exc:
                _log.warning("could not renew a run's place of user %s: %s", self.user, exc)

    async def release(self) -> None:
        """Free the place (the run ended)."""
        self._renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._renewing
        try:
            await self.tenants.free_place(self.user, self.place)
        except PlaitError as exc:  # the lease lapses on its own
            _log.warning("could not free a run's place of user %s: %s", self.user, exc)


class Tenants:
    """The quotas of one app's users, its ledger and the clock its windows go by."""

    def __init__(
        self, store: Store, quotas: Mapping[str, Quota], clock: Callable[[], datetime]
    ) -> None:
        self.store = store
        self.quotas = dict(quotas)
        self.clock = clock
        self.ledger = Ledger(store)

    def quota(self, user: str) -> Quota | None:
        """Return the user's quota (their own, else `"*"`'s), or None."""
        return self.quotas.get(user) or self.quotas.get("*")

    async def admit(self, user: str, *, queue: bool = False) -> Ticket | None:
        """Let a run of `user` start (or resume); return its place under
        `max_concurrent_runs` (None when no such quota applies). With `queue`, a run that
        `max_concurrent_runs` or `runs_per_minute` refuses waits for its turn instead, up
        to `max_queued_runs` of the user's runs waiting at once (the Agent Protocol's
        `multitask_strategy="enqueue"`).

        Raises:
            QuotaExceeded: A quota refuses it (see the module docstring).
        """
        quota = self.quota(user)
        if quota is None:
            return None
        now = self.clock()
        await self._check_budgets(user, quota, now)
        if quota.runs_per_minute is None and quota.max_concurrent_runs is None:
            return None
        place = uuid.uuid4().hex
        refused = await self._try(user, quota, place, queued=False)
        if refused is not None and queue and refused.quota != "max_queued_runs":
            refused = await self._wait_in_queue(user, quota, place)
        if refused is not None:
            raise refused
        if quota.max_concurrent_runs is None:
            return None
        return Ticket(self, user, place)

    async def _try(
        self, user: str, quota: Quota, place: str, *, queued: bool
    ) -> QuotaExceeded | None:
        """Admit the run `place` now (a queued one only at its turn); return the refusal."""
        at = self.clock().timestamp()
        renewed: list[bool] = []
        return await change_document(
            self.store,
            f"{user}/q/runs",
            lambda doc: _admit(doc, quota, place, at, queued=queued, renewed=renewed),
            write=lambda found: found is None or bool(renewed),
        )

    async def _wait_in_queue(self, user: str, quota: Quota, place: str) -> QuotaExceeded | None:
        """Queue the run `place` (or refuse it: the queue is full) and wait for its turn;
        return the refusal of a run that waited `QUEUE_SECONDS` in vain."""
        key = f"{user}/q/runs"
        joined = await change_document(
            self.store, key, lambda doc: _join(doc, quota, place, self.clock().timestamp())
        )
        if joined is not None:
            return joined
        try:
            deadline = asyncio.get_running_loop().time() + QUEUE_SECONDS
            refused: QuotaExceeded | None = None
            while asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(_QUEUE_POLL)
                refused = await self._try(user, quota, place, queued=True)
                if refused is None:
                    return None
            return refused
        finally:  # leave the queue (admitted runs have left it already)
            await change_document(self.store, key, lambda doc: _leave(doc, place), write=bool)

    async def _check_budgets(self, user: str, quota: Quota, now: datetime) -> None:
        budgets = quota.budgets
        if not budgets.any:
            return
        refused = await self.ledger.refusal(user, budgets, now)
        if refused is not None:
            name, limit = refused
            what = f"user '{user}' has no room left in today's {name}"
            raise refusal(name, limit, seconds_to_next_day(now), what)

    async def hold_place(self, user: str, place: str) -> None:
        """Renew the lease of a running run's place."""
        until = self.clock().timestamp() + LEASE_SECONDS
        await change_document(
            self.store,
            f"{user}/q/runs",
            lambda doc: doc.setdefault("running", {}).update({place: until}),
        )

    async def free_place(self, user: str, place: str) -> None:
        """Free a running run's place."""
        await change_document(
            self.store,
            f"{user}/q/runs",
            lambda doc: doc.setdefault("running", {}).pop(place, None),
        )


def _live(doc: dict[str, Any], name: str, now: float) -> dict[str, Any]:
    """Return the entries `name` of the runs document whose lease has not lapsed."""
    entries: dict[str, Any] = doc.setdefault(name, {})
    for key in [
        k for k, value in entries.items() if (value[1] if name == "queued" else value) <= now
    ]:
        del entries[key]
    return entries


def _join(doc: dict[str, Any], quota: Quota, place: str, now: float) -> QuotaExceeded | None:
    """Queue the run `place` behind the user's queued runs, or refuse it (queue full)."""
    queued = _live(doc, "queued", now)
    limit = quota.max_queued_runs
    if limit is not None and len(queued) >= limit:
        return refusal("max_queued_runs", limit, 1, f"{len(queued)} runs are queued")
    queued[place] = [now, now + LEASE_SECONDS]
    return None


def _leave(doc: dict[str, Any], place: str) -> bool:
    """Take the run `place` out of the queue (it was admitted, or gave up)."""
    return doc.setdefault("queued", {}).pop(place, None) is not None


def _admit(
    doc: dict[str, Any],
    quota: Quota,
    place: str,
    now: float,
    *,
    queued: bool = False,
    renewed: list[bool] | None = None,
) -> QuotaExceeded | None:
    """Admit a run at `now` into the runs document `doc` (its place among the running, its
    start among the minute's), or return the refusal. A queued run goes only at its turn
    (the first in the queue), and leaves the queue; a waiting run's lease is renewed."""
    running: dict[str, float] = _live(doc, "running", now)
    starts: list[float] = [t for t in doc.get("starts", []) if t > now - _WINDOW]
    doc["starts"] = starts
    if queued:
        waiting = _live(doc, "queued", now)
        first = min(waiting, key=lambda k: waiting[k][0], default=place)
        if place not in waiting:  # its lease had lapsed: back in, at the end
            waiting[place] = [now, 0.0]
        if waiting[place][1] - now < _RENEW_EVERY * 2 and renewed is not None:
            waiting[place][1] = now + LEASE_SECONDS
            renewed.append(True)
        if first != place:
            return refusal("max_concurrent_runs", quota.max_concurrent_runs or 0, 1, "queued")
    limit = quota.max_concurrent_runs
    if limit is not None and len(running) >= limit:
        return refusal("max_concurrent_runs", limit, 1, f"{len(running)} runs are running")
    limit = quota.runs_per_minute
    if limit is not None and len(starts) >= limit:
        wait = max(1, math.ceil(min(starts, default=now) + _WINDOW - now))
        return refusal("runs_per_minute", limit, wait, f"{len(starts)} runs started this minute")
    if quota.max_concurrent_runs is not None:
        running[place] = now + LEASE_SECONDS
    if quota.runs_per_minute is not None:
        starts.append(now)
    if queued:
        del doc["queued"][place]
    return None
