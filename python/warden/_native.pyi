"""Type stubs of the native half of the ``warden`` package (``warden._native``).

Import these names from ``warden``. Every class is immutable: an outcome is a record of what
the supervisor decided at one tick.
"""

import os
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, final

from ._enums import Decision, DeliverAt, Hook, LogLevel, Priority, ProceedKind

__version__: str

JSON = None | bool | int | float | str | list[Any] | dict[str, Any]
"""A JSON value as plain Python: what tool arguments, results, state values and payloads are."""

Event = Mapping[str, Any]
"""An event in the trace format: ``{"turn": {...}, "query": ..., "tool": {"name", "arguments"},
"result": ..., "error": ..., "message": {"role", "content"}, "user": {...}, "project": {...},
"data": ..., "time": ...}``, every field optional (see the book's "Traces and replay")."""

StrPath = str | os.PathLike[str]

class EventError(ValueError):
    """A tick's hook or event is not what it must be."""

    field: str
    """The offending field: its dotted path (``tool.name``, ``turn.number``), ``hook``, or
    ``""`` for the event as a whole."""

class LoadError(Exception):
    """Warden could not be built: the configuration, a rule file or the database has an error."""

    file: str | None
    """The file of the first error."""
    line: int | None
    """Its line (from 1), when the error is at a place in the file."""
    field: str | None
    """The field concerned (``rules``, ``rule.priority``), when there is one."""
    diagnostics: list[Diagnostic]
    """Every problem found."""

class SessionError(Exception):
    """A saved session could not be read back from the database (or the database failed)."""

@final
class Diagnostic:
    """One problem found while loading rules or configuration."""

    @property
    def severity(self) -> str:
        """``"error"`` (the rule or file is not loaded) or ``"warning"`` (it is)."""
    @property
    def file(self) -> str:
        """The file concerned."""
    @property
    def line(self) -> int | None:
        """The line (from 1), when the problem is at a place in the file."""
    @property
    def column(self) -> int | None:
        """The column (from 1)."""
    @property
    def field(self) -> str | None:
        """The field concerned, when there is one."""
    @property
    def message(self) -> str:
        """What is wrong."""
    @property
    def help(self) -> str | None:
        """How to fix it, when Warden knows."""
    @property
    def is_error(self) -> bool:
        """Whether it stops the rule (or file) from loading."""

@final
class Warden:
    """The supervisor. Build it once and share it: it is safe to use from many threads, and
    every session it opens shares its compiled rules and its store."""

    def __init__(
        self,
        *,
        rules: StrPath | Sequence[StrPath] | None = None,
        plugins: StrPath | Sequence[StrPath] | None = None,
        builtin: bool | None = None,
        capabilities: str | Sequence[str] | None = None,
        database: StrPath | None = None,
        modes: str | None = None,
        strict: bool = True,
        any_capability: bool = False,
        history_limit: int | None = None,
        log_sample: float | None = None,
        script_timeout: float | None = None,
        script_memory: int | None = None,
        shell_tools: str | Sequence[str] | Mapping[str, str] | None = None,
    ) -> None:
        """A supervisor. Without arguments, Warden's built-in rules.

        ``rules`` and ``plugins`` are folders (one, or a list); given either, the built-in
        rules are left out unless ``builtin=True``, as with the ``warden`` command's flags.
        ``capabilities`` declares what the host provides, for plugins that require it.
        ``database`` is the SQLite file for plugin state, users' choices and the execution log
        (in memory when absent). ``modes`` is a modes file or ``"builtin:context-window"``.
        ``script_timeout`` (seconds) and ``script_memory`` (bytes) limit Lua scripts.
        ``shell_tools`` declares more tools as shells, whose command ``tool.shell`` analyzes:
        names (their ``command`` field holds it) or a dict of names to the field that does
        (``{"run_in_container": "cmdline"}``); ``Bash``, ``shell``, ``run_shell_command``,
        ``terminal`` and other common names are shells already. A session warns
        (:class:`UserWarning`) once, at its first call, of a tool given a ``command`` that is
        not declared a shell.

        Fails loudly rather than supervise less than it was given: raises
        :class:`FileNotFoundError` (its ``filename`` the path) when a ``rules`` or ``plugins``
        folder or the ``modes`` file does not exist, and :class:`LoadError` when a rule file
        has an error, unless ``strict=False`` (then such rules are skipped and listed in
        :attr:`diagnostics`). Warns (:class:`UserWarning`) when it has no rules at all.

        Raises :class:`LoadError` when the database cannot be opened.
        """
    @staticmethod
    def from_config(
        path: StrPath,
        *,
        rules: StrPath | Sequence[StrPath] | None = None,
        plugins: StrPath | Sequence[StrPath] | None = None,
        builtin: bool | None = None,
        capabilities: str | Sequence[str] | None = None,
        database: StrPath | None = None,
        modes: str | None = None,
        strict: bool = True,
        any_capability: bool = False,
        history_limit: int | None = None,
        log_sample: float | None = None,
        script_timeout: float | None = None,
        script_memory: int | None = None,
        shell_tools: str | Sequence[str] | Mapping[str, str] | None = None,
    ) -> Warden:
        """A supervisor from a configuration file (``warden.toml``), read exactly as the
        ``warden`` command reads it (relative paths are taken from the file's folder). The
        keyword arguments add to it as the command's flags do.

        Raises :class:`LoadError` (with ``file``, ``line`` and ``field``) when the file or a
        rule file has an error (a rule file's, unless ``strict=False``), and
        :class:`FileNotFoundError` when a folder or modes file it names does not exist.
        """
    def session(
        self,
        id: str | None = None,
        *,
        user: str | None = None,
        project: str | None = None,
        explain: bool = False,
    ) -> Session:
        """Opens a session: one agent conversation. ``id`` names it (generated when absent);
        ``user`` and ``project`` say whose it is (``default`` otherwise; an event's ``user``
        and ``project`` change them). ``explain=True`` evaluates every rule at every tick and
        records why each did or did not fire (:attr:`Outcome.evaluations`).

        With a ``database``, a session with an id is durable: saved after every tick, and
        resumed where it stood by any :class:`Warden` on the same file, in this process or
        another (waiting Lua scripts included). Raises :class:`SessionError` when a saved
        session cannot be read back."""
    def render(self, notifications: list[Notification]) -> str | None:
        """Writes notifications (from several ticks, say) as one block for the agent's
        context, as :attr:`Outcome.rendered` does for one tick; ``None`` when there are none."""
    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Problems found in the rule files (the rules without problems are loaded)."""
    @property
    def rules(self) -> list[str]:
        """The ids of the rules loaded (``plugin/id`` for a plugin's), in priority order per
        hook."""
    @property
    def database(self) -> str | None:
        """The SQLite database in use, or ``None`` for an in-memory store."""

@final
class Session:
    """One agent conversation. Tick it at every hook with what just happened."""

    def tick(self, hook: Hook | str, event: Event | None = None) -> Outcome:
        """Handles one hook: ``hook`` is its name (``"on_tool_call"``, or a :class:`Hook`),
        ``event`` what happened, as a dict in the trace format.

        Raises :class:`EventError` (a ``ValueError``) naming the field when the hook or the
        event is not what it must be. A rule that fails (a Lua error included) raises nothing:
        it is in :attr:`Outcome.errors`, and the other rules ran. The GIL is released while the
        tick runs.
        """
    def tick_json(self, line: str | bytes) -> Outcome:
        """Handles one line of a session trace: JSON text holding the ``hook`` and the event's
        fields, as ``warden replay`` reads it. The engine reads the JSON, so a host that has
        the event as text builds no dict for it. Raises :class:`EventError` naming the field
        when the line is not an event."""
    def atick(self, hook: Hook | str, event: Event | None = None) -> Coroutine[Any, Any, Outcome]:
        """:meth:`tick` for asyncio: it runs the tick on a worker thread
        (``asyncio.to_thread``), so the event loop goes on meanwhile. Await each tick of a
        session before the next."""
    @property
    def id(self) -> str:
        """The session id."""
    @property
    def ended(self) -> bool:
        """Whether ``on_session_end`` was handled."""
    @property
    def pending(self) -> list[Notification]:
        """Notifications waiting for a later delivery point."""
    @property
    def facts(self) -> dict[str, Any]:
        """What Warden knows about the session (turn, user, project, history, counts)."""
    @property
    def script_memory(self) -> int | None:
        """The memory of the session's Lua state, in bytes; ``None`` while no script ran."""
    @property
    def host_data(self) -> dict[str, Any]:
        """What the host keeps with the session (saved with it; rules do not see it)."""
    def set_host_data(self, key: str, value: Any, save: bool = True) -> None:
        """Sets ``key`` of the host's data (``None`` removes it); a durable session is saved
        now unless ``save=False``."""

@final
class Outcome:
    """What the supervisor decided at one hook."""

    @property
    def hook(self) -> Hook:
        """The hook that was handled."""
    @property
    def saved(self) -> bool:
        """Whether what the tick wrote (plugin state, the execution log, a durable session)
        was saved; its decision and notifications stand either way."""
    @property
    def unsaved(self) -> str | None:
        """Why nothing the tick wrote was saved (``"the disk is full: ..."``), or ``None``."""
    @property
    def decision(self) -> Decision | None:
        """The merged decision; ``None`` when no rule decided, or when rules only rewrote the
        call's arguments (see :attr:`updated_input`)."""
    @property
    def reason(self) -> str | None:
        """Why the decision was made, for the agent or the person asked."""
    @property
    def updated_input(self) -> dict[str, Any] | None:
        """The whole rewritten arguments, when a rewrite applies."""
    @property
    def ruling(self) -> Ruling | None:
        """The ruling itself: decision, rule, reason, input."""
    @property
    def proceed(self) -> Proceed:
        """What the host must do. A tool call runs only on ``yes`` or ``with_input`` (or on a
        person's yes to ``ask``)."""
    @property
    def inject(self) -> list[Notification]:
        """Notifications due now, most urgent first: put these into the agent's context."""
    @property
    def rendered(self) -> str | None:
        """The notifications due now, written as one block for the agent's context (most
        urgent first, each message once; an operator's ``[render] template`` when set), or
        ``None`` when there is nothing to inject. Every host injects this same text."""
    @property
    def notifications(self) -> list[Notification]:
        """The notifications fired at this hook, whenever they are due."""
    @property
    def effects(
        self,
    ) -> list[Notification | LogLine | StateWrite | EmittedEvent | Decided | Rewrite | Enriched]:
        """Every effect applied, in the order applied."""
    @property
    def errors(self) -> list[RuleError]:
        """Failures isolated to a rule (a Lua error, a condition that broke)."""
    @property
    def halted(self) -> list[Halted]:
        """Scripts and behaviors stopped at this tick before they finished."""
    @property
    def overridden(self) -> list[Overridden]:
        """Decisions and rewrites the ruling overrode, and why."""
    @property
    def fired(self) -> list[str]:
        """The ids of the rules that fired, in order."""
    @property
    def shadow_fired(self) -> list[str]:
        """The ids of the rules in shadow that fired, in order (none of it applied)."""
    @property
    def shadow(
        self,
    ) -> list[Notification | LogLine | StateWrite | EmittedEvent | Decided | Rewrite | Enriched]:
        """What the rules in shadow rendered, none of it applied."""
    @property
    def evaluations(self) -> list[Evaluation]:
        """Every rule evaluated and what it came to (all rules in explain mode)."""
    @property
    def mode(self) -> str:
        """The mode this hook ran in (``default`` without modes)."""
    @property
    def mode_change(self) -> ModeChange | None:
        """Set when this event changed the mode."""
    @property
    def enrichment(self) -> Enrichment | None:
        """Knowledge for the system prompt, when this tick enriched the query."""
    @property
    def quiet(self) -> bool:
        """Whether nothing fired, failed or was delivered."""
    def replay_lines(self, event: int) -> list[str]:
        """The JSON lines ``warden replay`` prints for this outcome as event ``event``."""
    def replay_output(self, event: int) -> bytes:
        """The same lines as one UTF-8 text, each ending in a newline (empty when none): for a
        binary file such as ``sys.stdout.buffer``."""

@final
class Notification:
    """A notification for the agent's context (the ``notify_self`` action)."""

    @property
    def action(self) -> str:
        """Always ``"notify_self"``."""
    @property
    def rule(self) -> str:
        """The rule that fired it."""
    @property
    def message(self) -> str:
        """The rendered message."""
    @property
    def category(self) -> str:
        """Its category (``warning``, ``hint``...), chosen by the rule."""
    @property
    def priority(self) -> Priority:
        """How urgent it is."""
    @property
    def deliver_at(self) -> DeliverAt:
        """When it is to be injected."""
    @property
    def fired_at(self) -> Hook:
        """The hook it was fired at."""

@final
class Ruling:
    """The event's one ruling: the decisions and rewrites of the rules that fired, merged."""

    @property
    def decision(self) -> Decision | None:
        """The decision; ``None`` when the rules only rewrote the call's arguments."""
    @property
    def rule(self) -> str:
        """The rule that decided (for a rewrite alone, the first rule that rewrote)."""
    @property
    def reason(self) -> str:
        """What the agent (or the person asked) is told; empty for a rewrite alone."""
    @property
    def input(self) -> dict[str, Any] | None:
        """The whole rewritten arguments, when a rewrite applies."""
    @property
    def name(self) -> str:
        """The decision's name, or ``"rewrite"`` for rewrites alone."""

@final
class Proceed:
    """Whether the event may go on, and how."""

    @property
    def kind(self) -> ProceedKind:
        """What to do."""
    @property
    def reason(self) -> str | None:
        """Why (for ``ask``, ``no``, ``keep_working`` and ``stop``)."""
    @property
    def input(self) -> dict[str, Any] | None:
        """The arguments to run the call with (``with_input``, and ``ask`` with a rewrite)."""
    @property
    def runs(self) -> bool:
        """Whether the call may run without asking anyone (``yes`` or ``with_input``)."""

@final
class RuleError:
    """A failure isolated to one rule, or to the event itself when ``rule`` is ``None``."""

    @property
    def rule(self) -> str | None: ...
    @property
    def error(self) -> str: ...

@final
class Halted:
    """A script or behavior stopped before it finished."""

    @property
    def rule(self) -> str: ...
    @property
    def reason(self) -> str: ...

@final
class Overridden:
    """A decision or rewrite that lost to the ruling."""

    @property
    def rule(self) -> str:
        """The rule whose decision or rewrite lost."""
    @property
    def by(self) -> str:
        """The rule that won."""
    @property
    def what(self) -> str:
        """What it had decided (``deny``, ``rewrite``, ``rewrite arguments.limit``)."""
    @property
    def why(self) -> str:
        """Why it lost."""

@final
class Evaluation:
    """What evaluating one rule came to at one tick."""

    @property
    def rule(self) -> str: ...
    @property
    def result(self) -> str:
        """``fired``, ``not_matched``, ``undetermined``, ``failed``, ``suppressed``,
        ``running``, ``disabled`` or ``inactive``."""
    @property
    def reason(self) -> str | None: ...

@final
class ModeChange:
    """A change of mode, and the ``on_mode_change`` tick that ran for it."""

    @property
    def from_mode(self) -> str: ...
    @property
    def to_mode(self) -> str: ...
    @property
    def outcome(self) -> Outcome: ...

@final
class Enrichment:
    """Knowledge for the agent's system prompt."""

    @property
    def section(self) -> str | None:
        """The ``<reference_material>`` section, or ``None`` when no source went in."""
    @property
    def selected(self) -> list[str]: ...
    @property
    def tokens_used(self) -> int: ...
    @property
    def budget(self) -> int: ...
    def integrate(self, system_prompt: str) -> str:
        """``system_prompt`` with the section after it."""

@final
class LogLine:
    """``log``: a line a rule wrote to the log."""

    @property
    def rule(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def level(self) -> LogLevel: ...
    @property
    def message(self) -> str: ...

@final
class StateWrite:
    """``set_state``: a value a rule stored in its plugin's state."""

    @property
    def rule(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def plugin(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> JSON: ...

@final
class EmittedEvent:
    """``emit_event``: an event a rule published on the bus."""

    @property
    def rule(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def event_type(self) -> str: ...
    @property
    def payload(self) -> JSON: ...

@final
class Decided:
    """``decide``: what one rule decided (merged with the others' into the ruling)."""

    @property
    def rule(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def decision(self) -> Decision: ...
    @property
    def reason(self) -> str: ...

@final
class Rewrite:
    """``rewrite``: the argument paths one rule set (merged into the ruling)."""

    @property
    def rule(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def set(self) -> dict[str, JSON]:
        """The paths set (``"arguments.limit"``) and their values, in order."""

@final
class Enriched:
    """``enrich_context``: a rule enriched the query with knowledge."""

    @property
    def rule(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def enrichment(self) -> Enrichment: ...

def _rust_ticks(session: Session, hook: str, event: Event | None, n: int) -> float:
    """For the benchmark: ``n`` ticks from Rust, without Python in the loop; ns per tick."""

def _timed_tick(session: Session, hook: str, event: Event | None = None) -> tuple[Outcome, int, int, int]:
    """For the agent benchmark: ``session.tick``, timed; the outcome, and the ns reading the
    event, in the engine, and releasing and taking back the GIL around it."""
