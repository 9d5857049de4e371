"""Warden supervising an agent of the OpenAI Agents SDK (``openai-agents``): ``WardenRunner``
runs an ``Agent`` with Warden at each step, through the SDK's own extension points.

::

    import warden
    from agents import Agent
    from warden.openai_agents import WardenRunner

    runner = WardenRunner(warden.Warden(plugins="plugins", builtin=True), project_root="/home/ada/shop")
    result = await runner.run(agent, "clean up the build folder")

How the run's steps map to Warden's hooks, and through which extension point of the SDK:

==========================  ====================  ================================================
run step                    Warden hook           how the outcome is honoured
==========================  ====================  ================================================
the input (an input         ``on_query_start``    ``deny`` or ``stop``: the guardrail's tripwire;
guardrail that runs before                        the SDK raises ``InputGuardrailTripwireTriggered``
the model)                                        and the model is never called
before each model call      ``on_turn_start``     notifications due go into the model's input as
(``call_model_input_filter``)                     one user message; ``stop`` raises ``Stopped``
after each model call       ``on_turn_end``       the reply, ``final``, and the call's ``usage``;
(``RunHooks.on_llm_end``)                         ``stop`` raises ``Stopped`` at the next step
each function tool call     ``on_tool_call``      ``deny``: the tool does not run, the model reads
(a tool input guardrail)                          the reason (``reject_content``); ``stop``: the
                                                  SDK raises ``ToolInputGuardrailTripwireTriggered``;
                                                  ``rewrite`` and ``ask``: the tool does not run
                                                  (see below)
its result (a tool output   ``on_tool_complete``  ``stop``: the SDK raises
guardrail)                                        ``ToolOutputGuardrailTripwireTriggered``
==========================  ====================  ================================================

What does not fit the SDK's shape, and what is done instead, so that a call Warden did not let
through never runs: a tool guardrail cannot change a call's arguments, so a ``rewrite`` refuses
the call and tells the model the arguments Warden would run it with; it has no person to ask,
so an ``ask`` refuses the call with the rule's reason (the SDK's own approvals,
``needs_approval``, are the place for a person). A run cannot be sent back to work once the SDK
has its final output, so ``continue`` is reported in the outcome and not acted on.
"""

from __future__ import annotations

import inspect
import json
import logging
import uuid
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    GuardrailFunctionOutput,
    InputGuardrail,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    RunResult,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
    ToolOutputGuardrail,
    ToolOutputGuardrailData,
)
from agents.items import ModelResponse
from agents.run_config import CallModelData, ModelInputData

from ._enums import Hook, ProceedKind
from ._hosts import as_json, check_budget, query_event, read_result, tick, usage
from ._native import Outcome, Session, Warden

__all__ = ["Stopped", "WardenRunner"]

log = logging.getLogger("warden.openai_agents")

_GUARD = "warden"
"""The name of the guardrails Warden adds (to find them again, and in traces)."""


class Stopped(Exception):
    """Warden stopped the session (an outcome's ``stop``): the run ends with this exception,
    whose message is the rule's reason."""


class _Hooks(RunHooks[Any]):
    def __init__(self, runner: WardenRunner) -> None:
        self.runner = runner

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse) -> None:
        self.runner._turn_end(response)


class _Filter:
    """The model-input filter: ``on_turn_start``, and the notifications due into the input."""

    def __init__(self, runner: WardenRunner, earlier: Any) -> None:
        self.runner = runner
        self.earlier = earlier

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        if self.earlier is not None:
            result = self.earlier(data)
            if inspect.isawaitable(result):
                result = await result
            data = CallModelData(model_data=result, agent=data.agent, context=data.context)
        return self.runner._turn_start(data)


class WardenRunner:
    """Runs OpenAI Agents SDK agents supervised by Warden, one Warden session per runner (a
    conversation): every ``run`` of it is one query of that session.

    Args:
        warden: the supervisor.
        session_id: the session's id (by default, a new one per runner); with a ``database``,
            a runner made with the same id carries the session on.
        user, project, project_root: whose session it is (``project_root`` is what the
            guardrails plugin's rules call the project).
        token_budget: the tokens the session may use; ``turn.token_usage`` is the share used.
        context_window: the model's context window; ``turn.context_usage`` is the share the
            last model call filled.
        max_iterations: reported as ``turn.max_iterations``.
    """

    def __init__(
        self,
        warden: Warden,
        *,
        session_id: str | None = None,
        user: str | None = None,
        project: str | None = None,
        project_root: str | None = None,
        token_budget: int | None = None,
        context_window: int | None = None,
        max_iterations: int | None = None,
    ) -> None:
        check_budget(token_budget, context_window)
        self.warden = warden
        self.session: Session = warden.session(
            session_id or f"openai-agents-{uuid.uuid4().hex[:12]}", user=user, project=project
        )
        self.user = user
        self.project = project
        self.project_root = project_root
        self.token_budget = token_budget
        self.context_window = context_window
        self.max_iterations = max_iterations
        self.hooks: RunHooks[Any] = _Hooks(self)
        """The run hooks (``Runner.run(..., hooks=runner.hooks)``), for runs started elsewhere."""
        self._iterations = 0
        self._tokens = 0
        self._context_tokens = 0
        self._pending: list[Any] = []
        self._stopped: str | None = None

    # The run.

    async def run(self, agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """``Runner.run`` with Warden: the agent's function tools get Warden's guardrails, and
        the run Warden's hooks and model-input filter (on top of any ``run_config`` given)."""
        run_config = self.run_config(kwargs.pop("run_config", None))
        return await Runner.run(self.supervise(agent), input, hooks=self.hooks, run_config=run_config, **kwargs)

    def run_sync(self, agent: Agent[Any], input: Any, **kwargs: Any) -> RunResult:
        """``run``, for code without an event loop (``Runner.run_sync``)."""
        run_config = self.run_config(kwargs.pop("run_config", None))
        return Runner.run_sync(self.supervise(agent), input, hooks=self.hooks, run_config=run_config, **kwargs)

    def supervise(self, agent: Agent[Any]) -> Agent[Any]:
        """Adds Warden's input guardrail to ``agent``, and its tool guardrails to each of its
        function tools (once; the agent is changed in place and returned)."""
        if not any(g.get_name() == _GUARD for g in agent.input_guardrails):
            guard: InputGuardrail[Any] = InputGuardrail(self._query, name=_GUARD, run_in_parallel=False)
            agent.input_guardrails = [*agent.input_guardrails, guard]
        for tool in agent.tools:
            if not isinstance(tool, FunctionTool):
                continue
            inputs = tool.tool_input_guardrails or []
            if not any(g.get_name() == _GUARD for g in inputs):
                tool.tool_input_guardrails = [*inputs, ToolInputGuardrail(self._tool_call, name=_GUARD)]
            outputs = tool.tool_output_guardrails or []
            if not any(g.get_name() == _GUARD for g in outputs):
                tool.tool_output_guardrails = [*outputs, ToolOutputGuardrail(self._tool_result, name=_GUARD)]
        return agent

    def run_config(self, config: RunConfig | None = None) -> RunConfig:
        """``config`` (or a new ``RunConfig``) with Warden's model-input filter, which runs
        after the filter ``config`` had, if any."""
        config = config if config is not None else RunConfig()
        earlier = config.call_model_input_filter
        if not (isinstance(earlier, _Filter) and earlier.runner is self):
            config.call_model_input_filter = _Filter(self, earlier)
        return config

    def end_session(self) -> Outcome:
        """Ticks ``on_session_end``: the conversation is over."""
        return self._tick(Hook.ON_SESSION_END, {})

    # The ticks.

    def _tick(self, hook: Hook, event: dict[str, Any]) -> Outcome:
        outcome = tick(self.session, hook, event, log)
        self._pending.extend(outcome.inject)
        if outcome.proceed.kind == ProceedKind.STOP and self._stopped is None:
            self._stopped = outcome.proceed.reason or "Warden stopped the session"
        return outcome

    def _check_stopped(self) -> None:
        if self._stopped is not None:
            raise Stopped(self._stopped)

    def _query(self, context: RunContextWrapper[Any], agent: Agent[Any], input: Any) -> GuardrailFunctionOutput:
        self._iterations = 0
        self._stopped = None
        event = query_event(_query_text(input), self.user, self.project, self.project_root, self.max_iterations)
        proceed = self._tick(Hook.ON_QUERY_START, event).proceed
        refused = proceed.kind in (ProceedKind.NO, ProceedKind.STOP)
        return GuardrailFunctionOutput(output_info={"reason": proceed.reason}, tripwire_triggered=refused)

    def _usage(self) -> dict[str, Any]:
        return usage(self._tokens, self._context_tokens, self.token_budget, self.context_window)

    def _turn_start(self, data: CallModelData[Any]) -> ModelInputData:
        self._check_stopped()
        self._iterations += 1
        turn: dict[str, Any] = {"iteration_count": self._iterations, **self._usage()}
        if self.max_iterations is not None:
            turn["max_iterations"] = self.max_iterations
        self._tick(Hook.ON_TURN_START, {"turn": turn})
        self._check_stopped()
        notes, self._pending = self._pending, []
        text = self.warden.render(notes) if notes else None
        model_data = data.model_data
        if text is not None:
            note = {"role": "user", "content": text}
            model_data = ModelInputData(input=[*model_data.input, note], instructions=model_data.instructions)  # type: ignore[list-item]
        return model_data

    def _turn_end(self, response: ModelResponse) -> None:
        usage = response.usage
        self._tokens += usage.total_tokens or usage.input_tokens + usage.output_tokens
        self._context_tokens = usage.input_tokens + usage.output_tokens
        calls = [item for item in response.output if getattr(item, "type", None) == "function_call"]
        texts = [
            part.text
            for item in response.output
            if getattr(item, "type", None) == "message"
            for part in getattr(item, "content", [])
            if getattr(part, "type", None) == "output_text"
        ]
        turn = {"final": not calls, **self._usage()}
        self._tick(Hook.ON_TURN_END, {"turn": turn, "message": {"role": "assistant", "content": "\n".join(texts)}})

    def _tool_call(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        if self._stopped is not None:
            # Stopped after the model call that asked for this one: it never runs.
            return ToolGuardrailFunctionOutput.raise_exception(output_info={"reason": self._stopped})
        context = data.context
        name = context.tool_name
        arguments = _arguments(context.tool_arguments)
        tool = {"name": name, "arguments": arguments}
        outcome = self._tick(Hook.ON_TOOL_CALL, {"tool": tool})
        proceed = outcome.proceed
        reason = proceed.reason or ""
        if proceed.kind == ProceedKind.STOP:
            return ToolGuardrailFunctionOutput.raise_exception(output_info={"reason": reason})
        if proceed.kind == ProceedKind.WITH_INPUT:
            if proceed.input is None or proceed.input == arguments:
                return ToolGuardrailFunctionOutput.allow()
            reason = (
                f"[warden] {reason or 'Warden changes these arguments'}. The call did not run; "
                f"call `{name}` again with these arguments: {json.dumps(proceed.input, default=str)}"
            )
        elif proceed.kind == ProceedKind.ASK:
            reason = f"[warden] {reason}. The call did not run: it needs a person's approval, which this run cannot ask for."
        elif proceed.kind != ProceedKind.NO:
            return ToolGuardrailFunctionOutput.allow()
        # A call that did not run is still a call the agent made: Warden hears it failed.
        self._tick(Hook.ON_TOOL_FAILURE, {"tool": tool, "error": reason})
        return ToolGuardrailFunctionOutput.reject_content(reason, output_info={"decision": proceed.kind.value})

    def _tool_result(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        tool = {"name": context.tool_name, "arguments": _arguments(context.tool_arguments)}
        outcome = self._tick(Hook.ON_TOOL_COMPLETE, {"tool": tool, "result": _result(data.output)})
        if outcome.proceed.kind == ProceedKind.STOP:
            return ToolGuardrailFunctionOutput.raise_exception(output_info={"reason": outcome.proceed.reason})
        return ToolGuardrailFunctionOutput.allow()


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


def _result(output: Any) -> Any:
    """A tool's output as rules read it: the JSON its text holds, or the text."""
    return read_result(output) if isinstance(output, str) else as_json(output)


def _query_text(input: Any) -> str:
    """The text of the run's input: a string, or the last user message of a list of items."""
    if isinstance(input, str):
        return input
    for item in reversed(list(input or [])):
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
