"""Warden for Python: a behavior-tree supervisor for LLM agents, in process.

Build one :class:`Warden` when the agent starts, open a :class:`Session` per conversation, and
tick it at every hook with what just happened; each tick returns an :class:`Outcome`: the
notifications to put into the agent's context (``outcome.inject``) and what the agent must do
(``outcome.proceed``)::

    import warden

    w = warden.Warden()                       # Warden's built-in rules
    session = w.session("conversation-42")
    session.tick("on_query_start", {"query": "Summarise the design notes"})
    outcome = session.tick("on_turn_start", {"turn": {"token_usage": 0.85}})
    print(outcome.inject[0].message)          # Token budget at 85%. ...

The engine is Rust (the same as the ``warden`` command's); ticks release the GIL. LangChain
agents use :class:`warden.langchain.WardenMiddleware` (``pip install warden-supervisor[langchain]``).
"""

from __future__ import annotations

from ._enums import Decision, DeliverAt, Hook, LogLevel, Priority, ProceedKind
from ._native import (
    Decided,
    Diagnostic,
    EmittedEvent,
    Enriched,
    Enrichment,
    Evaluation,
    EventError,
    Halted,
    LoadError,
    LogLine,
    ModeChange,
    Notification,
    Outcome,
    Overridden,
    Proceed,
    Rewrite,
    RuleError,
    Ruling,
    Session,
    SessionError,
    StateWrite,
    Warden,
    __version__,
)

__all__ = [
    "Decided",
    "Decision",
    "DeliverAt",
    "Diagnostic",
    "EmittedEvent",
    "Enriched",
    "Enrichment",
    "Evaluation",
    "EventError",
    "Halted",
    "Hook",
    "LoadError",
    "LogLevel",
    "LogLine",
    "ModeChange",
    "Notification",
    "Outcome",
    "Overridden",
    "Priority",
    "Proceed",
    "ProceedKind",
    "Rewrite",
    "RuleError",
    "Ruling",
    "Session",
    "SessionError",
    "StateWrite",
    "Warden",
    "__version__",
]
