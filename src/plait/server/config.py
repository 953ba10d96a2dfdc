"""The server's config file (`plait serve --config plait.toml`): keys, quotas, admin keys and
webhook settings, which never go on the command line.

```toml
admin_keys = ["key-of-root"]           # keys of [api_keys] that see every user's usage
webhook_secret = "a long secret"        # signs webhook bodies
webhook_allow = ["hooks.internal"]     # hosts a webhook may name though not public

[api_keys]
"key-of-alice" = "alice"
"key-of-root" = "root"

[quotas."alice"]
tokens_per_day = 200000
max_concurrent_runs = 2

[quotas."*"]                            # every user without a table of their own
model_calls_per_day = 500
```

Every field is checked when the file is read: an unknown field or a value of the wrong
type is refused with one line naming the file and the field (`plait.toml: quotas."alice".
tokens_per_day: expected an int of 0 or more, got "lots"`), never with a key's value.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from pathlib import Path
from typing import Any

from plait.errors import UsageError
from plait.server.quotas import Quota, check_admin_keys
from plait.server.users import check_api_keys

__all__ = ["ServerConfig", "read_config"]

_TOP = ("admin_keys", "webhook_secret", "webhook_allow", "api_keys", "quotas")
_QUOTA_FIELDS = tuple(field.name for field in dataclasses.fields(Quota))


@dataclasses.dataclass(frozen=True, slots=True)
class ServerConfig:
    """What a config file gives `create_app`."""

    api_keys: dict[str, str] | None = None
    admin_keys: list[str] | None = None
    quotas: dict[str, Quota] = dataclasses.field(default_factory=dict)
    webhook_secret: str | None = None
    webhook_allow: list[str] | None = None


class _Refused(Exception):
    """A field of the file is wrong: `where` names it, `what` says how."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")


def _shown(value: object) -> str:
    """Return a TOML-like rendering of `value` for a message (cut short)."""
    if isinstance(value, str):
        text = f'"{value}"'
    elif isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, dict):
        text = "a table"
    elif isinstance(value, list):
        text = "an array"
    else:
        text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _Refused(where, f"expected an array of strings, got {_shown(value)}")
    return list(value)


def _quota(table: object, where: str) -> Quota:
    if not isinstance(table, dict):
        raise _Refused(where, f"expected a table of Quota fields, got {_shown(table)}")
    for name, value in table.items():
        at = f"{where}.{name}"
        if name not in _QUOTA_FIELDS:
            raise _Refused(at, f"unknown field; a quota has {', '.join(_QUOTA_FIELDS)}")
        if name == "cost_per_day":
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not math.isfinite(value) or value < 0:
                raise _Refused(at, f"expected a number of 0 or more (dollars), got {_shown(value)}")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _Refused(at, f"expected an int of 0 or more, got {_shown(value)}")
    return Quota(**table)


def _api_keys(table: object) -> dict[str, str]:
    if not isinstance(table, dict):
        raise _Refused("api_keys", f'expected a table of "<key>" = "<user>", got {_shown(table)}')
    for number, user in enumerate(table.values(), 1):
        where = f"api_keys (entry {number})"  # never the key itself
        if not isinstance(user, str):
            raise _Refused(where, f"expected a user id (a string), got {_shown(user)}")
        try:
            check_api_keys({"k": user})
        except UsageError as exc:
            raise _Refused(where, exc.message) from None
    return {str(key): str(user) for key, user in table.items()}


def _parse(data: dict[str, Any]) -> ServerConfig:
    for name in data:
        if name not in _TOP:
            raise _Refused(name, f"unknown field; the file has {', '.join(_TOP)}")
    keys = _api_keys(data["api_keys"]) if "api_keys" in data else None
    admins = _strings(data["admin_keys"], "admin_keys") if "admin_keys" in data else None
    try:
        check_api_keys(keys)
        check_admin_keys(admins, keys)
    except UsageError as exc:
        field = "admin_keys" if "admin" in exc.message else "api_keys"
        raise _Refused(field, exc.message) from None
    quotas = data.get("quotas", {})
    if not isinstance(quotas, dict):
        raise _Refused("quotas", f'expected tables [quotas."<user>"], got {_shown(quotas)}')
    secret = data.get("webhook_secret")
    if secret is not None and (not isinstance(secret, str) or not secret):
        raise _Refused("webhook_secret", f"expected a non-empty string, got {_shown(secret)}")
    allow = data.get("webhook_allow")
    return ServerConfig(
        api_keys=keys,
        admin_keys=admins,
        quotas={user: _quota(q, f'quotas."{user}"') for user, q in quotas.items()},
        webhook_secret=secret,
        webhook_allow=None if allow is None else _strings(allow, "webhook_allow"),
    )


def read_config(path: str | Path) -> ServerConfig:
    """Read and check the config file at `path` (see the module docstring).

    Raises:
        UsageError: The file cannot be read, is not TOML, or has an unknown field or a
            value of the wrong type; the message is one line naming the file and the field.
    """
    shown = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{shown}: cannot read it ({reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{shown}: not TOML ({exc})") from None
    try:
        return _parse(data)
    except _Refused as exc:
        raise UsageError(f"{shown}: {exc}") from None
