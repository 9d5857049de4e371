"""A chat model for offline agent tests: it answers from a script and records every input."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from pydantic import Field


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, scripted with the replies to give (tool calls and
    ``usage_metadata`` included), that accepts tools and keeps what it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)
    """The messages of every call, in order."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)

    def text_of_call(self, i: int) -> str:
        """Everything call `i` was sent, as one text."""
        return "\n".join(str(m.text) for m in self.seen[i])


def call(name: str, args: dict[str, Any], id: str, **usage: int) -> AIMessage:
    """A reply that calls one tool; `usage` is its usage_metadata (input_tokens, output_tokens)."""
    return reply("", tool_calls=[{"name": name, "args": args, "id": id}], **usage)


def reply(text: str, tool_calls: list[dict[str, Any]] | None = None, **usage: int) -> AIMessage:
    """A reply; `usage` is its usage_metadata (input_tokens, output_tokens)."""
    metadata = None
    if usage:
        i, o = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        metadata = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
    return AIMessage(content=text, tool_calls=tool_calls or [], usage_metadata=metadata)


def script(*replies: AIMessage) -> ScriptedModel:
    return ScriptedModel(messages=iter(replies))
