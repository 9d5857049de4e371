"""Warden as LangChain v1 agent middleware: ``WardenMiddleware`` supervises an agent made with
``langchain.agents.create_agent``.

::

    import warden
    from langchain.agents import create_agent
    from warden.langchain import WardenMiddleware

    supervisor = WardenMiddleware(
        warden.Warden(plugins="plugins", builtin=True),
        project_root="/home/ada/shop",
        token_budget=200_000,
    )
    agent = create_agent(model, tools, middleware=[supervisor])

How the agent's steps map to Warden's hooks, and how the outcome is honoured:

=====================  ==================  =================================================
agent step             Warden hook         what the outcome does
=====================  ==================  =================================================
run starts             ``on_query_start``  ``deny`` or ``stop``: the run ends, the reason is
                       (the last human     the answer. Knowledge enrichment goes into the
                       message)            system prompt of every model call.
before each model      ``on_turn_start``   notifications due (from this tick and every tick
call (a turn)          (iterations,        since the last model call) are added to the
                       token and context   conversation as one human message, before the
                       usage)              call. ``stop``: the run ends.
after each model call  ``on_turn_end``     ``continue`` at a final answer (no tool calls):
                       (the reply, its     the reason is sent as the next instruction and the
                       ``usage_metadata``) model is called again, at most ``max_continues``
                                           times per run. ``stop``: the run ends.
each tool call         ``on_tool_call``    ``deny``: the tool does not run; the model reads
                                           the reason as the tool's result (and Warden is
                                           told the call failed). ``rewrite``: the tool runs
                                           with the rewritten arguments. ``ask``: a LangGraph
                                           interrupt, answered as LangChain's own
                                           human-in-the-loop middleware is answered.
                                           ``stop``: the tool does not run, the run ends.
its result             ``on_tool_complete``
                       or
                       ``on_tool_failure``
run ends               ``on_session_end``  only with ``end_session_after_run=True``;
                                           otherwise the session lives on for the thread's
                                           next run (``end_session()`` ends it).
=====================  ==================  =================================================

Sessions: one Warden session per LangGraph thread (``config["configurable"]["thread_id"]``;
``NAME:THREAD_ID`` for a middleware given a ``name``), or the ``session_id`` given, or one for
the middleware when runs have no thread. The middleware keeps in memory, per session: the
Warden session, the notifications waiting for the next model call, the query's knowledge
enrichment, and a stop. A call whose run paused is kept in the session's host data until it is
over. The agent's state (checkpointed with it) keeps the run's model calls, continues and
tokens used, per middleware name.

``ask`` needs a checkpointer, as every LangGraph interrupt does. The interrupt's value is a
dict like the per-call value of ``HumanInTheLoopMiddleware``: ``{"type": "tool_approval",
"tool_call_id", "name", "args", "description", "rule", "reason"}``; resume with
``Command(resume={"type": "approve"})``, ``{"type": "edit", "edited_action": {"name": ...,
"args": {...}}}``, ``{"type": "reject", "message": "..."}`` or ``{"type": "respond",
"message": "..."}`` (the message is the call's result; the tool does not run). The call's
ruling is kept with the session until the interrupt is answered, so the resumed call is not
ticked twice, even by a middleware built anew in another process on the same database. An
interrupt raised inside the tool (``GraphBubbleUp``) is re-raised, not a failure. With
``interrupt_mode="batched"`` (LangChain's default format), every call of a reply is ruled on
in ``after_model`` and the asks are one interrupt, ``{"action_requests": [...],
"review_configs": [...]}``, resumed with ``{"decisions": [...]}``.

Every message the middleware adds starts with ``[warden]`` and is marked as Warden's: its
``name`` is ``"warden"`` and its ``additional_kwargs`` are ``{"lc_source": "warden", "warden":
"notifications" | "continue" | "stop"}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Union

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
    hook_config,
)
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolCall, ToolMessage
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt
from pydantic import Discriminator, ValidatorFunctionWrapHandler, WrapValidator, create_model
from typing_extensions import TypedDict  # pydantic reads typing's TypedDict only from 3.12

from ._enums import Hook, ProceedKind
from ._hosts import as_json, check_budget, query_event, read_result, tick, usage
from ._native import Enrichment, Notification, Outcome, Session, Warden

__all__ = [
    "ApproveDecision",
    "EditDecision",
    "RejectDecision",
    "RespondDecision",
    "WardenMiddleware",
    "WardenState",
]

log = logging.getLogger("warden.langchain")


def _merged(old: dict[str, dict[str, int]] | None, new: dict[str, dict[str, int]] | None) -> dict[str, dict[str, int]]:
    """The reducer of ``WardenState.warden``: each middleware's counts, updated by its own."""
    merged = dict(old or {})
    for name, counts in (new or {}).items():
        merged[name] = {**merged.get(name, {}), **counts}
    return merged


class WardenState(AgentState[Any]):
    """The agent state the middleware adds to (private: not in the agent's input or output)."""

    warden: NotRequired[Annotated[dict[str, dict[str, int]], PrivateStateAttr, _merged]]
    """Per middleware (by its ``name``, so that two in one agent count apart): ``iterations``,
    the model calls so far in this run; ``continues``, the times a ``continue`` sent the agent
    back to work in this run; ``tokens``, the tokens of every model call of the thread
    (``usage_metadata["total_tokens"]``); ``context_tokens``, the last model call's input and
    output tokens (how full its context window was)."""


# A person's answer to an ``ask``: the decisions LangChain's HumanInTheLoopMiddleware accepts,
# with the same fields, so an answer written for it is an answer for Warden.


class ApproveDecision(TypedDict):
    """Run the call (with the arguments Warden asked about)."""

    type: Literal["approve"]


class _Action(TypedDict):
    name: str
    args: dict[str, Any]


class EditDecision(TypedDict):
    """Run the call with other arguments (the same tool)."""

    type: Literal["edit"]
    edited_action: _Action


class RejectDecision(TypedDict):
    """Do not run the call; ``message`` is the reason the model reads."""

    type: Literal["reject"]
    message: NotRequired[str]


class RespondDecision(TypedDict):
    """Do not run the call; ``message`` is its result, as if the tool had answered."""

    type: Literal["respond"]
    message: str


def _as_sent(answer: Any, check: ValidatorFunctionWrapHandler) -> Any:
    check(answer)
    return answer


_DECISIONS = ("approve", "edit", "reject", "respond")


def _decision_schema(name: str) -> Any:
    """The type LangGraph checks a resumed answer against (and publishes to clients as JSON
    schema): one of the four decisions, read by its ``type``; an edit names the same tool."""
    pinned: Any = Literal[name]  # a type made at run time: the one tool's name
    edited = create_model("EditedAction", name=(pinned, ...), args=(dict[str, Any], ...))
    edit_type: Any = Literal["edit"]
    edit = create_model("EditDecision", type=(edit_type, ...), edited_action=(edited, ...))
    # Checked as the model, answered as sent (a dict, as the other decisions are).
    members = (ApproveDecision, Annotated[edit, WrapValidator(_as_sent)], RejectDecision, RespondDecision)
    return Annotated[Union[members], Discriminator("type")]  # noqa: UP007


def _decisions_schema(names: list[str]) -> Any:
    """The batched answer's type: ``{"decisions": [...]}``, one decision per call asked about,
    in order, each checked as a per-call answer is."""
    members = tuple(_decision_schema(n) for n in names)
    decisions: Any = tuple.__class_getitem__(members)  # tuple[A, B, ...], made at run time
    answer = create_model("Decisions", decisions=(decisions, ...))
    return Annotated[answer, WrapValidator(_as_sent)]


@dataclass
class _Ask:
    """A tool call waiting for a person's answer."""

    value: dict[str, Any]
    input: dict[str, Any] | None
    decision: Any = None
    """The person's answer, when it was given already (to the batched question)."""

    def question(self, request: ToolCallRequest) -> Any:
        """Interrupts the run with the question; the person's answer, once resumed."""
        if self.decision is not None:
            return self.decision
        return interrupt(self.value, response_schema=_decision_schema(request.tool_call["name"]))


@dataclass
class _Conversation:
    """What the middleware keeps in memory for one session."""

    session: Session
    lock: threading.Lock = field(default_factory=threading.Lock)
    holding: threading.Lock = field(default_factory=threading.Lock)
    """Taken to change the calls held in host data: the calls of one reply end side by side."""
    pending: list[Notification] = field(default_factory=list)
    enrichment: Enrichment | None = None
    stopped: str | None = None

    def keep(self, notifications: list[Notification]) -> None:
        if notifications:
            with self.lock:
                self.pending.extend(notifications)

    def take(self, notifications: list[Notification]) -> list[Notification]:
        """Every notification waiting, and `notifications`."""
        with self.lock:
            notes, self.pending = self.pending + notifications, []
        return notes


def _text(message: AnyMessage) -> str:
    return str(message.text)


# Every message the middleware adds to the conversation says it is Warden's: its name, and
# ``additional_kwargs`` (``lc_source``, as LangChain's own middleware marks theirs) a UI can
# filter on; what the model reads starts with ``[warden]``.
_SOURCE = "warden"


def _marked(text: str) -> str:
    return text if text.startswith("[warden]") else f"[warden] {text}"


def _note(text: str, kind: str) -> HumanMessage:
    """An instruction from Warden to the model: notifications, or the reason to go on."""
    return HumanMessage(
        content=_marked(text), name=_SOURCE, additional_kwargs={"lc_source": _SOURCE, "warden": kind}
    )


def _ending(reason: str) -> AIMessage:
    """The answer of a run Warden ended (a refused prompt, a stop)."""
    return AIMessage(content=reason, name=_SOURCE, additional_kwargs={"lc_source": _SOURCE, "warden": "stop"})


def _last_human(messages: list[AnyMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, HumanMessage):
            return _text(m)
    return ""


def _last_ai(messages: list[AnyMessage]) -> AIMessage | None:
    for m in reversed(messages):
        if isinstance(m, AIMessage):
            return m
    return None


def _result(result: ToolMessage | Command[Any]) -> Any:
    """A tool's result as rules read it: its text, or the JSON the text holds."""
    if not isinstance(result, ToolMessage):
        return None
    content = result.content
    return read_result(content) if isinstance(content, str) else content


def _noted(
    result: ToolMessage | Command[Any], asked: ToolCallRequest, ran: ToolCallRequest
) -> ToolMessage | Command[Any]:
    """The result, telling the model which arguments the call ran with when they are not the
    ones it wrote (a rewrite, or a person's edit), as LangChain's human-in-the-loop does."""
    if ran is asked:
        return result
    args = ran.tool_call["args"]
    if not isinstance(result, ToolMessage) or args == asked.tool_call["args"]:
        return result
    notice = f"[warden] The call ran with these arguments instead: {json.dumps(args, default=str)}"
    content = result.content
    if isinstance(content, str):
        return result.model_copy(update={"content": f"{notice}\n{content}" if content else notice})
    return result.model_copy(update={"content": [{"type": "text", "text": notice}, *content]})


class WardenMiddleware(AgentMiddleware[WardenState, Any]):
    """Warden supervising a LangChain agent (see the module's documentation for the mapping).

    Args:
        warden: the supervisor (one is enough for every agent and thread of the process).
        session_id: one session id for every run (by default, the run's thread id).
        user: the user the sessions are for (rules read ``context.user.id``).
        project: the project (``context.project.id``).
        project_root: the project's folder (``context.project.root``; the guardrails
            plugin's rules need it).
        token_budget: the tokens a thread may use; ``turn.token_usage`` is the share used
            (the sum of the model calls' ``usage_metadata["total_tokens"]``).
        context_window: the model's context window, in tokens; ``turn.context_usage`` is the
            share the last model call filled.
        max_iterations: the model calls a run may make (``turn.max_iterations``).
        max_continues: how many times one run's agent is sent back to work by ``continue``.
        end_session_after_run: tick ``on_session_end`` when a run ends, and forget the session
            (for agents whose every run is a whole conversation).
        name: the middleware's name in the agent's graph (``WardenMiddleware`` by default); two
            Warden middleware in one agent need two names (LangChain refuses duplicates). A
            named middleware's session of a thread is ``NAME:THREAD_ID``, its own. Keep the name
            across restarts: checkpointed threads and sessions are found by it.
        interrupt_mode: how an ``ask`` pauses the run, as LangChain's HumanInTheLoopMiddleware
            does: ``"per_call"``, one question per call as it starts (a ``tool_approval``
            value, answered with one decision); ``"batched"``, every call of a model reply
            ruled on right after the reply and one question for all its asks (an
            ``action_requests`` value, answered with ``{"decisions": [...]}``).
    """

    state_schema = WardenState

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
        max_continues: int = 3,
        end_session_after_run: bool = False,
        name: str | None = None,
        interrupt_mode: Literal["per_call", "batched"] = "per_call",
    ) -> None:
        super().__init__()
        if name is not None and not name:
            raise ValueError("name must not be empty")
        self._name = name
        if interrupt_mode not in ("per_call", "batched"):
            raise ValueError(f'interrupt_mode must be "per_call" or "batched", not {interrupt_mode!r}')
        self.interrupt_mode = interrupt_mode
        check_budget(token_budget, context_window)
        if max_continues < 0:
            raise ValueError(f"max_continues must be 0 or more, not {max_continues}")
        self.warden = warden
        self.session_id = session_id
        self.user = user
        self.project = project
        self.project_root = project_root
        self.token_budget = token_budget
        self.context_window = context_window
        self.max_iterations = max_iterations
        self.max_continues = max_continues
        self.end_session_after_run = end_session_after_run
        self._default_id = f"langchain-{uuid.uuid4().hex[:12]}"
        self._conversations: dict[str, _Conversation] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The middleware's name in the agent's graph (see ``name=``)."""
        return self._name or type(self).__name__

    def _counts(self, state: WardenState) -> dict[str, int]:
        return (state.get("warden") or {}).get(self.name, {})

    def _counted(self, **counts: int) -> dict[str, Any]:
        return {"warden": {self.name: counts}}

    # Sessions.

    def _id(self, thread_id: str | None = None) -> str:
        if thread_id is None and self.session_id is not None:
            return self.session_id
        if thread_id is None:
            try:
                configurable = get_config().get("configurable") or {}
            except RuntimeError:
                configurable = {}
            thread = configurable.get("thread_id")
            if thread is None:
                return self._default_id
            thread_id = str(thread)
        # A named middleware's sessions are its own, beside another's on the same thread.
        return thread_id if self._name is None else f"{self._name}:{thread_id}"

    def _conversation(self, thread_id: str | None = None) -> _Conversation:
        sid = self._id(thread_id)
        with self._lock:
            conv = self._conversations.get(sid)
            if conv is None:
                session = self.warden.session(sid, user=self.user, project=self.project)
                conv = self._conversations[sid] = _Conversation(session)
            return conv

    def session(self, thread_id: str | None = None) -> Session:
        """The Warden session of a thread (of ``session_id``, or of runs without a thread,
        when ``thread_id`` is ``None``)."""
        return self._conversation(thread_id).session

    def end_session(self, thread_id: str | None = None) -> Outcome | None:
        """Ticks ``on_session_end`` for a thread's session and forgets it (``None`` when the
        thread has none)."""
        sid = self._id(thread_id)
        with self._lock:
            conv = self._conversations.pop(sid, None)
        if conv is None:
            return None
        return conv.session.tick(Hook.ON_SESSION_END)

    def _tick(self, conv: _Conversation, hook: Hook, event: dict[str, Any]) -> Outcome:
        return tick(conv.session, hook, event, log)

    # The run.

    @hook_config(can_jump_to=["end"])
    def before_agent(self, state: WardenState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """``on_query_start`` with the last human message; ``deny`` or ``stop`` ends the run."""
        conv = self._conversation()
        conv.stopped = None
        text = _last_human(state["messages"])
        event = query_event(text, self.user, self.project, self.project_root, self.max_iterations)
        outcome = self._tick(conv, Hook.ON_QUERY_START, event)
        conv.keep(outcome.inject)
        conv.enrichment = outcome.enrichment
        update = self._counted(iterations=0, continues=0)
        proceed = outcome.proceed
        if proceed.kind in (ProceedKind.NO, ProceedKind.STOP):
            update["messages"] = [_ending(proceed.reason or "")]
            update["jump_to"] = "end"
        return update

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: WardenState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """``on_turn_start``; the notifications due go into the conversation before the call."""
        conv = self._conversation()
        if conv.stopped is not None:
            return {"messages": [_ending(conv.stopped)], "jump_to": "end"}
        counts = self._counts(state)
        iterations = counts.get("iterations", 0) + 1
        turn: dict[str, Any] = {"iteration_count": iterations}
        turn.update(self._usage(counts.get("tokens", 0), counts.get("context_tokens", 0)))
        if self.max_iterations is not None:
            turn["max_iterations"] = self.max_iterations
        outcome = self._tick(conv, Hook.ON_TURN_START, {"turn": turn})
        update = self._counted(iterations=iterations)
        notes = conv.take(outcome.inject)
        proceed = outcome.proceed
        if proceed.kind == ProceedKind.STOP:
            update["messages"] = [_ending(proceed.reason or "")]
            update["jump_to"] = "end"
        elif notes:
            text = self.warden.render(notes)
            if text is not None:
                update["messages"] = [_note(text, "notifications")]
        return update

    def _usage(self, tokens: int, context_tokens: int) -> dict[str, Any]:
        return usage(tokens, context_tokens, self.token_budget, self.context_window)

    @hook_config(can_jump_to=["end", "model"])
    def after_model(self, state: WardenState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """``on_turn_end`` with the reply and its token usage; ``continue`` at a final answer
        sends the agent back to work, ``stop`` ends the run. In batched mode, then
        ``on_tool_call`` for every call of the reply, and one question for all the asks."""
        conv = self._conversation()
        update = self._turn_end(conv, state)
        if self._batches(update):
            asks = self._gate_turn(conv, state)
            if asks:
                self._decide_turn(conv, asks, self._ask_turn(asks))
        return update

    def _batches(self, update: dict[str, Any] | None) -> bool:
        """Whether the reply's calls are ruled on here, before they run (batched mode)."""
        return self.interrupt_mode == "batched" and update is not None and "jump_to" not in update

    def _turn_key(self) -> str:
        return f"langchain.{self.name}.turn"

    def _turn_end(self, conv: _Conversation, state: WardenState) -> dict[str, Any] | None:
        reply = _last_ai(state["messages"])
        if reply is None:
            return None
        if self.interrupt_mode == "batched" and reply.id:
            # after_model runs again when a batched question is answered: the turn was ticked.
            done = conv.session.host_data.get(self._turn_key())
            if isinstance(done, dict) and done.get("reply") == reply.id:
                return dict(done["update"])
        counts = self._counts(state)
        tokens = counts.get("tokens", 0)
        context_tokens = counts.get("context_tokens", 0)
        usage = reply.usage_metadata
        if usage:
            tokens += usage.get("total_tokens") or usage["input_tokens"] + usage["output_tokens"]
            context_tokens = usage["input_tokens"] + usage["output_tokens"]
        final = not reply.tool_calls
        turn = {"final": final, **self._usage(tokens, context_tokens)}
        event = {"turn": turn, "message": {"role": "assistant", "content": _text(reply)}}
        outcome = self._tick(conv, Hook.ON_TURN_END, event)
        conv.keep(outcome.inject)
        update = self._counted(tokens=tokens, context_tokens=context_tokens)
        proceed = outcome.proceed
        if proceed.kind == ProceedKind.STOP:
            reason = proceed.reason or ""
            # The calls the reply asked for will not run: answer them, so the conversation
            # stays one a model accepts.
            unanswered = [
                ToolMessage(content=reason, name=c["name"], tool_call_id=c["id"], status="error")
                for c in reply.tool_calls
            ]
            update["messages"] = [*unanswered, _ending(reason)]
            update["jump_to"] = "end"
        elif proceed.kind == ProceedKind.KEEP_WORKING and final:
            continues = counts.get("continues", 0)
            if continues < self.max_continues:
                update["messages"] = [_note(proceed.reason or "", "continue")]
                update["warden"][self.name]["continues"] = continues + 1
                update["jump_to"] = "model"
        if self._batches(update) and reply.tool_calls and reply.id:
            # Saved with the calls' rulings, before the question that may pause the run.
            conv.session.set_host_data(self._turn_key(), {"reply": reply.id, "update": update}, save=False)
        return update

    # Batched mode: every call of a reply ruled on in after_model, the asks put to a person as
    # one question (LangChain's HITLRequest), the answers kept for wrap_tool_call.

    def _gate_turn(self, conv: _Conversation, state: WardenState) -> list[tuple[str, dict[str, Any]]]:
        """``on_tool_call`` for every call of the reply not ruled on yet; the asks not answered."""
        reply = _last_ai(state["messages"])
        if reply is None:
            return []
        held = self._held(conv)
        fresh: dict[str, dict[str, Any]] = {}
        asks = []
        for call in reply.tool_calls:
            call_id = call.get("id")
            if not call_id:
                continue  # ruled on as it runs: without an id, it cannot be found again
            entry = held.get(call_id)
            if entry is None:
                entry = fresh[call_id] = self._rule(conv, call)
            if "ask" in entry and "decision" not in entry:
                asks.append((call_id, entry))
        if fresh:
            self._hold_many(conv, fresh)
        return asks

    def _ask_turn(self, asks: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        """One question for every ask of the turn; the decisions, in the same order."""
        question = {
            "action_requests": [
                {"name": e["ask"]["name"], "args": e["ask"]["args"], "description": e["ask"]["description"]}
                for _, e in asks
            ],
            "review_configs": [
                {"action_name": e["ask"]["name"], "allowed_decisions": list(_DECISIONS)} for _, e in asks
            ],
        }
        # LangGraph checks the answer against the schema before saving it: a wrong one raises
        # pydantic's ValidationError, and the question stands.
        answer = interrupt(question, response_schema=_decisions_schema([e["ask"]["name"] for _, e in asks]))
        return list(answer["decisions"])

    def _decide_turn(self, conv: _Conversation, asks: list[tuple[str, dict[str, Any]]], decisions: list[Any]) -> None:
        self._hold_many(conv, {call_id: {**entry, "decision": d} for (call_id, entry), d in zip(asks, decisions, strict=True)})

    def after_agent(self, state: WardenState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """``on_session_end``, with ``end_session_after_run=True``."""
        if self.end_session_after_run:
            self.end_session()
        return None

    # Model calls: knowledge enrichment goes into the system prompt.

    def _enriched(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        enrichment = self._conversation().enrichment
        if enrichment is None or enrichment.section is None:
            return request
        prompt = enrichment.integrate(request.system_prompt or "")
        return request.override(system_message=SystemMessage(content=prompt))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Adds the query's knowledge enrichment, if any, to the system prompt."""
        return handler(self._enriched(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Adds the query's knowledge enrichment, if any, to the system prompt."""
        return await handler(self._enriched(request))

    # Tool calls.

    def _gate(
        self, conv: _Conversation, request: ToolCallRequest
    ) -> ToolCallRequest | ToolMessage | _Ask:
        """``on_tool_call``: the request to run (rewritten or not), the message the model
        gets instead of the result, or a question for a person."""
        call = request.tool_call
        call_id = call.get("id") or ""
        if conv.stopped is not None:
            # The session stopped (at another call of the same reply, ruled on first): no call
            # starts after a stop.
            self._release(conv, call_id)
            return ToolMessage(content=conv.stopped, name=call["name"], tool_call_id=call_id, status="error")
        entry = self._held(conv).get(call_id) if call_id else None
        if entry is None:
            entry = self._rule(conv, call)
            if "ask" in entry:
                self._hold(conv, call_id, entry)
        elif "refused" in entry:
            # Ruled on before it ran (batched mode): the refusal was reported then.
            self._release(conv, call_id)
        # Otherwise ticked already, before the run paused (in this process or another, or in
        # after_model in batched mode): the call is not reported twice.
        if "ask" in entry:
            return _Ask(value=entry["ask"], input=entry.get("input"), decision=entry.get("decision"))
        if "refused" in entry:
            return ToolMessage(content=entry["refused"], name=call["name"], tool_call_id=call_id, status="error")
        through = entry["through"]
        return request if through is call else request.override(tool_call=through)

    def _rule(self, conv: _Conversation, call: ToolCall) -> dict[str, Any]:
        """``on_tool_call`` for one call: what to do with it, as plain data (kept with the
        session while the call waits): ``through`` (the call to run), ``refused`` (the reason)
        or ``ask`` (the question, and the arguments a rule rewrote)."""
        call_id = call.get("id") or ""
        tool = {"name": call["name"], "arguments": call["args"]}
        outcome = self._tick(conv, Hook.ON_TOOL_CALL, {"tool": tool})
        conv.keep(outcome.inject)
        proceed = outcome.proceed
        kind = proceed.kind
        reason = proceed.reason or ""
        if kind == ProceedKind.WITH_INPUT:
            rewritten = proceed.input if proceed.input is not None else call["args"]
            return {"through": as_json({**call, "args": rewritten})}
        if kind in (ProceedKind.NO, ProceedKind.STOP):
            if kind == ProceedKind.STOP:
                conv.stopped = reason
            self._refused(conv, call, reason)
            return {"refused": reason}
        if kind == ProceedKind.ASK:
            args = proceed.input if proceed.input is not None else call["args"]
            ruling = outcome.ruling
            value = {
                "type": "tool_approval",
                "tool_call_id": call_id,
                "name": call["name"],
                "args": args,
                "description": f"{reason}\n\nTool: {call['name']}\nArgs: {json.dumps(args, default=str)}",
                "rule": ruling.rule if ruling is not None else None,
                "reason": reason,
            }
            asked: dict[str, Any] = as_json({"ask": value, "input": proceed.input})
            return asked
        # The call as the model made it: the request runs as it is. (Held across a pause, it
        # is kept as JSON, by _hold_many.)
        return {"through": call}

    def _refused(self, conv: _Conversation, call: Any, reason: str) -> None:
        """A call that did not run is still a call the agent made: Warden hears it failed."""
        tool = {"name": call["name"], "arguments": call["args"]}
        outcome = self._tick(conv, Hook.ON_TOOL_FAILURE, {"tool": tool, "error": reason})
        conv.keep(outcome.inject)
        if outcome.proceed.kind == ProceedKind.STOP:
            conv.stopped = outcome.proceed.reason or ""

    def _answer(
        self, conv: _Conversation, request: ToolCallRequest, ask: _Ask, decision: Any
    ) -> ToolCallRequest | ToolMessage:
        """A person's answer to an ``ask``, as LangChain's human-in-the-loop answers are
        read: approve, edit, reject or respond."""
        call = request.tool_call
        self._release(conv, call.get("id") or "")
        kind = decision.get("type") if isinstance(decision, dict) else None
        if kind == "approve":
            if ask.input is None:
                return request
            return request.override(tool_call={**call, "args": ask.input})
        if kind == "edit":
            edited = decision.get("edited_action") or {}
            if edited.get("name", call["name"]) != call["name"]:
                raise ValueError(
                    f"an edit must keep the tool `{call['name']}`, not change it to `{edited.get('name')}`"
                )
            return request.override(tool_call={**call, "args": edited.get("args", call["args"])})
        if kind == "reject":
            if message := decision.get("message"):
                content = f"User rejected the tool call for `{call['name']}` with reason: {message}"
            else:
                content = (
                    f"User rejected the tool call for `{call['name']}` with id {call.get('id')}. "
                    "The tool was not executed. Do not retry this tool call unless the user "
                    "explicitly requests it."
                )
            self._refused(conv, call, content)
            return ToolMessage(content=content, name=call["name"], tool_call_id=call.get("id") or "", status="error")
        if kind == "respond":
            # The person answered for the tool: the answer is the call's result, for the model
            # and for Warden; the tool does not run.
            answer = ToolMessage(
                content=decision["message"], name=call["name"], tool_call_id=call.get("id") or "", status="success"
            )
            self._done(conv, request, result=answer)
            return answer
        raise ValueError(
            f"unexpected answer to Warden's question about `{call['name']}`: {decision!r}; "
            'answer {"type": "approve"}, {"type": "edit", "edited_action": {"name": ..., '
            '"args": {...}}}, {"type": "reject", "message": "..."} or {"type": "respond", '
            '"message": "..."}'
        )

    # Calls waiting across a pause. A call whose run paused (Warden's ask, or an interrupt
    # inside the tool) runs again when the run resumes, maybe in another process with another
    # middleware: what its on_tool_call decided is kept in the session's host data (saved with
    # a durable session) until the call is over, so it is ticked once.

    _HELD_LIMIT = 64
    """Calls kept at most per session (the oldest go first: runs that never resumed)."""

    def _held_key(self) -> str:
        return f"langchain.{self.name}.calls"

    def _held(self, conv: _Conversation) -> dict[str, Any]:
        held = conv.session.host_data.get(self._held_key())
        return held if isinstance(held, dict) else {}

    def _hold(self, conv: _Conversation, call_id: str, entry: dict[str, Any]) -> None:
        if call_id:
            self._hold_many(conv, {call_id: entry})

    def _hold_many(self, conv: _Conversation, entries: dict[str, dict[str, Any]]) -> None:
        with conv.holding:
            held = self._held(conv)
            for call_id, entry in entries.items():
                held.pop(call_id, None)
                held[call_id] = entry
            for old in list(held)[: max(0, len(held) - self._HELD_LIMIT)]:
                del held[old]
            conv.session.set_host_data(self._held_key(), as_json(held))

    def _release(self, conv: _Conversation, call_id: str) -> None:
        """Forgets a call: saved with the tick that reports how it ended."""
        with conv.holding:
            held = self._held(conv)
            if held.pop(call_id, None) is not None:
                conv.session.set_host_data(self._held_key(), held or None, save=False)

    def _pause(self, conv: _Conversation, gate: ToolCallRequest) -> None:
        self._hold(conv, gate.tool_call.get("id") or "", {"through": gate.tool_call})

    def _done(
        self,
        conv: _Conversation,
        request: ToolCallRequest,
        result: ToolMessage | Command[Any] | None = None,
        error: BaseException | None = None,
    ) -> None:
        """``on_tool_complete`` or ``on_tool_failure``."""
        call = request.tool_call
        self._release(conv, call.get("id") or "")
        tool = {"name": call["name"], "arguments": call["args"]}
        event: dict[str, Any]
        if error is not None:
            hook, event = Hook.ON_TOOL_FAILURE, {"tool": tool, "error": f"{type(error).__name__}: {error}"}
        elif isinstance(result, ToolMessage) and result.status == "error":
            hook, event = Hook.ON_TOOL_FAILURE, {"tool": tool, "error": _text(result)}
        else:
            hook, event = Hook.ON_TOOL_COMPLETE, {"tool": tool, "result": _result(result) if result is not None else None}
        outcome = self._tick(conv, hook, event)
        conv.keep(outcome.inject)
        if outcome.proceed.kind == ProceedKind.STOP:
            conv.stopped = outcome.proceed.reason or ""

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """``on_tool_call`` before the tool runs (deny, rewrite, ask, stop), then
        ``on_tool_complete`` or ``on_tool_failure``."""
        conv = self._conversation()
        gate = self._gate(conv, request)
        if isinstance(gate, _Ask):
            gate = self._answer(conv, request, gate, gate.question(request))
        if isinstance(gate, ToolMessage):
            return gate
        try:
            result = handler(gate)
        except GraphBubbleUp:
            # An interrupt (a tool's own, or another middleware's pause), not a failure: the
            # call runs again when the run resumes, and is reported then.
            self._pause(conv, gate)
            raise
        except Exception as e:
            self._done(conv, gate, error=e)
            raise
        self._done(conv, gate, result=result)
        return _noted(result, request, gate)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """``wrap_tool_call`` for async agents: the ticks run on a worker thread."""
        conv = self._conversation()
        gate = await asyncio.to_thread(self._gate, conv, request)
        if isinstance(gate, _Ask):
            answer = gate.question(request)
            gate = await asyncio.to_thread(self._answer, conv, request, gate, answer)
        if isinstance(gate, ToolMessage):
            return gate
        try:
            result = await handler(gate)
        except GraphBubbleUp:
            self._pause(conv, gate)
            raise
        except Exception as e:
            await asyncio.to_thread(self._done, conv, gate, None, e)
            raise
        await asyncio.to_thread(self._done, conv, gate, result)
        return _noted(result, request, gate)

    # The async hooks: the same, with the ticks on a worker thread.

    @hook_config(can_jump_to=["end"])
    async def abefore_agent(self, state: WardenState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.before_agent, state, runtime)

    @hook_config(can_jump_to=["end"])
    async def abefore_model(self, state: WardenState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.before_model, state, runtime)

    @hook_config(can_jump_to=["end", "model"])
    async def aafter_model(self, state: WardenState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        conv = self._conversation()
        update = await asyncio.to_thread(self._turn_end, conv, state)
        if self._batches(update):
            asks = await asyncio.to_thread(self._gate_turn, conv, state)
            if asks:
                decisions = self._ask_turn(asks)
                await asyncio.to_thread(self._decide_turn, conv, asks, decisions)
        return update

    async def aafter_agent(self, state: WardenState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_agent, state, runtime)
