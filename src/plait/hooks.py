"""Hooks that act (`plait.Hooks`, `plait.ModelRequest`): the public face of
`plait.core.hooks`, where the seams and their chain live."""

from plait.core.hooks import (
    NO_HOOKS,
    HookChain,
    Hooks,
    ModelRequest,
    add_global,
    call_hook,
    concurrently,
    end_run,
    ends_run,
    notify,
    remove_global,
    with_global,
)

__all__ = [
    "NO_HOOKS",
    "HookChain",
    "Hooks",
    "ModelRequest",
    "add_global",
    "call_hook",
    "concurrently",
    "end_run",
    "ends_run",
    "notify",
    "remove_global",
    "with_global",
]
