"""What the agent-framework integrations (``langchain.py``, ``openai_agents.py``) share: how
they tick, report failing rules, read tool results, and describe a query and a turn's usage.
Private: the integrations' own classes are the API."""

from __future__ import annotations

import json
import logging
from typing import Any

from ._enums import Hook
from ._native import EventError, Outcome, Session


def as_json(value: Any) -> Any:
    """`value` as plain JSON (what a tick accepts): objects it cannot hold become text."""
    return json.loads(json.dumps(value, default=str))


def tick(session: Session, hook: Hook, event: dict[str, Any], log: logging.Logger) -> Outcome:
    """Ticks `session`. Something the agent produced that is not JSON (an object in a tool's
    arguments or result) is given to the rules as text rather than failing the supervision; a
    rule that failed did not stop the others, and `log` hears of it."""
    try:
        outcome = session.tick(hook, event)
    except EventError:
        outcome = session.tick(hook, as_json(event))
    for error in outcome.errors:
        log.warning("session %s, %s: %s", session.id, hook.value, error)
    return outcome


def read_result(text: str) -> Any:
    """A tool's text result as rules read it: the JSON it holds, or the text."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except ValueError:
            pass
    return text


def check_budget(token_budget: int | None, context_window: int | None) -> None:
    """Raises ``ValueError`` for a budget or window that is not a number of tokens above 0."""
    if token_budget is not None and token_budget <= 0:
        raise ValueError(f"token_budget must be a number of tokens above 0, not {token_budget}")
    if context_window is not None and context_window <= 0:
        raise ValueError(f"context_window must be a number of tokens above 0, not {context_window}")


def usage(tokens: int, context_tokens: int, token_budget: int | None, context_window: int | None) -> dict[str, Any]:
    """The turn's usage fields: the share of the budget the tokens so far are (above 1.0 when
    over it), and of the window the last model call filled."""
    turn: dict[str, Any] = {}
    if token_budget is not None:
        turn["token_usage"] = tokens / token_budget
    if context_window is not None:
        turn["context_window"] = context_window
        turn["context_usage"] = context_tokens / context_window
    return turn


def query_event(
    text: str, user: str | None, project: str | None, project_root: str | None, max_iterations: int | None
) -> dict[str, Any]:
    """The ``on_query_start`` event of a run."""
    event: dict[str, Any] = {"query": text}
    if max_iterations is not None:
        event["turn"] = {"max_iterations": max_iterations}
    if user is not None:
        event["user"] = {"id": user}
    if project is not None or project_root is not None:
        event["project"] = {"id": project, "root": project_root}
    return event
