"""deep_agent(): todos, task delegation and file tools (Eino scenarios 46-47)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from plait import ChatModelAgent, Runner, tool
from plait.errors import UsageError
from plait.models import OpenAIModel
from plait.prebuilt import DirectoryBackend, MemoryBackend, deep_agent, filesystem
from plait.prebuilt.deep import TODOS_KEY
from plait.testing import ScriptedModel, call, reply


def _run(agent: ChatModelAgent, text: str = "q") -> tuple[object, dict[str, object]]:
    async def main() -> tuple[object, dict[str, object]]:
        stream = Runner(agent).query(text, session_values={"shared": "from parent"})
        return await stream.collect(), stream.context.session_values

    return asyncio.run(main())


def test_task_dispatches_to_the_named_sub_agent() -> None:
    spy_model = ScriptedModel([reply("spy report")])
    spy = ChatModelAgent("spy", spy_model, description="Finds things out", instruction="{shared}")
    model = ScriptedModel(
        [call("task", {"subagent_type": "spy", "description": "from_parent"}), reply("done")]
    )
    agent = deep_agent("deep", model, sub_agents=[spy])
    result, _ = _run(agent)
    assert result.final_output == "done"  # type: ignore[attr-defined]
    assert [m.content for m in spy_model.requests[0].messages] == ["from parent", "from_parent"]
    task_result = [e for e in result.events if e.message and e.message.tool_name == "task"]  # type: ignore[attr-defined]
    assert task_result[0].message.message.content == "spy report"
    info = next(t for t in agent.tools if t.name == "task")
    assert info.parameters["properties"]["subagent_type"]["enum"] == ["general-purpose", "spy"]


def test_an_unknown_sub_agent_type_is_told_to_the_model() -> None:
    model = ScriptedModel(
        [call("task", {"subagent_type": "ghost", "description": "x"}), reply("ok")]
    )
    result, _ = _run(
        deep_agent(
            "deep",
            model,
            general_purpose=False,
            sub_agents=[ChatModelAgent("real", ScriptedModel([]))],
        )
    )
    text = result.events[1].message.message.content  # type: ignore[attr-defined]
    assert "subagent type 'ghost' not found; the types are: real" in text
    assert result.final_output == "ok"  # type: ignore[attr-defined]


def test_write_todos_updates_the_list_in_the_session() -> None:
    todos = [{"content": "c1", "activeForm": "", "status": "pending"}]
    model = ScriptedModel([call("write_todos", {"todos": todos}), reply("planned")])
    result, values = _run(deep_agent("deep", model))
    text = result.events[1].message.message.content  # type: ignore[attr-defined]
    assert text == f"Updated todo list to {json.dumps(todos)}"
    assert values[TODOS_KEY] == todos


def test_file_tools_work_in_the_workspace_and_refuse_to_leave_it(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("top secret")
    model = ScriptedModel(
        [
            call("write_file", {"file_path": "notes/a.md", "content": "hello"}),
            call("read_file", {"file_path": "../secret.txt"}),
            call("read_file", {"file_path": str(tmp_path / "secret.txt")}),
            reply("done"),
        ]
    )
    result, _ = _run(deep_agent("deep", model, backend=DirectoryBackend(root)))
    texts = [
        e.message.message.content for e in result.events if e.message and e.message.role == "tool"
    ]  # type: ignore[attr-defined]
    assert (root / "notes" / "a.md").read_text() == "hello"
    assert texts[1].startswith("Error:") and "top secret" not in texts[1]
    assert texts[2].startswith("Error:") and "top secret" not in texts[2]


def test_file_tool_errors_never_show_where_the_workspace_is(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (root / "away").symlink_to(tmp_path / "elsewhere")
    long = "n" * 300
    model = ScriptedModel(
        [
            call("read_file", {"file_path": long}),
            call("write_file", {"file_path": f"notes/{long}.md", "content": "x"}),
            call("write_file", {"file_path": "away/x.md", "content": "x"}),
            call("ls", {"path": "away"}),
            call("read_file", {"file_path": "notes"}),
            reply("done"),
        ]
    )
    result, _ = _run(deep_agent("deep", model, backend=DirectoryBackend(root)))
    texts = [
        e.message.message.content for e in result.events if e.message and e.message.role == "tool"
    ]  # type: ignore[attr-defined]
    assert len(texts) == 5 and all(text.startswith("Error:") for text in texts)
    assert [text for text in texts if str(tmp_path) in text] == []
    assert f"File name too long: '/{long}'" in texts[0]
    assert f"File name too long: '/notes/{long}.md'" in texts[1]
    assert "path '/away/x.md' leads outside the root through a symlink" in texts[2]
    assert texts[4].endswith("/notes is not a file")


def test_file_limits_bound_the_file_tools_of_the_agent_and_its_sub_agent() -> None:
    backend = MemoryBackend({"wide.txt": "x" * 50})
    model = ScriptedModel(
        [
            call("read_file", {"file_path": "wide.txt"}),
            call("task", {"subagent_type": "general-purpose", "description": "read it"}),
            call("read_file", {"file_path": "wide.txt"}),
            reply("read"),
            reply("done"),
        ]
    )
    agent = deep_agent(
        "deep", model, backend=backend, file_limits=filesystem.FileLimits(max_line_chars=10)
    )
    result, _ = _run(agent)
    texts = [
        e.message.message.content for e in result.events if e.message and e.message.role == "tool"
    ]  # type: ignore[attr-defined]
    cut = "     1\txxxxxxxxxx [line truncated: only its first 10 characters are shown"
    assert texts[0].startswith(cut)
    assert texts[1].startswith(cut)  # the sub-agent's read


def test_the_general_purpose_sub_agent_shares_the_file_workspace() -> None:
    backend = MemoryBackend()
    model = ScriptedModel(
        [
            call("task", {"subagent_type": "general-purpose", "description": "write it"}),
            call("write_file", {"file_path": "/out.txt", "content": "from the sub-agent"}),
            reply("written"),
            reply("all done"),
        ]
    )
    result, _ = _run(deep_agent("deep", model, backend=backend))
    assert result.final_output == "all done"  # type: ignore[attr-defined]
    assert backend.read("/out.txt") == "from the sub-agent"


def test_a_spec_string_is_built_into_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy")
    agent = deep_agent("deep", "openai:gpt-4o-mini")
    assert isinstance(agent.model, OpenAIModel) and agent.model.model == "gpt-4o-mini"


def test_what_is_not_a_model_names_the_deep_agent() -> None:
    with pytest.raises(UsageError, match=r"^agent 'deep' needs a model"):
        deep_agent("deep", 7)  # type: ignore[arg-type]


@tool
def _lookup(query: str) -> str:
    """Look something up.

    Args:
        query: What to look up.
    """
    return query


@pytest.mark.parametrize(
    ("given", "shown"), [(None, "None"), ("spy", "'spy'"), (_lookup, "FunctionTool('_lookup')")]
)
def test_what_is_not_an_agent_is_refused_as_a_deep_sub_agent(given: object, shown: str) -> None:
    spy = ChatModelAgent("spy", ScriptedModel([]))
    with pytest.raises(UsageError) as raised:
        deep_agent("deep", ScriptedModel([]), sub_agents=[spy, given])  # type: ignore[list-item]
    assert str(raised.value) == (
        f"deep agent 'deep': sub_agents[1] is {shown}, "
        "not an Agent (needs name, description and run)"
    )


def test_deep_sub_agents_need_names_of_their_own() -> None:
    spy = ChatModelAgent("spy", ScriptedModel([]))
    with pytest.raises(UsageError, match="several agents named 'spy'"):
        deep_agent(
            "deep", ScriptedModel([]), sub_agents=[spy, ChatModelAgent("spy", ScriptedModel([]))]
        )
    mine = ChatModelAgent("general-purpose", ScriptedModel([]))
    with pytest.raises(UsageError, match="named 'general-purpose' like the built-in"):
        deep_agent("deep", ScriptedModel([]), sub_agents=[mine])
    agent = deep_agent("deep", ScriptedModel([]), sub_agents=[mine], general_purpose=False)
    (task,) = [t for t in agent.tools if t.name == "task"]
    assert task.parameters["properties"]["subagent_type"]["enum"] == ["general-purpose"]
