"""An OpenAI Agents SDK agent supervised by Warden, offline: the model is the SDK's own
scripted model (agents.testing.ScriptedModel), so this runs anywhere
(pip install "warden-supervisor[openai-agents]"; python examples/python/openai_agents_agent.py).
Give the agent a real model (model="gpt-5", with OPENAI_API_KEY) and nothing else changes.

The guardrails plugin keeps the destructive command from running; the built-in rules warn about
the token budget (read from the model's usage) and about the large search result.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agents import Agent, Usage, function_tool, set_tracing_disabled
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

import warden
from warden.openai_agents import WardenRunner

EXAMPLES = Path(__file__).resolve().parents[1]


@function_tool
def Bash(command: str) -> str:
    """Run a shell command."""
    print(f"  ran Bash: {command}")
    return "ok"


@function_tool
def web_search(query: str, limit: int = 10) -> str:
    """Search the web."""
    print(f"  ran web_search: {query!r}")
    return json.dumps({"count": 9, "titles": ["SQLite WAL mode", "WAL and checkpoints"]})


def step(*output: object, tokens: tuple[int, int] = (0, 0)) -> ModelStep:
    i, o = tokens
    return ModelStep(output=list(output), usage=Usage(requests=1, input_tokens=i, output_tokens=o, total_tokens=i + o))


async def main() -> None:
    set_tracing_disabled(True)  # offline: no traces to send
    # ANCHOR: runner
    supervisor = WardenRunner(
        warden.Warden(plugins=EXAMPLES / "plugins", builtin=True),
        project_root="/home/ada/shop",
        token_budget=200_000,
    )
    agent = Agent(name="assistant", instructions="Help with the shop's code.", model=model(), tools=[Bash, web_search])
    result = await supervisor.run(agent, "Clean up, then look up SQLite's WAL mode.")
    # ANCHOR_END: runner
    # What the last model call read: the refusal as the first call's result, the search's
    # result, and Warden's notifications.
    for item in agent.model.calls[-1].input:  # type: ignore[union-attr]
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            print(f"tool result: {item['output']}")
        elif isinstance(item, dict) and str(item.get("content", "")).startswith("[warden]"):
            print(item["content"])
    print(f"answer: {result.final_output}")


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            step(function_call("Bash", {"command": "rm -rf /"}, call_id="c1"), tokens=(120_000, 400)),
            step(function_call("web_search", {"query": "sqlite wal", "limit": 20}, call_id="c2"), tokens=(44_000, 300)),
            step(assistant_message("WAL mode lets readers and a writer work at once."), tokens=(2_000, 200)),
        ]
    )


if __name__ == "__main__":
    asyncio.run(main())
