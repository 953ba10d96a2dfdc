"""The hook that keeps a run of a server's user in the ledger and within the daily budgets.

`LedgerHooks` is one of the hooks of every run the server starts (`plait.server.runs`, and
the A2A routes), written on the public seams only (`plait.Hooks`, `plait.HookContext`):

- `before_model`: under a daily budget, the call reserves its share of the day
  (`Ledger.reserve`). While calls in flight could leave it room, it waits for them; once the
  budget is spent, the run stops here (`ctx.stop`) with `QuotaExceeded` and a checkpoint
  that `resume` continues after the window: the call is made then.
- `wrap_model`: the call's row is written to the ledger once it has answered (priced by
  `plait.models.pricing`), settling its reservation; a call that fails gives it back.
- `before_run` / `after_run` (for the routes without `Runs`' admission, A2A): the run is
  admitted (`Tenants.admit`, `QuotaExceeded` ends it) and its place freed at its end.

A user without a daily budget has nothing to reserve and no totals to keep: `ledger_hooks`
gives such a run `UsageHooks`, which makes each call's row in `after_model` (the same row,
under the same key) and keeps it with the run (`keep_run_value`: saved with the run's step
checkpoints, so a run resumed elsewhere still has it), and writes the run's rows in one
write as the run ends, pauses or fails (`after_run`); the call itself is made as if no
hook surrounded it.

Each row is keyed by the run id, the run's count of model calls before it (saved with the
run's checkpoints) and the place of the agent in the run, so a call replayed from a
checkpoint, here or on another worker, is one row.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime

from plait._util.clock import iso
from plait.capabilities.limits import estimate_tokens
from plait.core.agent import AgentInput
from plait.core.agent_context import HookContext
from plait.core.hooks import Hooks, ModelRequest
from plait.errors import PlaitError, QuotaExceeded
from plait.events import RunResult
from plait.messages import Message, Usage
from plait.models.pricing import model_spec, price
from plait.server.ledger import Hold, Row, day_of, seconds_to_next_day
from plait.server.quotas import Tenants, Ticket, refusal

__all__ = ["LedgerHooks", "UsageHooks", "ledger_hooks"]

_log = logging.getLogger("plait.server")
_RUN_KEY = "plait.ledger.run_id"
_CALL = "plait.ledger.call"
_LISTED = "plait.ledger.listed"
_ROWS = "plait.ledger.rows"  # a run's rows not written yet (a user without budgets)
_WAIT = 0.25  # seconds between two looks at the day while calls in flight hold it
_RELEASING: set[asyncio.Future[None]] = set()  # releases of failed calls under way
_NO_USAGE = Usage()  # a reply's usage when it reports none


@dataclasses.dataclass(eq=False)
class _Ledgered(Hooks):
    """What the ledger's hooks share: the run's id, its admission, writing a call's row."""

    tenants: Tenants
    user: str
    agent: str
    _: dataclasses.KW_ONLY
    run_id: str | None = None
    admit: bool = False
    _ticket: Ticket | None = dataclasses.field(default=None, init=False)

    async def before_run(self, ctx: HookContext, input: AgentInput) -> None:
        """Fix the run's id for its rows; admit the run when this hook admits."""
        if self.run_id is None:
            kept = ctx.run_value(_RUN_KEY)
            self.run_id = kept if isinstance(kept, str) else ctx.checkpoint_id or uuid.uuid4().hex
        ctx.keep_run_value(_RUN_KEY, self.run_id)
        if self.admit:
            self._ticket = await self.tenants.admit(self.user)

    async def after_run(self, ctx: HookContext, result: RunResult) -> None:
        """Give back what the run still holds: its place, a call it did not make."""
        for key in [k for k in ctx.extras if k.startswith(_CALL)]:
            await self._release(ctx.extras.pop(key)[1])
        await self._give_back()

    async def _give_back(self) -> None:
        """Free the run's place, when this hook admitted it."""
        ticket, self._ticket = self._ticket, None
        if ticket is not None:
            await ticket.release()

    async def _list(self, ctx: HookContext) -> None:
        """List the run among today's runs of the user (once a day): its rows are read
        from there."""
        now = self.tenants.clock()
        listed = f"{_LISTED}:{day_of(now)}"
        if listed not in ctx.extras:
            await self.tenants.ledger.list_run(self.user, self.run_id or "", now)
            ctx.extras[listed] = True

    async def _record(
        self, ctx: HookContext, key: str, hold: Hold | None, usage: Usage, *, count: bool = True
    ) -> None:
        now = self.tenants.clock()
        try:
            cost, priced = price(ctx.model, usage, at=now)
        except PlaitError:  # the model's own `price` is broken: the run fails with it
            await self._release(hold)
            raise
        row = Row(
            user=self.user,
            agent=self.agent,
            model=model_spec(ctx.model),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost=cost,
            priced=priced,
            run_id=self.run_id or "",
            time=now,
        )
        try:
            listed = f"{_LISTED}:{day_of(now)}" in ctx.extras
            await self.tenants.ledger.settle(key, row, hold, listed=listed, count=count)
        except PlaitError as exc:  # the run goes on; the reservation lapses
            _log.warning("could not record a model call of run %s: %s", self.run_id, exc)

    async def _release(self, hold: Hold | None) -> None:
        if hold is None:
            return
        with contextlib.suppress(PlaitError):  # it lapses on its own
            await self.tenants.ledger.release(self.user, hold)


@dataclasses.dataclass(eq=False)
class LedgerHooks(_Ledgered):
    """Records the model calls of one run of `user`'s agent `agent` (its public name) and
    holds them to the user's daily budgets (see the module docstring)."""

    async def before_model(self, ctx: HookContext, request: ModelRequest) -> None:
        """Reserve the call's share of the day, wait for room, or stop the run."""
        place = f"{_CALL}:{ctx.address}"
        stale = ctx.extras.pop(place, None)
        if stale is not None:  # a call reserved but never made (another hook paused)
            await self._release(stale[1])
        key = f"{ctx.requests + 1}:{ctx.address}"
        quota = self.tenants.quota(self.user)
        if quota is None or not quota.budgets.any:
            await self._list(ctx)
            ctx.extras[place] = (key, None)
            return
        estimate = await estimate_tokens(request.messages, ctx.model)
        while True:
            now = self.tenants.clock()
            decided = await self.tenants.ledger.reserve(
                self.user, self.run_id or "", quota.budgets, estimate, now
            )
            if decided.go:  # its run is listed in the day
                ctx.extras[place] = (key, decided.hold)
                ctx.extras[f"{_LISTED}:{day_of(now)}"] = True
                return
            if decided.refused is not None:
                ctx.stop(self._over(*decided.refused, now))
                return
            if ctx.cancelled:
                return  # the run stops anyway (the call is not made)
            await asyncio.sleep(_WAIT)

    def _over(self, name: str, limit: float, now: datetime) -> QuotaExceeded:
        return refusal(
            name,
            limit,
            seconds_to_next_day(now),
            f"agent '{self.agent}' stopped before a model call: user '{self.user}' has no "
            f"room left in today's {name} (resume the run's checkpoint after the window)",
        )

    async def wrap_model(
        self,
        ctx: HookContext,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], Awaitable[Message]],
    ) -> Message:
        """Make the call; write its row (settling its reservation), or give it back."""
        key, hold = ctx.extras.pop(f"{_CALL}:{ctx.address}", (None, None))
        try:
            reply = await call_next(request)
        except BaseException:
            if hold is not None:  # the release must not be lost with a cancelled task
                _RELEASING.add(release := asyncio.ensure_future(self._release(hold)))
                release.add_done_callback(_RELEASING.discard)
            raise
        if key is not None:
            await self._record(ctx, key, hold, reply.usage or _NO_USAGE)
        return reply


@dataclasses.dataclass(eq=False)
class UsageHooks(_Ledgered):
    """`LedgerHooks` for a user without daily budgets: each call's row is made once it has
    answered (`after_model`) and kept with the run (saved with its step checkpoints), and
    the run's rows are written together in one write as the run ends or pauses
    (`after_run`), with no reservation to make or give back and no day's totals to count
    them in (`plait.server.ledger`)."""

    async def after_model(
        self, ctx: HookContext, request: ModelRequest, reply: Message
    ) -> Message | None:
        """Price the call and keep its row with the run; keep the reply."""
        now = self.tenants.clock()
        usage = reply.usage or _NO_USAGE
        model = ctx.model
        cost, priced = price(model, usage, at=now)  # a broken `price` fails the run
        key = f"{ctx.requests}:{ctx.address}"
        row = [
            iso(now),
            self.agent,
            model_spec(model),
            usage.input_tokens,
            usage.output_tokens,
            cost,
            priced,
        ]
        rows = ctx.run_value(_ROWS)
        if isinstance(rows, dict):
            # the value kept itself, plain JSON as a row is: the run's next checkpoint saves
            # it as it now is (nothing to encode again)
            rows[key] = row
        else:
            ctx.keep_run_value(_ROWS, {key: row})
        return None

    async def after_run(self, ctx: HookContext, result: RunResult) -> None:
        """Write the run's rows (those the ledger has already are left as they are); give
        back the run's place."""
        try:
            rows = ctx.run_value(_ROWS)
            if isinstance(rows, dict) and rows:
                await self.tenants.ledger.add_rows(self.user, self.run_id or "", rows)
        except PlaitError as exc:  # the run's result stands; its rows are missing
            _log.warning("could not record the model calls of run %s: %s", self.run_id, exc)
        await self._give_back()  # (no call of this hook ever reserves)


@dataclasses.dataclass(eq=False)
class _KnownRunUsageHooks(UsageHooks):
    """`UsageHooks` for a run whose id its caller gives on every leg and that the caller
    admits itself (the server's `Runs`): nothing to do before the run, so no `before_run`
    (its id needs no keeping with the run)."""

    before_run = Hooks.before_run


def ledger_hooks(
    tenants: Tenants, user: str, agent: str, *, run_id: str | None = None, admit: bool = False
) -> LedgerHooks | UsageHooks:
    """Return the hook that keeps a run of `user`'s agent `agent` in the ledger:
    `LedgerHooks` under a daily budget, else `UsageHooks` (see the module docstring)."""
    quota = tenants.quota(user)
    if quota is not None and quota.budgets.any:
        return LedgerHooks(tenants, user, agent, run_id=run_id, admit=admit)
    if run_id is not None and not admit:
        return _KnownRunUsageHooks(tenants, user, agent, run_id=run_id)
    return UsageHooks(tenants, user, agent, run_id=run_id, admit=admit)
