"""The server's config file: a good file gives `create_app` its keys, admin keys, quotas
and webhook settings; each kind of bad field is refused in one line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait.errors import UsageError
from plait.server import Quota
from plait.server.config import ServerConfig, read_config

GOOD = """
admin_keys = ["key-root"]
webhook_secret = "s3cret"
webhook_allow = ["127.0.0.1"]

[api_keys]
"key-alice" = "alice"
"key-root" = "root"

[quotas."alice"]
tokens_per_day = 1000
model_calls_per_day = 10
cost_per_day = 2.5
runs_per_minute = 5
max_concurrent_runs = 2
max_queued_runs = 3

[quotas."*"]
cost_per_day = 1
"""


def _read(tmp_path: Path, text: str) -> ServerConfig:
    path = tmp_path / "plait.toml"
    path.write_text(text)
    return read_config(path)


def test_a_good_file_gives_every_setting(tmp_path: Path) -> None:
    config = _read(tmp_path, GOOD)
    assert config.api_keys == {"key-alice": "alice", "key-root": "root"}
    assert config.admin_keys == ["key-root"]
    assert config.webhook_secret == "s3cret"
    assert config.webhook_allow == ["127.0.0.1"]
    assert config.quotas == {
        "alice": Quota(
            tokens_per_day=1000,
            model_calls_per_day=10,
            cost_per_day=2.5,
            runs_per_minute=5,
            max_concurrent_runs=2,
            max_queued_runs=3,
        ),
        "*": Quota(cost_per_day=1),
    }
    assert _read(tmp_path, "") == ServerConfig()


BAD = [
    ('tokens = 3\n', "tokens: unknown field"),
    ('[quotas."alice"]\ntokens_per_week = 3\n', '"alice".tokens_per_week: unknown field'),
    ('[quotas."alice"]\ntokens_per_day = "lots"\n', '"alice".tokens_per_day: expected an int'),
    ('[quotas."alice"]\nruns_per_minute = 1.5\n', '"alice".runs_per_minute: expected an int'),
    ('[quotas."alice"]\nmax_concurrent_runs = true\n', "max_concurrent_runs: expected an int"),
    ('[quotas."bob"]\ncost_per_day = -1\n', 'quotas."bob".cost_per_day: expected a number'),
    ('quotas = 3\n', "quotas: expected tables"),
    ('[quotas]\nalice = 3\n', 'quotas."alice": expected a table'),
    ('admin_keys = "key-root"\n', "admin_keys: expected an array of strings"),
    ('admin_keys = ["key-x"]\n[api_keys]\n"key-a" = "a"\n', "admin_keys: every admin key"),
    ('[api_keys]\n"key-secret" = 7\n', "api_keys (entry 1): expected a user id"),
    ('[api_keys]\n"key-secret" = "a/b"\n', "api_keys (entry 1): user id 'a/b'"),
    ('webhook_secret = 5\n', "webhook_secret: expected a non-empty string"),
    ('webhook_allow = [1]\n', "webhook_allow: expected an array of strings"),
    ('[quotas\n', "not TOML"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), BAD)
def test_a_bad_field_is_refused_in_one_line_naming_it(
    tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises(UsageError) as caught:
        _read(tmp_path, text)
    message = caught.value.message
    assert message.startswith(f"{tmp_path / 'plait.toml'}: "), message
    assert expected in message, message
    assert "\n" not in message
    assert "key-secret" not in message  # a key is never shown


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read it"):
        read_config(tmp_path / "nope.toml")
