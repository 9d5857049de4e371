"""How notifications are written into an agent's context: one block for all of a tick's
notifications, most urgent first, each with its category, so the model can tell the
supervisor's notes from the user's words."""

from __future__ import annotations

from collections.abc import Iterable

from ._native import Notification

__all__ = ["render_notifications"]


def render_notifications(notifications: Iterable[Notification]) -> str:
    """The notifications as one block of text for the model, or ``""`` when there are none::

        <warden-notes>
        [warning] Token budget at 90%. Consider wrapping up or summarizing.
        [hint] vault_search returned 9 results. Summarize the key findings before going on.
        </warden-notes>
    """
    lines = [f"[{n.category}] {n.message}" for n in notifications]
    if not lines:
        return ""
    return "<warden-notes>\n" + "\n".join(lines) + "\n</warden-notes>"
