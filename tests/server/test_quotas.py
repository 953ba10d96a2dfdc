"""Per-user quotas over HTTP: each daily budget stops a run before the call that would pass
it (with a checkpoint that goes on after the window), a spent day is `429`, and only the
user over a quota is held."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plait.server import Quota, create_app
from plait.stores import SqliteStore
from tests.server.quota_support import Clock, make_quota_agents, run
from tests.server.support import ServerThread, client

pytestmark = pytest.mark.timeout(60)

KEYS = {"key-alice": "alice", "key-bob": "bob"}
NOON_TO_MIDNIGHT = 12 * 3600


@dataclass
class Served:
    """A server with quotas, its clock, and what the tools did."""

    url: str
    clock: Clock
    steps: list[int]


Serve = Callable[[dict[str, Quota]], Served]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """Return a function that starts a server with the given quotas (stopped at the end)."""
    with contextlib.ExitStack() as stack:

        def start(quotas: dict[str, Quota]) -> Served:
            clock, steps = Clock(), []
            app = create_app(
                make_quota_agents(steps),
                store=SqliteStore(tmp_path / "plait.db"),
                api_keys=KEYS,
                quotas=quotas,
                clock=clock,
            )
            running = stack.enter_context(ServerThread(app))
            return Served(running.url, clock, steps)

        yield start


BUDGETS = [
    ("stepper", Quota(tokens_per_day=40), "tokens_per_day"),  # 15 a call: 2 fit, a third not
    ("stepper", Quota(model_calls_per_day=2), "model_calls_per_day"),
    ("priced", Quota(cost_per_day=0.025), "cost_per_day"),  # 0.01 a call
]


@pytest.mark.parametrize(("agent", "quota", "name"), BUDGETS, ids=[b[2] for b in BUDGETS])
def test_a_daily_budget_stops_the_run_before_the_call_that_would_pass_it(
    serve: Serve, agent: str, quota: Quota, name: str
) -> None:
    served = serve({"alice": quota})
    with client(served.url, "key-alice") as alice, client(served.url, "key-bob") as bob:
        stopped = run(alice, agent).json()
        assert stopped["status"] == "failed"
        assert stopped["error"]["type"] == "QuotaExceeded"
        assert name in stopped["error"]["message"]
        assert stopped["checkpoint_id"] is not None
        assert served.steps == [1, 2]  # two calls made, each asked for a step; not a third
        assert stopped["usage"] == {"input_tokens": 20, "output_tokens": 10}

        refused = run(alice, agent)  # the day has no room: a new run does not start
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == str(NOON_TO_MIDNIGHT)
        error = refused.json()["error"]
        assert error["type"] == "quota_exceeded"
        assert (error["quota"], error["retry_after"]) == (name, NOON_TO_MIDNIGHT)

        assert run(bob, agent).json()["status"] == "completed"  # bob has no quota

        served.clock.next_day()
        resumed = alice.post(
            f"/v1/runs/{stopped['checkpoint_id']}/resume", json={"targets": {}, "stream": False}
        ).json()
        assert resumed["status"] == "completed", resumed
        assert resumed["final_output"] == "finished"
        # bob's run made steps 1-3; alice's resumed run made only its third
        assert served.steps == [1, 2, 1, 2, 3, 3]


def test_the_star_quota_holds_every_user_without_their_own(serve: Serve) -> None:
    served = serve({"*": Quota(model_calls_per_day=1), "bob": Quota()})
    with client(served.url, "key-alice") as alice, client(served.url, "key-bob") as bob:
        assert run(alice, "echo").json()["status"] == "completed"
        assert run(alice, "echo").status_code == 429
        for _ in range(3):
            assert run(bob, "echo").json()["status"] == "completed"


def test_runs_per_minute_refuses_the_run_past_it_until_the_minute_has_passed(
    serve: Serve,
) -> None:
    served = serve({"alice": Quota(runs_per_minute=2)})
    with client(served.url, "key-alice") as alice, client(served.url, "key-bob") as bob:
        assert run(alice, "echo").status_code == 200
        served.clock.advance(seconds=20)
        assert run(alice, "echo").status_code == 200
        refused = run(alice, "echo")
        assert refused.status_code == 429
        assert refused.json()["error"]["quota"] == "runs_per_minute"
        assert refused.headers["retry-after"] == "40"  # when the first start leaves the minute
        assert run(bob, "echo").status_code == 200
        served.clock.advance(seconds=41)
        assert run(alice, "echo").status_code == 200


def test_bad_quotas_are_refused() -> None:
    from plait.errors import UsageError

    with pytest.raises(UsageError, match="tokens_per_day"):
        Quota(tokens_per_day=-1)
    with pytest.raises(UsageError, match="cost_per_day"):
        Quota(cost_per_day=float("nan"))
    with pytest.raises(UsageError, match="runs_per_minute"):
        Quota(runs_per_minute=True)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="Quota"):
        create_app(make_quota_agents([]), store=SqliteStore(":memory:"), quotas={"a": 3})  # type: ignore[dict-item]
    with pytest.raises(UsageError, match="admin key"):
        create_app(make_quota_agents([]), api_keys=KEYS, admin_keys=["nope"])
