"""The conformance suite every store backend passes.

Each check is an async function taking a fresh, empty store; `CHECKS` lists them. Run them
with any test runner, e.g. `@pytest.mark.parametrize("check", CHECKS)`. Stores that talk to
a server also run the fault checks at the end, with a fault put between store and server.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from plait._util.expect import raised
from plait.core.agent_context import AgentContext
from plait.errors import SessionConflict, StoreError, UsageError
from plait.messages import Message
from plait.stores.base import (
    MAX_BATCH,
    MAX_ID_LENGTH,
    MAX_TTL,
    CheckpointWrite,
    GuardedStore,
    SessionRecord,
    Store,
)
from plait.stores.conformance_effects import EFFECT_CHECKS
from plait.tools.base import ToolInfo

__all__ = [
    "CHECKS",
    "FaultSwitch",
    "operations_fail_with_store_errors",
    "pending_checkpoints_outlive_a_fault",
    "two_clients_save_one_of_two_turns",
]

Check = Callable[[Store], Awaitable[None]]
_E = TypeVar("_E", bound=Exception)


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


async def _conflict(write: Awaitable[int]) -> SessionConflict:
    """Return the `SessionConflict` that `write` raises; fail if it writes."""
    return await raised(SessionConflict, write)


async def missing_records_are_none(store: Store) -> None:
    """Unknown ids read as None; deleting them is not an error."""
    assert await store.get_checkpoint(_id("cp")) is None
    assert await store.get_session(_id("s")) is None
    assert await store.get_session_record(_id("s")) is None
    await store.delete_checkpoint(_id("cp"))
    await store.delete_session(_id("s"))


async def checkpoints_round_trip_with_growing_versions(store: Store) -> None:
    """A write is read back exactly, pending, and each write raises the version."""
    cp = _id("cp")
    data = b'{"v": 1, "bytes": "\\u00e9"}\x00\xff'
    v1 = await store.put_checkpoint(cp, data)
    record = await store.get_checkpoint(cp)
    assert record is not None
    assert (record.checkpoint_id, record.data, record.version, record.status) == (
        cp,
        data,
        v1,
        "pending",
    )
    v2 = await store.put_checkpoint(cp, b"second", status="done")
    assert v2 > v1
    again = await store.get_checkpoint(cp)
    assert again is not None and (again.data, again.version, again.status) == (
        b"second",
        v2,
        "done",
    )


async def checkpoints_are_written_together(store: Store) -> None:
    """Checkpoints written in one batch read back with their own status and versions that
    grow; one id twice in a batch is refused before anything is written."""
    view = GuardedStore(store)  # the batch where the store has one, else one by one
    a, b, c = _id("cp"), _id("cp"), _id("cp")
    assert await view.put_checkpoints([]) == []
    first = await view.put_checkpoints([(a, b"one", "pending"), (b, b"two", "done")], flush=False)
    second = await view.put_checkpoints([(b, b"2", "done"), (a, b"1", "pending")], ttl=60)
    assert second[0] > first[1] and second[1] > first[0]
    found_a, found_b = await store.get_checkpoint(a), await store.get_checkpoint(b)
    assert found_a is not None and found_b is not None
    assert (found_a.data, found_a.version, found_a.status) == (b"1", second[1], "pending")
    assert (found_b.data, found_b.version, found_b.status) == (b"2", second[0], "done")
    assert await store.claim_checkpoint(a, second[1])
    await raised(UsageError, view.put_checkpoints([(c, b"x", "pending"), (c, b"y", "done")]))
    many: list[CheckpointWrite] = [(f"{c}-{n}", b"x", "pending") for n in range(MAX_BATCH + 1)]
    await raised(UsageError, view.put_checkpoints(many))
    assert await store.get_checkpoint(c) is None and await store.get_checkpoint(f"{c}-0") is None


async def claiming_is_compare_and_set(store: Store) -> None:
    """Only pending at the current version can be claimed, and only once."""
    cp = _id("cp")
    version = await store.put_checkpoint(cp, b"x")
    assert not await store.claim_checkpoint(cp, version + 1)
    assert await store.claim_checkpoint(cp, version)
    assert not await store.claim_checkpoint(cp, version)
    record = await store.get_checkpoint(cp)
    assert record is not None and record.status == "claimed"
    assert not await store.claim_checkpoint(_id("missing"), 1)
    fresh = await store.put_checkpoint(cp, b"paused again")
    assert fresh > version
    assert await store.claim_checkpoint(cp, fresh)


async def concurrent_claims_have_one_winner(store: Store) -> None:
    """Of many concurrent claims of the same version, exactly one succeeds."""
    cp = _id("cp")
    version = await store.put_checkpoint(cp, b"x")
    results = await asyncio.gather(*(store.claim_checkpoint(cp, version) for _ in range(12)))
    assert sum(results) == 1


async def done_checkpoints_cannot_be_claimed(store: Store) -> None:
    """A finished checkpoint stays readable but cannot be resumed."""
    cp = _id("cp")
    version = await store.put_checkpoint(cp, b"x", status="done")
    assert not await store.claim_checkpoint(cp, version)


async def deleting_removes_records(store: Store) -> None:
    """Deleted checkpoints and sessions read as None."""
    cp, s = _id("cp"), _id("s")
    await store.put_checkpoint(cp, b"x")
    await store.put_session(s, b"y")
    await store.delete_checkpoint(cp)
    await store.delete_session(s)
    assert await store.get_checkpoint(cp) is None
    assert await store.get_session(s) is None


async def records_expire_after_their_ttl(store: Store) -> None:
    """A record written with `ttl` is gone once it has passed; others stay."""
    cp, s, keep, batch = _id("cp"), _id("s"), _id("keep"), _id("cp")
    await store.put_checkpoint(cp, b"x", ttl=0.3)
    await GuardedStore(store).put_checkpoints([(batch, b"x", "pending")], ttl=0.3, flush=False)
    await store.put_session(s, b"y", ttl=0.3)
    await store.put_session(keep, b"z")
    assert await store.get_checkpoint(cp) is not None
    await asyncio.sleep(0.7)
    assert await store.get_checkpoint(cp) is None
    assert await store.get_checkpoint(batch) is None
    assert await store.get_session(s) is None
    assert await store.get_session(keep) == b"z"
    assert await store.put_session(s, b"new", expected_version=0) == 1


async def sessions_round_trip_and_overwrite(store: Store) -> None:
    """A session write replaces the previous one; large values survive."""
    s = _id("s")
    await store.put_session(s, b"first")
    big = b"x" * (2 * 1024 * 1024)
    await store.put_session(s, big)
    assert await store.get_session(s) == big


async def sessions_have_versions_from_one(store: Store) -> None:
    """A session's first write is version 1 and every write raises it by one."""
    s = _id("s")
    data = b'{"turns": ["\\u00e9"]}\x00\xff'
    assert await store.put_session(s, data) == 1
    record = await store.get_session_record(s)
    assert record is not None
    assert (record.session_id, record.data, record.version) == (s, data, 1)
    assert await store.put_session(s, b"second") == 2
    assert await store.put_session(s, b"third", expected_version=2) == 3
    again = await store.get_session_record(s)
    assert again is not None and (again.data, again.version) == (b"third", 3)
    assert await store.get_session(s) == b"third"


async def creating_a_session_is_compare_and_set(store: Store) -> None:
    """`expected_version=0` writes only when there is no session yet."""
    s = _id("s")
    assert await store.put_session(s, b"first", expected_version=0) == 1
    err = await _conflict(store.put_session(s, b"second", expected_version=0))
    assert (err.session_id, err.version, err.expected_version) == (s, 1, 0)
    assert f"session '{s}' was changed by another turn" in str(err)
    assert await store.get_session(s) == b"first"


async def stale_session_writes_are_refused(store: Store) -> None:
    """A write based on a version that is no longer stored raises and changes nothing."""
    s = _id("s")
    v1 = await store.put_session(s, b"first")
    v2 = await store.put_session(s, b"second", expected_version=v1)
    err = await _conflict(store.put_session(s, b"stale", expected_version=v1))
    assert (err.version, err.expected_version) == (v2, v1)
    assert str(err) == (
        f"session '{s}' was changed by another turn (version {v2}, expected {v1});"
        " this turn was not saved"
    )
    await _conflict(store.put_session(s, b"ahead", expected_version=v2 + 1))
    assert await store.get_session(s) == b"second"
    await store.delete_session(s)
    gone = await _conflict(store.put_session(s, b"late", expected_version=v2))
    assert (gone.version, gone.expected_version) == (0, v2)
    assert await store.get_session(s) is None
    bad = await raised(UsageError, store.put_session(s, b"x", expected_version=-1))
    assert "expected_version" in str(bad)


async def concurrent_session_writes_have_one_winner(store: Store) -> None:
    """Of many concurrent writes based on the same version, exactly one is saved."""
    s = _id("s")
    for expected in (0, 1):
        writes = [
            store.put_session(s, f"turn {n}".encode(), expected_version=expected) for n in range(20)
        ]
        results = await asyncio.gather(*writes, return_exceptions=True)
        won = [n for n, result in enumerate(results) if not isinstance(result, BaseException)]
        assert len(won) == 1, results
        assert results[won[0]] == expected + 1
        lost = [result for n, result in enumerate(results) if n != won[0]]
        assert all(isinstance(result, SessionConflict) for result in lost), lost
        record = await store.get_session_record(s)
        assert record is not None
        assert (record.data, record.version) == (f"turn {won[0]}".encode(), expected + 1)


async def ids_are_independent(store: Store) -> None:
    """A checkpoint and a session may share an id; ids with odd characters work."""
    shared = _id("same") + "/ 'quoted' ; -- %"
    await store.put_checkpoint(shared, b"checkpoint")
    await store.put_session(shared, b"session")
    record = await store.get_checkpoint(shared)
    assert record is not None and record.data == b"checkpoint"
    assert await store.get_session(shared) == b"session"


#: ttls every store refuses: zero, negative, not finite, above `MAX_TTL`, not numbers.
_BAD_TTLS: tuple[Any, ...] = (
    -1,
    0,
    0.0,
    -0.5,
    math.nan,
    math.inf,
    -math.inf,
    MAX_TTL + 1,
    True,
    False,
    "60",
    b"60",
    [60],
)
_GOOD_TTLS: tuple[float | None, ...] = (60, 90.5, float(MAX_TTL), MAX_TTL, None)


async def bad_ttls_are_refused_before_writing(store: Store) -> None:
    """A ttl that is not None or 0 < ttl <= MAX_TTL is a `UsageError`; the record stays."""
    cp, s = _id("cp"), _id("s")
    await store.put_checkpoint(cp, b"kept")
    await store.put_session(s, b"kept")
    for ttl in _BAD_TTLS:
        fresh_cp, fresh_s = _id("cp"), _id("s")
        for put_cp in (cp, fresh_cp):
            err = await raised(UsageError, store.put_checkpoint(put_cp, b"new", ttl=ttl))
            assert "ttl" in str(err) and "None for no expiry" in str(err), err
        for put_s in (s, fresh_s):
            await raised(UsageError, store.put_session(put_s, b"new", ttl=ttl))
            await raised(UsageError, store.put_session(put_s, b"x", ttl=ttl, expected_version=0))
        assert await store.get_checkpoint(fresh_cp) is None
        assert await store.get_session_record(fresh_s) is None
    record = await store.get_checkpoint(cp)
    assert record is not None and (record.data, record.version) == (b"kept", 1)
    assert await store.get_session_record(s) == SessionRecord(session_id=s, data=b"kept", version=1)


async def good_ttls_are_accepted(store: Store) -> None:
    """An int or float 0 < ttl <= MAX_TTL, or None (no expiry), is accepted on every write."""
    for ttl in _GOOD_TTLS:
        cp, s = _id("cp"), _id("s")
        version = await store.put_checkpoint(cp, b"x", ttl=ttl)
        record = await store.get_checkpoint(cp)
        assert record is not None and record.version == version, ttl
        assert await store.put_session(s, b"y", ttl=ttl, expected_version=0) == 1
        assert await store.put_session(s, b"z", ttl=ttl) == 2
        assert await store.get_session(s) == b"z", ttl


def _bad_ids() -> list[Any]:
    """Return ids no store may hold: the same list for every store."""
    return [
        "",
        "a\x00b",
        "tab\there",
        "new\nline",
        "del\x7f",
        "c1 \x85",
        "line\u2028separator",
        "paragraph\u2029separator",
        "lone \udc80 surrogate",
        "\ud83d",
        "x" * (MAX_ID_LENGTH + 1),
        "y" * 1_000_000,
        7,
        None,
        b"bytes",
    ]


def _good_ids() -> list[str]:
    """Return ids every store holds, from one character to exactly `MAX_ID_LENGTH`."""
    unique = uuid.uuid4().hex
    return [
        "é",
        f"café-🙂-{unique}",
        f"日本語 {unique}",
        f"zwj 👩\u200d💻 nbsp\u00a0 {unique}",
        f"{unique} / 'q' \"d\" ; -- % _ \\ * ? [x] {{y}} :z",
        unique + "x" * (MAX_ID_LENGTH - len(unique)),
        unique + "🙂" * (MAX_ID_LENGTH - len(unique)),
    ]


def _calls_with_id(store: Store, record_id: Any) -> list[Callable[[], Awaitable[object]]]:
    """Return a call of every store method, each given `record_id`."""
    return [
        lambda: store.get_checkpoint(record_id),
        lambda: store.put_checkpoint(record_id, b"x"),
        lambda: GuardedStore(store).put_checkpoints([(record_id, b"x", "pending")]),
        lambda: store.claim_checkpoint(record_id, 1),
        lambda: store.delete_checkpoint(record_id),
        lambda: store.get_session(record_id),
        lambda: store.get_session_record(record_id),
        lambda: store.put_session(record_id, b"x"),
        lambda: store.put_session(record_id, b"x", expected_version=0),
        lambda: store.delete_session(record_id),
    ]


async def bad_ids_are_refused_by_every_method(store: Store) -> None:
    """Every method refuses an id no store can hold with a `UsageError` that says what is
    allowed and quotes at most ~200 characters of the id."""
    for bad in _bad_ids():
        for call in _calls_with_id(store, bad):
            err = await raised(UsageError, call)
            assert f"1 to {MAX_ID_LENGTH} characters" in str(err), err
            assert len(str(err)) < 600, len(str(err))


async def good_ids_are_held_by_every_store(store: Store) -> None:
    """Non-ASCII, punctuation, emoji and ids of exactly `MAX_ID_LENGTH` round-trip."""
    for good in _good_ids():
        version = await store.put_checkpoint(good, b"checkpoint")
        record = await store.get_checkpoint(good)
        assert record is not None and (record.checkpoint_id, record.data) == (good, b"checkpoint")
        assert await store.claim_checkpoint(good, version)
        assert await store.put_session(good, b"session", expected_version=0) == 1
        stored = await store.get_session_record(good)
        assert stored == SessionRecord(session_id=good, data=b"session", version=1)
        await store.delete_checkpoint(good)
        await store.delete_session(good)
        assert await store.get_checkpoint(good) is None
        assert await store.get_session(good) is None


def _time_travel_runner(store: Store, **options: Any) -> Any:
    """Return a `Runner` on `store` with `durability="step"` whose agent calls a tool three
    times (the tool reads the session value "unit"), then answers with the results."""
    from plait import ChatModelAgent, Runner, tool
    from plait.testing import FunctionModel, call

    @tool
    def add(ctx: AgentContext, a: int, b: int) -> str:
        """Add two numbers."""
        return f"{a + b}{ctx.session_values.get('unit', '')}"

    def model(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
        results = [m.content for m in messages if m.role == "tool"]
        if len(results) < 3:
            return call("add", {"a": len(results), "b": 1}, id=f"call-{len(results)}")
        return "results: " + ", ".join(results)

    agent = ChatModelAgent("calc", FunctionModel(model), tools=[add])
    return Runner(agent, store=store, durability="step", **options)


async def _run_records(store: Store, checkpoint_id: str, steps: int) -> list[Any]:
    """Return the records of a run: its checkpoint, its history and its step snapshots."""
    ids = [checkpoint_id, f"{checkpoint_id}.history"]
    ids += [f"{checkpoint_id}.step-{n}" for n in range(1, steps + 1)]
    return [await store.get_checkpoint(record_id) for record_id in ids]


async def step_history_is_kept_and_forked(store: Store) -> None:
    """With `durability="step"` a run's steps are kept in the store as its history: listed
    oldest first, forked into a new run (with edited session values) that goes on as the
    original did, the original left as it was, byte for byte."""
    from plait.errors import CheckpointNotFound

    runner = _time_travel_runner(store)
    job = _id("job") + " / 'é'"
    result = await runner.query("go", checkpoint_id=job, session_values={"unit": "m"}).collect()
    assert result.final_output == "results: 1m, 2m, 3m", result.error
    steps = await runner.history(job)
    assert [(s.step, s.agent) for s in steps] == [(1, "calc"), (2, "calc"), (3, "calc")]
    assert steps[0].event is not None and steps[0].session_values == {"unit": "m"}
    before = await _run_records(store, job, 3)
    assert all(record is not None for record in before)
    same = await runner.fork(job, 1).collect()
    assert (same.final_output, same.error) == ("results: 1m, 2m, 3m", None)
    fork = _id("fork")
    edited = await runner.fork(job, 2, fork, {"unit": "km"}).collect()
    assert edited.final_output == "results: 1m, 2m, 3km"
    assert [s.step for s in await runner.history(fork)] == [2, 3]
    assert await _run_records(store, job, 3) == before
    assert await runner.history(_id("unknown")) == []
    try:
        await runner.fork(job, 7).collect()
    except CheckpointNotFound:
        pass
    else:
        raise AssertionError("a fork from a step the run does not keep was not refused")


async def step_history_is_capped_and_expires(store: Store) -> None:
    """Only the last `keep_history` steps are kept (older snapshots are deleted), and the
    history expires with the checkpoint's ttl."""
    capped = _time_travel_runner(store, keep_history=2)
    job = _id("job")
    assert (await capped.query("go", checkpoint_id=job).collect()).error is None
    assert [s.step for s in await capped.history(job)] == [2, 3]
    assert await store.get_checkpoint(f"{job}.step-1") is None
    short = _time_travel_runner(store, checkpoint_ttl=0.3)
    gone = _id("gone")
    assert (await short.query("go", checkpoint_id=gone).collect()).error is None
    await asyncio.sleep(0.7)
    assert await short.history(gone) == []
    assert await _run_records(store, gone, 3) == [None] * 5


async def two_clients_save_one_of_two_turns(first: Store, second: Store) -> None:
    """Two clients of one store (two connections, or two processes' stores) racing to save
    a session at the same version: exactly one write wins, the rest are `SessionConflict`s."""
    version = await first.put_session("s", b"start")
    stores = [first, second] * 10
    writes = [
        store.put_session("s", f"turn {n}".encode(), expected_version=version)
        for n, store in enumerate(stores)
    ]
    results = await asyncio.gather(*writes, return_exceptions=True)
    won = [n for n, result in enumerate(results) if result == version + 1]
    assert len(won) == 1
    assert sum(isinstance(result, SessionConflict) for result in results) == 19
    assert await second.get_session("s") == f"turn {won[0]}".encode()


CHECKS: list[Check] = [
    missing_records_are_none,
    checkpoints_round_trip_with_growing_versions,
    checkpoints_are_written_together,
    claiming_is_compare_and_set,
    concurrent_claims_have_one_winner,
    done_checkpoints_cannot_be_claimed,
    deleting_removes_records,
    records_expire_after_their_ttl,
    sessions_round_trip_and_overwrite,
    sessions_have_versions_from_one,
    creating_a_session_is_compare_and_set,
    stale_session_writes_are_refused,
    concurrent_session_writes_have_one_winner,
    ids_are_independent,
    bad_ttls_are_refused_before_writing,
    good_ttls_are_accepted,
    bad_ids_are_refused_by_every_method,
    good_ids_are_held_by_every_store,
    step_history_is_kept_and_forked,
    step_history_is_capped_and_expires,
    *EFFECT_CHECKS,  # effects and approvals (plait.stores.conformance_effects)
]


# --- faults ----------------------------------------------------------------------------------
# For stores that talk to a server. The caller puts a fault between the store and its server
# (e.g. a proxy that never answers, or drops every connection) before or during these checks.

#: Turns the fault on (True) or off (False).
FaultSwitch = Callable[[bool], Awaitable[None]]


def _operations(store: Store) -> dict[str, Callable[[], Awaitable[object]]]:
    """Return one call of every store operation, by name."""
    cp, s = _id("cp"), _id("s")
    return {
        "get_checkpoint": lambda: store.get_checkpoint(cp),
        "put_checkpoint": lambda: store.put_checkpoint(cp, b"x"),
        "put_checkpoints": lambda: GuardedStore(store).put_checkpoints([(cp, b"x", "pending")]),
        "claim_checkpoint": lambda: store.claim_checkpoint(cp, 1),
        "delete_checkpoint": lambda: store.delete_checkpoint(cp),
        "get_session": lambda: store.get_session(s),
        "get_session_record": lambda: store.get_session_record(s),
        "put_session": lambda: store.put_session(s, b"y"),
        "put_session (compare-and-set)": lambda: store.put_session(s, b"y", expected_version=0),
        "delete_session": lambda: store.delete_session(s),
    }


async def operations_fail_with_store_errors(store: Store, within: float) -> list[StoreError]:
    """With its server out of reach, every operation of `store` raises a `StoreError` within
    `within` seconds; return the errors, one per operation."""
    errors: list[StoreError] = []
    for name, operation in _operations(store).items():
        try:
            async with asyncio.timeout(within):
                await operation()
        except StoreError as exc:
            errors.append(exc)
        except TimeoutError:
            raise AssertionError(f"{name} did not end within {within} s") from None
        else:
            raise AssertionError(f"{name} succeeded with its server out of reach")
    return errors


async def pending_checkpoints_outlive_a_fault(store: Store, fault: FaultSwitch) -> None:
    """A checkpoint written before a fault that keeps requests from the server is, once the
    fault clears, still pending at its version and claimed exactly once: the claims and reads
    tried during the fault raised `StoreError` and changed nothing."""
    cp = _id("cp")
    version = await store.put_checkpoint(cp, b"paused")
    await fault(True)
    try:
        attempts: list[Callable[[], Awaitable[object]]] = [
            lambda: store.claim_checkpoint(cp, version),
            lambda: store.get_checkpoint(cp),
        ]
        for attempt in attempts:
            try:
                outcome = await attempt()
            except StoreError:
                continue
            raise AssertionError(f"the store answered {outcome!r} during the fault")
    finally:
        await fault(False)
    record = await store.get_checkpoint(cp)
    assert record is not None
    assert (record.data, record.version, record.status) == (b"paused", version, "pending")
    claims = await asyncio.gather(*(store.claim_checkpoint(cp, version) for _ in range(8)))
    assert sum(claims) == 1
