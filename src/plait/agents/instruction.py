"""Filling `{key}` placeholders of an agent's instruction from session values."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from plait.errors import UsageError

__all__ = ["fill_instruction", "placeholders"]

# `{{key}}` is an escape for a literal `{key}`; `{key}` is required, `{key?}` optional.
# Braces around anything that is not an identifier (JSON, say) are left alone.
_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*\??)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(\?)?\}")


def fill_instruction(instruction: str, values: Mapping[str, Any], agent_name: str) -> str:
    """Replace `{key}` and `{key?}` with session values; a missing `{key}` is a `UsageError`."""
    if "{" not in instruction:
        return instruction

    def replace(match: re.Match[str]) -> str:
        escaped, key, optional = match.groups()
        if escaped is not None:
            return "{" + escaped + "}"
        if key in values:
            return str(values[key])
        if optional:
            return ""
        raise UsageError(
            f"agent '{agent_name}': the instruction needs session value '{key}', which is not "
            f"set (write '{{{key}?}}' to make it optional)"
        )

    return _PLACEHOLDER.sub(replace, instruction)


def placeholders(instruction: str) -> dict[str, bool]:
    """Return the session values `instruction` names, each with whether it is required
    (`{key}`) rather than optional (`{key?}`); escaped `{{key}}` names none."""
    found: dict[str, bool] = {}
    for escaped, key, optional in _PLACEHOLDER.findall(instruction):
        if not escaped:
            found[key] = found.get(key, False) or not optional
    return found
