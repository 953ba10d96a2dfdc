"""Agents of the dev page's tests: a code-review team whose triage hands off to a review
manager, which asks a security reviewer (one level down) and asks a person before posting;
and an agent that asks a person a question and repeats the answer."""

from __future__ import annotations

import json
from typing import Any

from plait import AgentTool, ChatModelAgent, Message, Team, Usage, interrupt, tool
from plait.core.agent import Agent
from plait.examples.teams import PR, sql_injection_checker
from plait.testing import FunctionModel, ScriptedModel, call, reply
from plait.tools.base import ToolInfo

FINAL_REVIEW = "Review posted: possible SQL injection in the users query."


@tool
def post_review(comment: str) -> str:
    """Post a review comment on the pull request once a person approves it.

    Args:
        comment: The review comment.
    """
    answer = interrupt({"question": "Post this review to the PR?", "comment": comment})
    return "posted" if answer == "approve" else f"not posted ({answer})"


def _security_finding(messages: list[Message], tools: Any) -> Message:
    found = next(m.content for m in reversed(messages) if m.role == "tool")
    return reply(f"security: {found}", usage=Usage(input_tokens=40, output_tokens=12))


def review_team() -> Team:
    """Return a fresh code-review team (its scripted models replay their scripts once)."""
    security = ChatModelAgent(
        "security_reviewer",
        ScriptedModel([call("sql_injection_checker", {"code": PR}), _security_finding]),
        description="Security expert: SQL injection, XSS, auth.",
        tools=[sql_injection_checker],
    )
    manager = ChatModelAgent(
        "review_manager",
        ScriptedModel(
            [
                call("security_reviewer", {"request": PR}),
                call("post_review", {"comment": "Possible SQL injection in the users query."}),
                reply(FINAL_REVIEW, usage=Usage(input_tokens=120, output_tokens=30)),
            ]
        ),
        description="Runs the review and posts it.",
        tools=[AgentTool(security), post_review],
    )
    handoff = {"agent_name": "review_manager", "message": "review PR 7", "reason": "a code review"}
    triage = ChatModelAgent(
        "triage",
        ScriptedModel([call("transfer_to_agent", handoff)]),
        description="Routes requests.",
    )
    return Team.swarm(
        triage, [triage, manager], name="code_review", description="Reviews pull requests."
    )


@tool
def ask(question: str) -> str:
    """Ask a person a question; return their answer as JSON.

    Args:
        question: What to ask.
    """
    return json.dumps(interrupt({"question": question}))


def _asker_reply(messages: list[Message], tools: list[ToolInfo]) -> Message | str:
    if messages[-1].role == "tool":
        return reply(f"you said {messages[-1].content}")
    return call("ask", {"question": messages[-1].content})


def page_agents() -> dict[str, Agent]:
    """Return the agents of a dev-page test server (fresh objects)."""
    asker = ChatModelAgent(
        "asker", FunctionModel(_asker_reply), description="Asks you something.", tools=[ask]
    )
    return {"code_review": review_team(), "asker": asker}
