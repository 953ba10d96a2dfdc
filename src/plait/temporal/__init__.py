"""Durable execution on Temporal: each plait run a Temporal workflow, each model call and
tool call an activity (extra `temporal`).

```python
from temporalio.client import Client
from plait import temporal

client = await Client.connect("localhost:7233")
async with temporal.worker(client, [agent]):            # in each worker process
    handle = await temporal.start(client, agent.name, "hello")   # anywhere
    result = await handle.result()                      # the RunResult
```

- `worker(client, agents, *, task_queue="plait", activity_options=None)`: a
  `temporalio.worker.Worker` running `PlaitWorkflow` and the activities of `agents`.
- `start(client, agent_name, input, *, workflow_id=None, task_queue="plait")`: start a run;
  returns its `WorkflowHandle` (`await handle.result()` is the `RunResult`).
- The `events` query: `await handle.query("events")`, the events so far as JSON objects.
- `resume(handle, targets=None, *, value=...)`: answer a paused run's interrupts (the
  `resume` update); a rejected resume raises `ResumeError` and the run keeps waiting.
- `replayer(agents, *, activity_options=None)`: replay a run's history with the agents as
  built now; a change that breaks it raises `WorkflowNondeterminism` naming the workflow.

See docs/temporal.md.
"""

from __future__ import annotations

try:
    import temporalio  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    from plait.errors import UsageError

    raise UsageError(
        'plait.temporal needs the temporalio package: pip install "plait[temporal]"'
    ) from exc

from plait.temporal._client import ActivityOptions, RunHandle, replayer, resume, start, worker
from plait.temporal._converter import PlaitPayloadConverter, data_converter
from plait.temporal._workflow import PlaitWorkflow, WorkflowIds

__all__ = [
    "ActivityOptions",
    "PlaitPayloadConverter",
    "PlaitWorkflow",
    "RunHandle",
    "WorkflowIds",
    "data_converter",
    "replayer",
    "resume",
    "start",
    "worker",
]
