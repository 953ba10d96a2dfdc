"""What `ctx.save_state` keeps: an agent's own values, encoded at once, saved with the run.

Values are kept as plain JSON (dicts, lists, strings, numbers, booleans, None), so what
`load_state` returns after a resume in another process is exactly what it returns before
the pause. A pydantic model is kept with its class (`module:qualname`) and comes back as
that class, looked up among the modules already imported (plait never imports a module
named by a checkpoint).
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from plait._util.fast import built
from plait._util.json import dump_plain, to_json
from plait.core.checkpoint import CustomRecord
from plait.core.run_state import RunState
from plait.errors import CheckpointCorrupt, SerializationError, UsageError

__all__ = ["CustomRecord", "custom_record", "load_custom", "save_custom"]

_SCALARS = (str, int, bool)  # values that are plain JSON as they are


def custom_record(run: RunState, address: str) -> CustomRecord:
    """Return the values kept at `address` (restored from the checkpoint on a resume, else
    new); from now on every save of the run includes them."""
    record = run.frames.get((address, "custom"))
    if record is None:
        restored = run.restored.pop((address, "custom"), None)
        if isinstance(restored, CustomRecord):
            record = restored
        else:  # every field, valid as given: no validation to run
            record = built(CustomRecord, {"kind": "custom", "values": {}, "models": {}})
        run.frames[(address, "custom")] = record
    return record


def save_custom(record: CustomRecord, key: str, value: Any) -> None:
    """Encode `value` and keep it under `key` in `record`.

    Raises:
        UsageError: `key` is not a non-empty str.
        SerializationError: `value` cannot be encoded; `path` names the key and the place
            inside the value, e.g. `state['thing']['f']`.
    """
    if not isinstance(key, str) or not key:
        raise UsageError(f"save_state takes a non-empty str key, got {key!r}")
    if value is None or type(value) in _SCALARS:  # its own JSON: nothing to encode
        record.models.pop(key, None)
        record.values[key] = value
        return
    root = f"state[{key!r}]"
    try:
        plain = dump_plain(value, type(value) if isinstance(value, BaseModel) else Any)
    except (PydanticSerializationError, ValueError, TypeError):
        to_json(value, Any, root=root)  # raises the SerializationError naming the place
        raise SerializationError(f"cannot encode {root} as JSON", path=root) from None
    if isinstance(value, BaseModel):
        cls = type(value)
        record.models[key] = f"{cls.__module__}:{cls.__qualname__}"
    else:
        record.models.pop(key, None)
    record.values[key] = plain


def load_custom(record: CustomRecord, key: str) -> Any:
    """Return the value kept under `key`, or None (a pydantic model as its own class).

    Raises:
        CheckpointCorrupt: The value names a model class that is not loaded or not a model.
    """
    if key not in record.values:
        return None
    value = record.values[key]
    where = record.models.get(key)
    if where is None:
        return value
    return _model(where).model_validate(value)


def _model(where: str) -> type[BaseModel]:
    module_name, _, qualname = where.partition(":")
    found: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if not (isinstance(found, type) and issubclass(found, BaseModel)):
        raise CheckpointCorrupt(
            f"saved state names the model {where!r}, which is not a loaded pydantic model; "
            "import its module before resuming"
        )
    return found
