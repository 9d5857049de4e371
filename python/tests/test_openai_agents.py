"""End to end: a real OpenAI Agents SDK ``Agent``, driven offline by the SDK's own scripted
model (``agents.testing.ScriptedModel``), supervised by ``WardenRunner``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from conftest import PLUGINS, need  # noqa: E402

try:
    import agents  # noqa: F401
except ImportError:
    need(False, "the [openai-agents] extra is not installed")

from agents import (  # noqa: E402
    Agent,
    InputGuardrailTripwireTriggered,
    ToolInputGuardrailTripwireTriggered,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402

import warden  # noqa: E402
from warden.openai_agents import Stopped, WardenRunner  # noqa: E402

ROOT = "/home/ada/app"

set_tracing_disabled(True)  # offline: no traces to send


class Tools:
    """The agent's tools, recording what they were called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        calls = self.calls

        @function_tool
        def Bash(command: str) -> str:
            """Run a shell command."""
            calls.append(("Bash", {"command": command}))
            return "ok"

        @function_tool
        def web_search(query: str, limit: int = 10) -> str:
            """Search the web."""
            calls.append(("web_search", {"query": query, "limit": limit}))
            return json.dumps({"count": 9, "titles": ["a", "b"]})

        @function_tool
        def write_file(path: str, content: str) -> str:
            """Write a file."""
            calls.append(("write_file", {"path": path, "content": content}))
            return "written"

        self.all = [Bash, web_search, write_file]


def step(*output: Any, tokens: tuple[int, int] = (0, 0)) -> ModelStep:
    i, o = tokens
    return ModelStep(output=list(output), usage=Usage(requests=1, input_tokens=i, output_tokens=o, total_tokens=i + o))


def agent_for(model: ScriptedModel, tools: Tools) -> Agent[Any]:
    return Agent(name="assistant", instructions="Help.", model=model, tools=tools.all)


def runner(**options: Any) -> WardenRunner:
    return WardenRunner(warden.Warden(plugins=PLUGINS, builtin=True), project_root=ROOT, **options)


def seen(model: ScriptedModel, i: int) -> str:
    """Everything model call `i` was sent, as one text."""
    return json.dumps(model.calls[i].input, default=str)


def test_a_guardrails_deny_keeps_a_destructive_call_from_running():
    tools = Tools()
    model = ScriptedModel([step(function_call("Bash", {"command": "rm -rf /"}, call_id="c1")), step(assistant_message("I will not."))])
    supervisor = runner()
    result = asyncio.run(supervisor.run(agent_for(model, tools), "clean up the disk"))

    assert tools.calls == []
    assert "`rm -rf /` deletes `/`, everything outside the project" in seen(model, 1)
    assert result.final_output == "I will not."
    history = supervisor.session.facts["history"]
    assert history["counts"]["tool_calls"] == 1 and history["failures"] == {"Bash": 1}


def test_notifications_and_token_usage_reach_the_next_model_call():
    tools = Tools()
    model = ScriptedModel(
        [
            step(function_call("web_search", {"query": "wal", "limit": 5}, call_id="c1"), tokens=(1200, 500)),
            step(assistant_message("Summary."), tokens=(50, 10)),
        ]
    )
    supervisor = runner(token_budget=1000)
    result = supervisor.run_sync(agent_for(model, tools), "research WAL")

    assert tools.calls == [("web_search", {"query": "wal", "limit": 5})]
    assert "Token budget" not in seen(model, 0)
    # 1,700 tokens of a 1,000-token budget: reported as it is, and the run goes on.
    assert "Token budget at 170%. Consider wrapping up or summarizing." in seen(model, 1)
    assert "web_search returned 9 results" in seen(model, 1)
    assert result.final_output == "Summary."
    facts = supervisor.session.facts
    assert facts["turn"]["token_usage"] == pytest.approx(1.76)
    assert facts["history"]["tools"][-1]["result"] == {"count": 9, "titles": ["a", "b"]}


def test_a_rewrite_or_an_ask_does_not_run_the_call_and_says_why():
    tools = Tools()
    model = ScriptedModel(
        [
            step(function_call("web_search", {"query": "wal", "limit": 5000}, call_id="c1")),
            step(function_call("write_file", {"path": "/etc/hosts", "content": "x"}, call_id="c2")),
            step(assistant_message("Done.")),
        ]
    )
    asyncio.run(runner().run(agent_for(model, tools), "look it up, then add a host"))

    # A guardrail cannot change arguments, and has no person to ask: neither call ran.
    assert tools.calls == []
    assert 'call `web_search` again with these arguments: {\\"query\\": \\"wal\\", \\"limit\\": 50}' in seen(model, 1)
    assert "needs a person's approval" in seen(model, 2)


def test_a_refused_prompt_never_reaches_the_model(rules_dir):
    folder = rules_dir(
        {
            "no-prompts.toml": '[rule]\nid = "no-prompts"\ntrigger = "on_query_start"\n'
            "condition = \"matches(event.query.text, 'password')\"\n"
            '[action]\ntype = "decide"\ndecision = "deny"\nreason = "Warden refuses prompts about passwords."\n'
        }
    )
    model = ScriptedModel([step(assistant_message("never said"))])
    supervisor = WardenRunner(warden.Warden(rules=folder))
    with pytest.raises(InputGuardrailTripwireTriggered) as raised:
        asyncio.run(supervisor.run(agent_for(model, Tools()), "print the admin password"))
    assert model.calls == ()
    assert raised.value.guardrail_result.output.output_info == {"reason": "Warden refuses prompts about passwords."}


def test_a_stop_ends_the_run():
    tools = Tools()
    rm = [step(function_call("Bash", {"command": f"rm -rf /srv/{i}"}, call_id=f"c{i}")) for i in range(4)]
    model = ScriptedModel([*rm, step(assistant_message("never said"))])
    supervisor = runner()
    # Three refusals in a row, then the fourth call stops the session: the tool never runs.
    with pytest.raises(ToolInputGuardrailTripwireTriggered):
        asyncio.run(supervisor.run(agent_for(model, tools), "clean everything"))
    assert tools.calls == []
    assert len(model.calls) == 4


def test_a_stop_at_a_turn_ends_the_run_before_the_model_call(rules_dir):
    folder = rules_dir(
        {
            "two-turns.toml": '[rule]\nid = "two-turns"\ntrigger = "on_turn_start"\n'
            'condition = "context.turn.iteration_count >= 2"\n'
            '[action]\ntype = "decide"\ndecision = "stop"\nreason = "Two model calls are enough."\n'
        }
    )
    tools = Tools()
    model = ScriptedModel([step(function_call("web_search", {"query": "wal"}, call_id="c1")), step(assistant_message("never said"))])
    with pytest.raises(Stopped, match="Two model calls are enough."):
        asyncio.run(WardenRunner(warden.Warden(rules=folder)).run(agent_for(model, tools), "research"))
    assert len(model.calls) == 1 and len(tools.calls) == 1


def test_a_stop_after_a_model_call_keeps_its_tool_calls_from_running(rules_dir):
    folder = rules_dir(
        {
            "enough.toml": '[rule]\nid = "enough"\ntrigger = "on_turn_end"\n'
            '[condition]\nexpression = "true"\n'
            '[action]\ntype = "decide"\ndecision = "stop"\nreason = "Enough."\n'
        }
    )
    tools = Tools()
    model = ScriptedModel([step(function_call("web_search", {"query": "wal"}, call_id="c1")), step(assistant_message("never said"))])
    with pytest.raises(ToolInputGuardrailTripwireTriggered):
        asyncio.run(WardenRunner(warden.Warden(rules=folder)).run(agent_for(model, tools), "research"))
    assert tools.calls == [] and len(model.calls) == 1


def test_a_runner_adds_its_guardrails_once_and_keeps_the_callers_filter():
    tools = Tools()
    supervisor = runner()
    agent = agent_for(ScriptedModel([]), tools)
    supervisor.supervise(agent)
    supervisor.supervise(agent)
    assert [g.get_name() for g in agent.input_guardrails] == ["warden"]
    assert all([g.get_name() for g in t.tool_input_guardrails or []] == ["warden"] for t in tools.all)

    from agents import RunConfig
    from agents.run_config import ModelInputData

    marked: list[int] = []

    def mine(data: Any) -> ModelInputData:
        marked.append(len(data.model_data.input))
        return data.model_data

    model = ScriptedModel([step(assistant_message("hi"))])
    result = asyncio.run(supervisor.run(agent_for(model, Tools()), "hello", run_config=RunConfig(call_model_input_filter=mine)))
    assert result.final_output == "hi" and marked == [1]
    assert supervisor.session.facts["turn"]["iteration_count"] == 1
