"""`record`: a frozen, keyword-only dataclass whose constructor is cheap.

A frozen dataclass sets each field with `object.__setattr__`, one call per field; events and
messages are built on every step of every run, so `record` generates an `__init__` that stores
all fields with a single call instead (`dict_setter`). Everything else is the standard
dataclass: `fields()`, `replace()`, equality, hashing, `repr`, and instances still refuse
attribute assignment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

__all__ = ["dict_setter", "record"]

_T = TypeVar("_T")


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def record(cls: type[_T]) -> type[_T]:
    """Turn `cls` into a frozen, keyword-only dataclass with a fast `__init__`."""
    cls = dataclasses.dataclass(frozen=True, kw_only=True, init=False)(cls)
    namespace: dict[str, Any] = {"_set_dict": dict_setter(cls), "_MISSING": dataclasses.MISSING}
    params: list[str] = []
    items: list[str] = []
    prologue: list[str] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f.name
        if f.default is not dataclasses.MISSING:
            namespace[f"_d_{name}"] = f.default
            params.append(f"{name}=_d_{name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_f_{name}"] = f.default_factory
            params.append(f"{name}=_MISSING")
            prologue.append(f"    if {name} is _MISSING: {name} = _f_{name}()")
        else:
            params.append(name)
        items.append(f"{name!r}: {name}")
    body = [*prologue, f"    _set_dict(self, {{{', '.join(items)}}})"]
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = f"self, *, {', '.join(params)}" if params else "self"
    source = f"def __init__({signature}):\n" + "\n".join(body)
    # `_make`: the same, positional and without defaults, for hot paths inside plait.
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    source += (
        f"\ndef _make({', '.join(names)}):\n    self = _new(_cls)\n"
        f"    _set_dict(self, {{{', '.join(items)}}})\n    return self\n"
    )
    namespace.update(_new=object.__new__, _cls=cls)
    exec(source, namespace)
    cls._make = staticmethod(namespace["_make"])  # type: ignore[attr-defined]
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = f"Create a {cls.__name__}."
    setattr(cls, "__init__", init)  # noqa: B010 - replacing the generated __init__
    return cls


def dict_setter(cls: type) -> Callable[[Any, dict[str, Any]], None]:
    """Return what gives an instance of `cls` its whole `__dict__` in one call: the setter of
    the `__dict__` attribute its instances have (the same as `object.__setattr__(obj,
    "__dict__", d)`, without that call's own argument handling)."""
    for klass in cls.__mro__:
        descriptor = vars(klass).get("__dict__")
        if descriptor is not None and hasattr(descriptor, "__set__"):
            setter: Callable[[Any, dict[str, Any]], None] = descriptor.__set__
            return setter
    raise TypeError(f"instances of {cls.__name__} have no __dict__")
