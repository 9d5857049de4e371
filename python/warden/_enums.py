"""The named values of Warden's outcomes, as string enums.

Each member is also the string a rule file writes (``Decision.DENY == "deny"``), so an outcome
can be compared with either.
"""

from __future__ import annotations

import enum

__all__ = ["Decision", "DeliverAt", "Hook", "LogLevel", "Priority", "ProceedKind"]


class Hook(enum.StrEnum):
    """A point of the agent's lifecycle at which Warden is ticked."""

    ON_QUERY_START = "on_query_start"
    """A new user query was received."""
    ON_TURN_START = "on_turn_start"
    """The agent is about to call the model (a turn)."""
    ON_TURN_END = "on_turn_end"
    """The model answered (the turn is over)."""
    ON_TOOL_CALL = "on_tool_call"
    """A tool is about to run."""
    ON_TOOL_COMPLETE = "on_tool_complete"
    """A tool returned."""
    ON_TOOL_FAILURE = "on_tool_failure"
    """A tool failed or timed out."""
    ON_SESSION_END = "on_session_end"
    """The session is closing."""
    ON_MODE_CHANGE = "on_mode_change"
    """Warden's own hook: the active mode changed (an agent loop never sends it)."""


class Decision(enum.StrEnum):
    """What the rules decided about an event (see the book's Decisions chapter)."""

    ALLOW = "allow"
    """The tool call may run (the host's own permission prompts still apply)."""
    ASK = "ask"
    """Ask a person before the tool call runs."""
    DENY = "deny"
    """The tool call does not run, or the prompt is refused."""
    CONTINUE = "continue"
    """The agent must not stop: it goes on working with the reason as its next instruction."""
    STOP = "stop"
    """The session ends now."""


class ProceedKind(enum.StrEnum):
    """What the host must do after a tick (``Outcome.proceed.kind``)."""

    YES = "yes"
    """Nothing stops the event: run the call (or go on) as reported."""
    WITH_INPUT = "with_input"
    """Run the call with ``Proceed.input`` instead of the reported arguments."""
    ASK = "ask"
    """Ask a person first (``Proceed.reason``); run the call only if they agree."""
    NO = "no"
    """Do not run the call, or refuse the prompt; the agent reads ``Proceed.reason``."""
    KEEP_WORKING = "keep_working"
    """The agent wanted to stop: it must keep working, with the reason as its instruction."""
    STOP = "stop"
    """End the session now."""


class Priority(enum.StrEnum):
    """How urgent a notification is, lowest first."""

    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for ``low`` to 3 for ``critical``, for sorting."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK = {p: i for i, p in enumerate(Priority)}


class DeliverAt(enum.StrEnum):
    """When a notification is to be put into the agent's context."""

    IMMEDIATE = "immediate"
    """With the outcome of the hook that fired it."""
    TURN_START = "turn_start"
    """At the next ``on_turn_start``."""
    TURN_END = "turn_end"
    """At the next ``on_turn_end``."""


class LogLevel(enum.StrEnum):
    """The level of a rule's ``log`` action."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
