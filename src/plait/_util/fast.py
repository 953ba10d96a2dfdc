"""Cheap forms of two things every run makes: a random hex id, and a pydantic model from
values it already trusts."""

from __future__ import annotations

import os
from typing import Any, TypeVar

__all__ = ["built", "random_hex"]

_M = TypeVar("_M")
_set = object.__setattr__
_random = os.urandom


def random_hex() -> str:
    """Return `uuid.uuid4().hex`: the same 32 hex digits (version 4, RFC 4122 variant),
    made without building a `uuid.UUID`."""
    raw = bytearray(_random(16))
    raw[6] = raw[6] & 0x0F | 0x40
    raw[8] = raw[8] & 0x3F | 0x80
    return raw.hex()


def built(cls: type[_M], values: dict[str, Any]) -> _M:
    """Return `cls.model_construct(**values)` for a pydantic model `cls` given every one of its
    fields, by name and in order: the model's `__dict__` is `values` itself.

    Only for models with no private attributes, no `model_post_init`, no extra fields kept
    and no field aliases: what `model_construct` then does, without its per-field loop.
    """
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model
