"""The cost ledger and the daily budgets: documents per user, run and UTC day in the store.

Each is a session record of the server's store holding a JSON object, changed by
compare-and-set (`plait.server.shared_docs`), so workers sharing the store see each other:

- `<user>/q/r/<run id>`: the run's `rows`, one per model call, keyed by the run's count of
  model calls before it and the caller's place in the run, so a call recorded twice (a run
  replayed from its last checkpoint, here or on another worker) is one row: `[time, agent,
  model, input_tokens, output_tokens, cost, priced]`;
- `<user>/q/l/<YYYY-MM-DD>`: the day's `runs` (whose rows are the day's), `{"runs": {run id:
  1}}`, written by group commit (`plait.stores.session_index.GroupIndex`: the runs listed
  while it is written are written together next, and a process keeps each entry's JSON, so
  a write encodes only what changed; the list grows with the day's runs);
- `<user>/q/d/<YYYY-MM-DD>`: the day's `totals` of its rows (`calls`, `input`, `output`,
  `cost`), its `largest` call (`tokens`, `output`, `cost`) and the `holds` of the calls in
  flight (`[tokens, cost, until]` by hold id): a small document, the same size every call
  (a plait before this layout also listed the day's `runs` here; they are still read). Only
  the calls of a user with a daily budget are counted there: the totals are what budgets
  are checked against, so a user without one writes its calls' rows and nothing more (a
  budget given to a user later counts their calls from then on): a run's rows together, in
  one write as the run ends or pauses (`add_rows`).

A row's run is listed in the row's day first, then the row is written, then counted in its
day only if it was new: a worker that dies between the last two leaves that one call out of
the day's totals (never counts one twice).

A call under a daily budget first reserves (`reserve`): it goes when the day's spend, what
the calls in flight hold and its own reservation fit the budget (its reservation: the larger
of its prompt's estimate plus the day's largest answer, and the day's largest call; the
day's first call, whose size nothing tells yet, goes alone); it waits while calls in flight
hold the room it needs; it is refused when the budget is spent, or when with nothing in
flight it would not fit. Every decision is one compare-and-set, so workers sharing the
store see each other's calls, and the day's spend passes a budget only by what calls took
beyond their reservations (at most the day's first call, when nothing was known). Its row
then settles its hold (`settle`); a call that fails gives it back (`release`). A hold a
worker never settled lapses after `HOLD_SECONDS`.

`#q/users` lists every user with a row (what an admin's `GET /v1/usage` reads); a process
that has listed a user there does not look again.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from datetime import UTC, date, datetime, timedelta
from json.encoder import encode_basestring_ascii
from typing import Any

from plait._util.joined import JoinedParts
from plait.server.shared_docs import change_document, create_document, read_document
from plait.stores.base import GuardedStore, SessionRecord, Store
from plait.stores.session_index import GroupIndex

__all__ = [
    "HOLD_SECONDS",
    "Hold",
    "Ledger",
    "Row",
    "day_of",
    "seconds_to_next_day",
]

#: Seconds a reservation of a call in flight is kept when its worker never settles it.
HOLD_SECONDS = 300.0
#: The budgets a call is checked against, in the order a refusal names them.
_BUDGETS = ("tokens_per_day", "model_calls_per_day", "cost_per_day")
_USERS = "#q/users"
_KEEP_DAYS = 400 * 86_400.0  # how long a day's document is kept


def day_of(moment: datetime) -> str:
    """Return the UTC day of `moment` as `YYYY-MM-DD`."""
    return moment.astimezone(UTC).date().isoformat()


def _row_day(at: str) -> str:
    """Return the UTC day of a row's time (ISO text), as `day_of` gives it."""
    if at[10:11] == "T" and at.endswith("+00:00"):  # a UTC time: its own date
        return at[:10]
    return day_of(datetime.fromisoformat(at))


def seconds_to_next_day(moment: datetime) -> int:
    """Return the whole seconds from `moment` to the next UTC midnight (at least 1)."""
    utc = moment.astimezone(UTC)
    midnight = datetime.combine(utc.date() + timedelta(days=1), datetime.min.time(), UTC)
    return max(1, math.ceil((midnight - utc).total_seconds()))


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One model call in the ledger."""

    user: str
    agent: str
    model: str
    input_tokens: int
    output_tokens: int
    cost: float
    priced: bool
    run_id: str
    time: datetime

    def to_json(self) -> dict[str, Any]:
        """Return the row as `GET /v1/usage` shows it."""
        return {**dataclasses.asdict(self), "time": self.time.isoformat()}


@dataclasses.dataclass(frozen=True, slots=True)
class Hold:
    """A reservation of a call in flight: in the document of `day`, under `id`."""

    day: str
    id: str


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """What `reserve` decides of a call: go (under `hold`), wait, or refuse (`refused`:
    the budget and its value)."""

    go: bool = False
    hold: Hold | None = None
    refused: tuple[str, float] | None = None


_WAIT = Decision()


@dataclasses.dataclass(frozen=True, slots=True)
class Budgets:
    """The daily budgets of one user (None: none)."""

    tokens_per_day: int | None = None
    model_calls_per_day: int | None = None
    cost_per_day: float | None = None

    @property
    def any(self) -> bool:
        """Whether any budget is set."""
        return any(getattr(self, name) is not None for name in _BUDGETS)


def _live_holds(doc: dict[str, Any], now: float) -> dict[str, list[float]]:
    """Drop the holds that lapsed; return those left."""
    holds: dict[str, list[float]] = doc.setdefault("holds", {})
    for key in [k for k, (_, _, until) in holds.items() if until <= now]:
        del holds[key]
    return holds


def _decide(doc: dict[str, Any], budgets: Budgets, estimate: int, now: float) -> Decision:
    """Decide a call that estimates `estimate` prompt tokens (see the module docstring);
    on "go", add its hold to `doc`."""
    totals = doc.get("totals") or {}
    largest = doc.get("largest") or {}
    holds = _live_holds(doc, now)
    alone = not holds
    held_tokens = sum(h[0] for h in holds.values())
    held_cost = sum(h[1] for h in holds.values())
    used_tokens = totals.get("input", 0) + totals.get("output", 0)
    known = bool(totals.get("calls", 0))  # a call was settled today: its size is a guide
    size = max(largest.get("tokens", 0), estimate + largest.get("output", 0))
    cost = float(largest.get("cost", 0.0))
    checks = (
        ("tokens_per_day", budgets.tokens_per_day, used_tokens, held_tokens, size),
        ("model_calls_per_day", budgets.model_calls_per_day, totals.get("calls", 0), len(holds), 1),
        ("cost_per_day", budgets.cost_per_day, totals.get("cost", 0.0), held_cost, cost),
    )
    wait = False
    for name, limit, used, held, own in checks:
        if limit is None:
            continue
        if used >= limit:
            return Decision(refused=(name, limit))
        if name == "model_calls_per_day" or known:  # the call's size is known (or is 1)
            if used + held + own <= limit:
                continue
            if alone:  # nothing in flight will give back room: this call would pass it
                return Decision(refused=(name, limit))
        elif alone:  # the day's first call: it goes alone, and shows what a call takes
            continue
        wait = True
    if wait:
        return _WAIT
    hold = Hold(doc.get("day", ""), uuid.uuid4().hex)
    holds[hold.id] = [size, cost, now + HOLD_SECONDS]
    return Decision(go=True, hold=hold)


@dataclasses.dataclass(slots=True)
class _DayRuns:
    """The runs of a user's day as this process last wrote (or read) them, with each
    entry's JSON text (a write encodes only the runs that are new)."""

    version: int
    parts: JoinedParts = dataclasses.field(default_factory=lambda: JoinedParts(","))

    @classmethod
    def read(cls, found: SessionRecord | None) -> _DayRuns:
        if found is None:
            return cls(0)
        known = cls(found.version)
        for run_id in _runs_of(json.loads(found.data)):
            known.parts.set(run_id, _listed(run_id))
        return known

    def apply(self, changes: dict[str, int | None]) -> bool:
        changed = False
        for run_id, entry in changes.items():
            if entry is None:
                changed = self.parts.pop(run_id) or changed
            elif run_id not in self.parts:
                self.parts.set(run_id, _listed(run_id))
                changed = True
        return changed

    def encode(self) -> bytes:
        return b"".join((b'{"runs":{', self.parts.joined(), b"}}"))


def _listed(run_id: str) -> str:
    return f"{encode_basestring_ascii(run_id)}:1"


def _runs_of(doc: Any) -> dict[str, Any]:
    """Return the `runs` of a day's document (a list, or a day document of before)."""
    runs = doc.get("runs") if isinstance(doc, dict) else None
    return runs if isinstance(runs, dict) else {}


def _add_row(doc: dict[str, Any], key: str, row: Row) -> bool:
    """Add `row` to a run's rows under `key` (unless there is one); return whether new."""
    rows: dict[str, list[Any]] = doc.setdefault("rows", {})
    if key in rows:
        return False
    rows[key] = [
        row.time.isoformat(),
        row.agent,
        row.model,
        row.input_tokens,
        row.output_tokens,
        row.cost,
        row.priced,
    ]
    return True


def _count(doc: dict[str, Any], row: Row) -> None:
    """Add `row` to the day's totals and largest call."""
    totals = doc.setdefault("totals", {"calls": 0, "input": 0, "output": 0, "cost": 0.0})
    totals["calls"] += 1
    totals["input"] += row.input_tokens
    totals["output"] += row.output_tokens
    totals["cost"] += row.cost
    largest = doc.setdefault("largest", {"tokens": 0, "output": 0, "cost": 0.0})
    largest["tokens"] = max(largest["tokens"], row.input_tokens + row.output_tokens)
    largest["output"] = max(largest["output"], row.output_tokens)
    largest["cost"] = max(largest["cost"], row.cost)


class Ledger:
    """The ledger and daily budgets of the users of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._guarded = GuardedStore(store)  # what the day's list of runs is written through
        self._days: GroupIndex[int] = GroupIndex(_DayRuns.read, "ledger day")
        self._users: set[str] = set()  # the users this process has seen in `#q/users`

    @staticmethod
    def _key(user: str, day: str) -> str:
        return f"{user}/q/d/{day}"

    @staticmethod
    def _list_key(user: str, day: str) -> str:
        return f"{user}/q/l/{day}"

    @staticmethod
    def _run_key(user: str, run_id: str) -> str:
        return f"{user}/q/r/{run_id}"

    async def refusal(self, user: str, budgets: Budgets, now: datetime) -> tuple[str, float] | None:
        """Return the budget that would refuse a call of `user` now (with nothing in
        flight), and its value; None when a call could go."""
        doc = await read_document(self.store, self._key(user, day_of(now)))
        doc["holds"] = {}
        return _decide(doc, budgets, 0, now.timestamp()).refused

    async def reserve(
        self, user: str, run_id: str, budgets: Budgets, estimate: int, now: datetime
    ) -> Decision:
        """Decide a call of run `run_id` of `user` now under `budgets` (see the module
        docstring); a call that goes lists its run among the day's."""
        day = day_of(now)

        def edit(doc: dict[str, Any]) -> Decision:
            doc["day"] = day
            return _decide(doc, budgets, estimate, now.timestamp())

        decided = await change_document(
            self.store, self._key(user, day), edit, ttl=_KEEP_DAYS, write=lambda d: d.go
        )
        if decided.go:
            await self.list_run(user, run_id, now)
        return decided

    async def list_run(self, user: str, run_id: str, now: datetime) -> None:
        """List run `run_id` of `user` among the day's runs (its rows are read from there)."""
        await self._list_in_day(user, run_id, day_of(now))

    async def _list_in_day(self, user: str, run_id: str, day: str) -> None:
        await self._days.change(self._guarded, self._list_key(user, day), run_id, 1)
        if user not in self._users:
            await self._list_user(user, day)
            self._users.add(user)

    async def _list_user(self, user: str, day: str) -> None:
        await change_document(
            self.store,
            _USERS,
            lambda doc: user not in doc and doc.update({user: day}) is None,
            write=bool,
        )

    async def release(self, user: str, hold: Hold) -> None:
        """Give back the reservation of a call that was not made or failed."""
        await change_document(
            self.store,
            self._key(user, hold.day),
            lambda doc: doc.setdefault("holds", {}).pop(hold.id, None) is not None,
            ttl=_KEEP_DAYS,
            write=bool,
        )

    async def settle(
        self, key: str, row: Row, hold: Hold | None, *, listed: bool = False, count: bool = True
    ) -> bool:
        """Record `row` under `key` once (its run listed in the row's day first, unless
        `listed` says it is), count it in its day (its hold's, else its time's; not when
        `count` is False: a user without daily budgets) and settle `hold`; return whether
        the row is new."""
        if not listed:  # a call across midnight, or a caller that did not list its run
            await self.list_run(row.user, row.run_id, row.time)
        new = await change_document(
            self.store,
            self._run_key(row.user, row.run_id),
            lambda doc: _add_row(doc, key, row),
            ttl=_KEEP_DAYS,
            write=bool,
        )
        day = hold.day if hold is not None else day_of(row.time)

        def edit(doc: dict[str, Any]) -> bool:
            held = hold is not None and doc.setdefault("holds", {}).pop(hold.id, None)
            if new and count:
                _count(doc, row)
            return bool(new or held)

        if (new and count) or hold is not None:
            await change_document(
                self.store, self._key(row.user, day), edit, ttl=_KEEP_DAYS, write=bool
            )
        return new

    async def add_rows(self, user: str, run_id: str, rows: dict[str, list[Any]]) -> None:
        """Record the rows of run `run_id` of `user` not in the ledger yet, in one write
        (`rows`: key -> `[time, agent, model, input_tokens, output_tokens, cost, priced]`),
        its run listed in each of their days first; count none of them in a day (a user
        without daily budgets)."""
        for day in dict.fromkeys([_row_day(row[0]) for row in rows.values()]):
            await self._list_in_day(user, run_id, day)

        def edit(doc: dict[str, Any]) -> bool:
            kept: dict[str, list[Any]] = doc.setdefault("rows", {})
            new = {key: row for key, row in rows.items() if key not in kept}
            kept.update(new)
            return bool(new)

        key = self._run_key(user, run_id)
        # a run's first rows make its document (a run resumed adds to the one it has)
        if not await create_document(self.store, key, {"rows": rows}, ttl=_KEEP_DAYS):
            await change_document(self.store, key, edit, ttl=_KEEP_DAYS, write=bool)

    async def users(self) -> list[str]:
        """Return every user with a row in the ledger."""
        return sorted(await read_document(self.store, _USERS))

    async def rows(self, user: str, start: date, end: date) -> list[Row]:
        """Return the user's rows of the runs of the days from `start` to `end` (both
        included), oldest first (a run's rows of other days too: filter them by time)."""
        runs: dict[str, None] = {}
        day = start
        while day <= end:
            for key in (self._key(user, day.isoformat()), self._list_key(user, day.isoformat())):
                runs.update(dict.fromkeys(_runs_of(await read_document(self.store, key))))
            day += timedelta(days=1)
        found: list[Row] = []
        for run_id in runs:
            doc = await read_document(self.store, self._run_key(user, run_id))
            for at, agent, model, given, taken, cost, priced in (doc.get("rows") or {}).values():
                found.append(
                    Row(
                        user=user,
                        agent=agent,
                        model=model,
                        input_tokens=given,
                        output_tokens=taken,
                        cost=cost,
                        priced=priced,
                        run_id=run_id,
                        time=datetime.fromisoformat(at),
                    )
                )
        found.sort(key=lambda row: row.time)
        return found
