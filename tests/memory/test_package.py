"""plait.memory is reachable from plait, loads its backends on first use, and remembers a
structured answer as JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

import plait
from plait import ChatModelAgent, Runner
from plait.memory import MemoryService, SqliteMemoryService, save_turns
from plait.testing import ScriptedModel, call


def test_the_package_is_an_attribute_of_plait_with_lazy_backends() -> None:
    assert plait.memory.SqliteMemoryService is SqliteMemoryService
    assert plait.memory.PostgresMemoryService.__name__ == "PostgresMemoryService"
    assert isinstance(SqliteMemoryService("unused.db"), MemoryService)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = plait.memory.Nope


class Order(BaseModel):
    """An order."""

    item: str
    quantity: int


async def test_a_structured_answer_is_remembered_as_json(tmp_path: Path) -> None:
    async with SqliteMemoryService(tmp_path / "memory.db") as service:
        model = ScriptedModel([call("final_result", {"item": "tea", "quantity": 2})])
        agent = ChatModelAgent("orders", model, output_type=Order)
        runner = Runner(agent, after_run=[save_turns(service)])
        result = await runner.query("Two teas", session_values={"user_id": "u"}).collect()
        assert result.final_output == Order(item="tea", quantity=2)
        [item] = await service.search("u", "tea")
        assert item.text == 'user: Two teas\nassistant: {"item":"tea","quantity":2}'
