"""`plait serve --config`: a real server process takes its keys, admin keys and quotas from
a TOML file; a bad file is a usage error naming the field."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from plait.cli import app
from tests.cli.support import ServeProcess, sqlite_url, target

pytest.importorskip("uvicorn")

pytestmark = pytest.mark.timeout(120)

CONFIG = """
admin_keys = ["key-root"]

[api_keys]
"key-alice" = "alice"
"key-root" = "root"

[quotas."alice"]
model_calls_per_day = 1
"""


def test_serve_takes_keys_and_quotas_from_its_config_file(tmp_path: Path) -> None:
    config = tmp_path / "plait.toml"
    config.write_text(CONFIG)
    args = [target("helper"), "--config", str(config), "--store", sqlite_url(tmp_path / "p.db")]
    with ServeProcess(args, tmp_path / "logs") as server:
        assert "API keys required" in server.stderr
        body = {"input": "hello", "stream": False}
        assert httpx.post(f"{server.url}/v1/agents/helper/runs", json=body).status_code == 401
        alice = {"authorization": "Bearer key-alice"}
        root = {"authorization": "Bearer key-root"}
        first = httpx.post(f"{server.url}/v1/agents/helper/runs", json=body, headers=alice)
        assert first.json()["status"] == "completed"
        over = httpx.post(f"{server.url}/v1/agents/helper/runs", json=body, headers=alice)
        assert over.status_code == 429
        assert over.json()["error"]["quota"] == "model_calls_per_day"
        assert httpx.post(f"{server.url}/v1/agents/helper/runs", json=body, headers=root).is_success
        users = httpx.get(f"{server.url}/v1/usage?group_by=user", headers=root).json()
        assert [g["user"] for g in users["groups"]] == ["alice", "root"]


def test_a_bad_config_file_is_a_usage_error_naming_the_field(tmp_path: Path) -> None:
    config = tmp_path / "plait.toml"
    config.write_text('[quotas."alice"]\ntokens_per_day = "many"\n')
    result = CliRunner().invoke(app, ["serve", target("helper"), "--config", str(config)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f'plait: error: {config}: quotas."alice".tokens_per_day: ')
    assert result.stderr.count("\n") == 1


def test_keys_in_both_the_file_and_api_keys_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "plait.toml"
    config.write_text(CONFIG)
    keys = tmp_path / "keys.txt"
    keys.write_text("k1 alice\n")
    args = ["serve", target("helper"), "--config", str(config), "--api-keys", str(keys)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "not both" in result.stderr
