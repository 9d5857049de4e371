"""A LangChain agent (create_agent) supervised by Warden's middleware, offline: the chat model
is LangChain's fake model with scripted replies, so this runs anywhere
(pip install "warden-supervisor[langchain]"; python examples/python/langchain_agent.py).
Swap the model for a real one (ChatOpenAI, ChatAnthropic...) and nothing else changes.

The guardrails plugin refuses the destructive command, clamps the search's limit, and the
built-in rules warn about the token budget (read from the model's usage_metadata) and about the
large result; the agent is asked before it writes outside the project.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

import warden
from warden.langchain import WardenMiddleware

EXAMPLES = Path(__file__).resolve().parents[1]


class FakeModel(GenericFakeChatModel):
    """LangChain's fake chat model, willing to be given tools."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeModel:
        return self


def calls(name: str, args: dict[str, Any], id: str, tokens: tuple[int, int]) -> AIMessage:
    i, o = tokens
    usage = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": id}], usage_metadata=usage)


@tool
def Bash(command: str) -> str:
    """Run a shell command in the project."""
    return f"ran: {command}"


@tool
def web_search(query: str, limit: int = 10) -> str:
    """Search the web."""
    return json.dumps({"count": 9, "limit": limit, "titles": ["WAL basics", "Checkpointing"]})


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {len(content)} characters to {path}"


def main() -> None:
    model = FakeModel(
        messages=iter(
            [
                calls("Bash", {"command": "rm -rf /"}, "call-1", (2_000, 500)),
                calls("web_search", {"query": "sqlite wal", "limit": 5000}, "call-2", (70_000, 1_000)),
                calls("write_file", {"path": "/etc/hosts", "content": "127.0.0.1 shop"}, "call-3", (90_000, 500)),
                AIMessage(content="WAL mode it is; /etc/hosts was left alone."),
            ]
        )
    )
    # ANCHOR: middleware
    supervisor = WardenMiddleware(
        warden.Warden(plugins=EXAMPLES / "plugins", builtin=True),
        project_root="/home/ada/shop",
        token_budget=200_000,
    )
    agent = create_agent(model, [Bash, web_search, write_file], middleware=[supervisor], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "example"}}

    state = agent.invoke({"messages": [{"role": "user", "content": "Tidy the disk, then look up WAL."}]}, config)
    while "__interrupt__" in state:
        question = state["__interrupt__"][0].value
        print(f"Warden asks: {question['reason']} ({question['name']} {question['args']})")
        print("  -> the person says no")
        state = agent.invoke(Command(resume={"type": "reject", "message": "leave /etc alone"}), config)
    # ANCHOR_END: middleware

    for message in state["messages"]:
        kind = type(message).__name__.removesuffix("Message")
        text = message.text or json.dumps([(c["name"], c["args"]) for c in getattr(message, "tool_calls", [])])
        print(f"{kind:>6}: {text}")


if __name__ == "__main__":
    main()
