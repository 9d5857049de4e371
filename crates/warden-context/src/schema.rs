//! The context API as a table: every record, field, type, scalar id and documentation string
//! that conditions, templates and scripts can read, and the helpers. [`schema()`] builds the
//! checker's schema from these tables; the book's reference is checked against it by a test.

use std::sync::OnceLock;

use warden_expr::{FieldDef, MapId, ScalarId, Schema, Type};
use warden_load::{Hook, SettingDef, SettingKind};

use crate::event::TurnField;

/// The scalar ids the native path reads facts by (see `Frame`'s `Facts` implementation).
pub(crate) mod id {
    use warden_expr::{MapId, ScalarId};
    pub(crate) const TURN_NUMBER: ScalarId = ScalarId(0);
    pub(crate) const TOKEN_USAGE: ScalarId = ScalarId(1);
    pub(crate) const CONTEXT_USAGE: ScalarId = ScalarId(2);
    pub(crate) const ITERATION_COUNT: ScalarId = ScalarId(3);
    pub(crate) const MAX_ITERATIONS: ScalarId = ScalarId(4);
    pub(crate) const COUNT_TURNS: ScalarId = ScalarId(5);
    pub(crate) const COUNT_QUERIES: ScalarId = ScalarId(6);
    pub(crate) const COUNT_TOOL_CALLS: ScalarId = ScalarId(7);
    pub(crate) const COUNT_TOOL_FAILURES: ScalarId = ScalarId(8);
    pub(crate) const COUNT_MESSAGES: ScalarId = ScalarId(9);
    pub(crate) const USER_ID: ScalarId = ScalarId(10);
    pub(crate) const PROJECT_ID: ScalarId = ScalarId(11);
    pub(crate) const QUERY: ScalarId = ScalarId(12);
    pub(crate) const MODE: ScalarId = ScalarId(13);
    pub(crate) const EVENT_HOOK: ScalarId = ScalarId(14);
    pub(crate) const EVENT_TOOL_NAME: ScalarId = ScalarId(15);
    pub(crate) const EVENT_TIME: ScalarId = ScalarId(16);
    pub(crate) const TOOL_NAME: ScalarId = ScalarId(17);
    pub(crate) const CONTEXT_WINDOW: ScalarId = ScalarId(18);
    pub(crate) const TURN_FINAL: ScalarId = ScalarId(19);
    pub(crate) const PROJECT_ROOT: ScalarId = ScalarId(20);
    pub(crate) const SHELL_DESTROYS: ScalarId = ScalarId(21);
    pub(crate) const SHELL_DELETES_OUTSIDE: ScalarId = ScalarId(22);
    pub(crate) const SHELL_WRITES_OUTSIDE: ScalarId = ScalarId(23);
    pub(crate) const SHELL_UNSEEN_CODE: ScalarId = ScalarId(24);
    pub(crate) const SHELL_BEYOND_PROJECT: ScalarId = ScalarId(25);
    pub(crate) const SHELL_TOUCHES_WARDEN: ScalarId = ScalarId(26);
    pub(crate) const FAILURES: MapId = MapId(0);
    pub(crate) const CALLS: MapId = MapId(1);
}

/// The name of the hidden root that carries the reading plugin's state.
pub const STATE_ROOT: &str = "w_state";

/// The name of the hidden root that carries the reading plugin's state of this session.
pub(crate) const SESSION_STATE_ROOT: &str = "w_session_state";

/// The name of the root that holds the rule's plugin settings.
pub const SETTINGS_ROOT: &str = "settings";

/// Why a rule outside a plugin cannot read `settings`.
pub const NO_SETTINGS: &str = "this rule is not part of a plugin, so it has no settings; settings are declared in a plugin's manifest.toml ([settings.NAME])";

/// The first scalar id of settings: setting `i` of a program is `ScalarId(SETTINGS_BASE + i)`.
pub const SETTINGS_BASE: u16 = 1024;

/// What `settings` says about itself in the documented schema.
const SETTINGS_DOC: &str = "The settings of the rule's plugin, as its manifest declares them (`settings.max_sources`): the manifest's default, or the value the user set. Rules outside a plugin have none.";

/// A field's type, in the table: scalars, free-form values, and records named by the table.
#[derive(Clone, Copy)]
enum Ty {
    Int,
    Float,
    Str,
    Bool,
    Any,
    /// A string, or null.
    NullableStr,
    /// A map from names to integers (or to anything).
    MapOfInt,
    MapOfAny,
    /// A record of the table, by name.
    Record(&'static str),
    /// A list of records of the table, by name.
    ListOf(&'static str),
    /// A list of strings.
    ListOfStr,
}

/// How a field is reached.
#[derive(Clone, Copy)]
enum Reach {
    /// Read from the root's value.
    Plain,
    /// A typed scalar the native path reads by id.
    Scalar(ScalarId),
    /// A map the native path looks keys up in directly.
    DirectMap(MapId),
    /// Another name for the field at this path.
    Alias(&'static str),
}

/// One field of a record.
struct F {
    name: &'static str,
    ty: Ty,
    reach: Reach,
    doc: &'static str,
}

const fn plain(name: &'static str, ty: Ty, doc: &'static str) -> F {
    F {
        name,
        ty,
        reach: Reach::Plain,
        doc,
    }
}

const fn scalar(name: &'static str, ty: Ty, id: ScalarId, doc: &'static str) -> F {
    F {
        name,
        ty,
        reach: Reach::Scalar(id),
        doc,
    }
}

const fn alias(name: &'static str, to: &'static str, doc: &'static str) -> F {
    F {
        name,
        ty: Ty::Any,
        reach: Reach::Alias(to),
        doc,
    }
}

/// The records, each before the records that use it.
const RECORDS: &[(&str, &[F])] = &[
    (
        "context.turn",
        &[
            scalar(
                TurnField::Number.name(),
                Ty::Int,
                id::TURN_NUMBER,
                "Turn number, from 1 (0 before the first turn). Reported by the agent loop, or counted by Warden at each on_turn_start when it is not.",
            ),
            scalar(
                TurnField::TokenUsage.name(),
                Ty::Float,
                id::TOKEN_USAGE,
                "Share of the token budget used, 0.0 to 1.0.",
            ),
            scalar(
                TurnField::ContextUsage.name(),
                Ty::Float,
                id::CONTEXT_USAGE,
                "Share of the context window used, 0.0 to 1.0.",
            ),
            scalar(
                TurnField::IterationCount.name(),
                Ty::Int,
                id::ITERATION_COUNT,
                "Iterations (model calls) so far in this query.",
            ),
            scalar(
                TurnField::MaxIterations.name(),
                Ty::Int,
                id::MAX_ITERATIONS,
                "The iteration budget; 0 when the agent loop has not reported one.",
            ),
            scalar(
                TurnField::ContextWindow.name(),
                Ty::Int,
                id::CONTEXT_WINDOW,
                "The model's context window in tokens, as the agent loop reported it; 0 when it has not.",
            ),
            scalar(
                TurnField::Final.name(),
                Ty::Bool,
                id::TURN_FINAL,
                "True when the agent is about to stop: this turn gave its final answer (reported by the agent loop as `\"turn\": {\"final\": true}`; false again at the next turn or query).",
            ),
        ],
    ),
    (
        "message",
        &[
            plain("role", Ty::Str, "`user`, `assistant`, `system` or `tool`."),
            plain("content", Ty::Str, "The message text."),
            plain("turn", Ty::Int, "The turn it arrived in."),
        ],
    ),
    (
        "tool record",
        &[
            plain("name", Ty::Str, "The tool's name."),
            plain(
                "arguments",
                Ty::Any,
                "Its arguments, as the agent loop reported them.",
            ),
            plain(
                "result",
                Ty::Any,
                "What it returned (null while pending or if it failed).",
            ),
            plain("error", Ty::NullableStr, "Why it failed, or null."),
            plain("success", Ty::Bool, "Whether it returned successfully."),
            plain("status", Ty::Str, "`pending`, `ok` or `failed`."),
            plain("turn", Ty::Int, "The turn it was called in."),
            plain(
                "time",
                Ty::Float,
                "When it was last updated, in seconds since the Unix epoch.",
            ),
            plain(
                "timestamp",
                Ty::Float,
                "The same as `time`, by the name the specification's data model gives it.",
            ),
        ],
    ),
    (
        "context.history.counts",
        &[
            scalar(
                "turns",
                Ty::Int,
                id::COUNT_TURNS,
                "Turns started in this session.",
            ),
            scalar("queries", Ty::Int, id::COUNT_QUERIES, "Queries received."),
            scalar(
                "tool_calls",
                Ty::Int,
                id::COUNT_TOOL_CALLS,
                "Tool calls made.",
            ),
            scalar(
                "tool_failures",
                Ty::Int,
                id::COUNT_TOOL_FAILURES,
                "Tool calls that failed.",
            ),
            scalar(
                "messages",
                Ty::Int,
                id::COUNT_MESSAGES,
                "Messages added to the history.",
            ),
        ],
    ),
    (
        "context.history",
        &[
            plain(
                "messages",
                Ty::ListOf("message"),
                "Recent messages, oldest first (the last 50 by default).",
            ),
            plain(
                "tools",
                Ty::ListOf("tool record"),
                "Recent tool calls, oldest first (the last 50 by default).",
            ),
            F {
                name: "failures",
                ty: Ty::MapOfInt,
                reach: Reach::DirectMap(id::FAILURES),
                doc: "Failures per tool name over the session: `context.history.failures['web_search']`.",
            },
            F {
                name: "calls",
                ty: Ty::MapOfInt,
                reach: Reach::DirectMap(id::CALLS),
                doc: "Calls per tool name over the session.",
            },
            plain(
                "counts",
                Ty::Record("context.history.counts"),
                "Totals over the session.",
            ),
            alias(
                "tool_count",
                "context.history.counts.tool_calls",
                "Tool calls made in this session (the specification's name for `counts.tool_calls`).",
            ),
        ],
    ),
    (
        "context.user",
        &[
            scalar(
                "id",
                Ty::Str,
                id::USER_ID,
                "Its id (`default` until an event names it).",
            ),
            plain(
                "settings",
                Ty::MapOfAny,
                "A snapshot of its settings, as the agent loop reported them.",
            ),
        ],
    ),
    (
        "context.project",
        &[
            scalar(
                "id",
                Ty::Str,
                id::PROJECT_ID,
                "Its id (`default` until an event names it).",
            ),
            plain(
                "settings",
                Ty::MapOfAny,
                "A snapshot of its settings, as the agent loop reported them.",
            ),
            scalar(
                "root",
                Ty::Str,
                id::PROJECT_ROOT,
                "The project's folder, as the agent loop reported it (`\"project\": {\"root\": \"/src/app\"}`); empty until it does. Tells paths inside the project from paths outside.",
            ),
        ],
    ),
    (
        "context",
        &[
            plain("turn", Ty::Record("context.turn"), "The current turn."),
            plain(
                "history",
                Ty::Record("context.history"),
                "What happened so far in the session.",
            ),
            plain("user", Ty::Record("context.user"), "The user."),
            plain("project", Ty::Record("context.project"), "The project."),
            alias(
                "state",
                STATE_ROOT,
                "The rule's plugin state shared by every session of the user in the project, persistent across turns and sessions (`set_state`): `context.state.get('key')` or `context.state.get('key', default)`.",
            ),
            alias(
                "session_state",
                SESSION_STATE_ROOT,
                "The rule's plugin state of this session alone (`set_state` with `scope = \"session\"`), saved with the session: `context.session_state.get('key', default)`. Another session never sees it.",
            ),
            scalar(
                "query",
                Ty::Str,
                id::QUERY,
                "The text of the latest user query (empty before the first).",
            ),
            scalar(
                "mode",
                Ty::Str,
                id::MODE,
                "The active mode (`default` unless modes are configured).",
            ),
            alias(
                "token_usage",
                "context.turn.token_usage",
                "Shorthand for `context.turn.token_usage`.",
            ),
        ],
    ),
    (
        "event",
        &[
            scalar(
                "hook",
                Ty::Str,
                id::EVENT_HOOK,
                "The hook being handled (`on_tool_complete`...).",
            ),
            scalar(
                "tool_name",
                Ty::Str,
                id::EVENT_TOOL_NAME,
                "The tool of this event, or an empty string.",
            ),
            plain(
                "query",
                Ty::Any,
                "The query of an on_query_start event: `event.query.text` and any other fields the loop sent; null otherwise.",
            ),
            plain(
                "message",
                Ty::Any,
                "The message the event carries (`role`, `content`), or null.",
            ),
            plain(
                "error",
                Ty::NullableStr,
                "The error of an on_tool_failure event, or null.",
            ),
            plain(
                "data",
                Ty::Any,
                "Free-form data the agent loop attached, or null.",
            ),
            scalar(
                "time",
                Ty::Float,
                id::EVENT_TIME,
                "When it happened, in seconds since the Unix epoch.",
            ),
        ],
    ),
    (
        "shell command",
        &[
            plain(
                "program",
                Ty::Str,
                "The program, by its base name (`/bin/rm` and `\\rm` are `rm`), with the wrappers it ran under taken off.",
            ),
            plain(
                "args",
                Ty::ListOfStr,
                "Its arguments as the program gets them: quotes removed, `~`, `$HOME`, `$PWD` and variables set earlier in the command expanded.",
            ),
            plain(
                "text",
                Ty::Str,
                "The command as the shell would run it, quoted where needed (`rm -rf /`).",
            ),
            plain(
                "wrappers",
                Ty::ListOfStr,
                "The wrappers it ran under, outermost first (`sudo`, `timeout`, `xargs`...).",
            ),
            plain(
                "via",
                Ty::NullableStr,
                "How it was reached when not written directly (`sh -c`, `eval`, `xargs`, `find -exec`, `python3 -c`...), or null.",
            ),
        ],
    ),
    (
        "shell path",
        &[
            plain(
                "path",
                Ty::Str,
                "The path, resolved: against the working folder as `cd` moves it, `~`, `..`; for a glob, the folder it ranges over (`/*` is `/`).",
            ),
            plain("written", Ty::Str, "The path as written."),
            plain(
                "place",
                Ty::Str,
                "Where it is: `inside` the project, `root` (the project's folder itself), `warden` (Warden's own files or an agent's hook configuration), `temp` (`/tmp`...), `home` (the home folder itself), `system` (`/`, `/etc`, `/usr`...), `device` (`/dev/sda`), `outside` (anywhere else), `unknown`. A link inside the project that leads out is where it leads.",
            ),
            plain("glob", Ty::Bool, "Written with a glob (`*`, `?`, `[`)."),
            plain(
                "covers_project",
                Ty::Bool,
                "The project is inside it (`..`, the home folder, `/`).",
            ),
            plain("command", Ty::Str, "The command that deletes or writes it."),
        ],
    ),
    (
        "shell opaque",
        &[
            plain(
                "kind",
                Ty::Str,
                "What cannot be seen through: `unparsed`, `dynamic_command` (`$CMD -rf /`), `dynamic_code` (`eval \"$X\"`), `piped_code` (`... | sh`), `download_and_run` (`curl ... | sh`), `inline_code` (`python -c` whose calls cannot be read), `unknown_input` (`... | xargs rm`).",
            ),
            plain("text", Ty::Str, "The part, as written."),
        ],
    ),
    (
        "shell finding",
        &[
            plain(
                "kind",
                Ty::Str,
                "What it is: `delete_outside`, `overwrite_outside`, `device_write`, `format_device`, `permission_change`, `move_away`, `fork_bomb`, `warden_files`, `forced_push` (these destroy); `delete_project`, `write_outside`, `unseen_code`, `beyond_project`, `forced_push_unnamed` (these deserve a look).",
            ),
            plain("command", Ty::Str, "The command it is in."),
            plain(
                "path",
                Ty::Str,
                "The path concerned (resolved), or an empty string.",
            ),
            plain(
                "message",
                Ty::Str,
                "What it does, naming the command and the path, and what to do instead: written for the agent.",
            ),
        ],
    ),
    (
        "tool.shell",
        &[
            plain(
                "command",
                Ty::Str,
                "The command analyzed; empty for a tool that is not a declared shell.",
            ),
            plain(
                "commands",
                Ty::ListOf("shell command"),
                "Every simple command that would run, in order: through lists, pipelines, subshells, loops, functions, `sh -c`, `eval`, `xargs`, `find -exec`, inline interpreter code.",
            ),
            plain(
                "programs",
                Ty::ListOfStr,
                "The programs that would run, each once, in order.",
            ),
            plain(
                "deletes",
                Ty::ListOf("shell path"),
                "The paths deleted (and moved away).",
            ),
            plain(
                "writes",
                Ty::ListOf("shell path"),
                "The paths written: overwritten, truncated, created, appended to, copied or moved to, their permissions changed.",
            ),
            plain(
                "opaque",
                Ty::ListOf("shell opaque"),
                "What Warden cannot see through.",
            ),
            plain(
                "findings",
                Ty::ListOf("shell finding"),
                "What a guard acts on, the ones that destroy first.",
            ),
            scalar(
                "destroys",
                Ty::Bool,
                id::SHELL_DESTROYS,
                "It destroys what is outside the project, whatever the wrapping: deletes, overwrites, device writes, formats, recursive permission changes, moves of home or system folders, fork bombs, Warden's own files, forced pushes to `main`.",
            ),
            scalar(
                "deletes_outside_project",
                Ty::Bool,
                id::SHELL_DELETES_OUTSIDE,
                "It deletes something outside the project (temporary files aside).",
            ),
            scalar(
                "writes_outside_project",
                Ty::Bool,
                id::SHELL_WRITES_OUTSIDE,
                "It writes something outside the project (temporary files aside).",
            ),
            scalar(
                "runs_unseen_code",
                Ty::Bool,
                id::SHELL_UNSEEN_CODE,
                "It runs code Warden cannot read (`opaque` is not empty).",
            ),
            scalar(
                "reaches_beyond_project",
                Ty::Bool,
                id::SHELL_BEYOND_PROJECT,
                "It reaches beyond the project without naming a path: the user's crontab removed or replaced, every process signalled (`kill -1`), the machine shut down or restarted.",
            ),
            scalar(
                "touches_warden",
                Ty::Bool,
                id::SHELL_TOUCHES_WARDEN,
                "It writes, deletes or moves Warden's own files (`.warden/`) or an agent's hook configuration (`.claude/settings.json`...).",
            ),
            plain(
                "destruction",
                Ty::Str,
                "The message of the first finding that destroys, or an empty string: a refusal's reason.",
            ),
            plain(
                "concern",
                Ty::Str,
                "The message of the first finding that does not destroy but deserves a person's look, or an empty string: a question's reason.",
            ),
        ],
    ),
    (
        "tool",
        &[
            scalar("name", Ty::Str, id::TOOL_NAME, "The tool's name."),
            plain("arguments", Ty::Any, "Its arguments."),
            plain(
                "shell",
                Ty::Record("tool.shell"),
                "What the command of a shell tool would do, seen as a shell would run it (made when a rule first reads it). A tool is a shell when declared one (`[shell]` in warden.toml; Claude Code's `Bash` is one by default).",
            ),
        ],
    ),
];

/// The roots: name, type, documentation.
const ROOTS: &[(&str, Ty, &str)] = &[
    (
        "context",
        Ty::Record("context"),
        "The session: turn, history, user, project, plugin state, mode.",
    ),
    ("event", Ty::Record("event"), "The event being handled."),
    (
        "tool",
        Ty::Record("tool"),
        "The tool of a tool hook (on_tool_call, on_tool_complete, on_tool_failure).",
    ),
    (
        "result",
        Ty::Any,
        "What the tool returned, at on_tool_complete. Free-form: a missing key makes the condition undetermined.",
    ),
];

/// Shorthands for fields, usable as roots.
const ROOT_ALIASES: &[(&str, &str, &str)] = &[
    (
        "token_usage",
        "context.turn.token_usage",
        "Shorthand for `context.turn.token_usage`.",
    ),
    (
        "turn_number",
        "context.turn.number",
        "Shorthand for `context.turn.number`.",
    ),
];

/// The helpers: name, parameters, body (an expression over the parameters), documentation.
const HELPERS: &[(&str, &[&str], &str, &str)] = &[
    (
        "context_above_threshold",
        &["t"],
        "context.turn.token_usage >= t",
        "True when the share of the token budget used is at least `t`.",
    ),
    (
        "iterations_above_threshold",
        &["t"],
        "context.turn.max_iterations > 0 and context.turn.iteration_count >= t * context.turn.max_iterations",
        "True when at least the share `t` of the iteration budget is used (false while no budget is reported).",
    ),
    (
        "tool_completed",
        &["name"],
        "event.hook == 'on_tool_complete' and event.tool_name == name",
        "True while handling the successful completion of a call to `name`.",
    ),
    (
        "tool_failed",
        &["name"],
        "event.hook == 'on_tool_failure' and event.tool_name == name",
        "True while handling a failure of `name`.",
    ),
    (
        "failure_count",
        &["name"],
        "get(context.history.failures, name, 0)",
        "How many times `name` failed in this session.",
    ),
    (
        "tool_calls",
        &["name"],
        "get(context.history.calls, name, 0)",
        "How many times `name` was called in this session.",
    ),
    (
        "query_mentions",
        &["word"],
        "contains(lower(context.query), lower(word))",
        "True when the latest query contains `word`, ignoring case.",
    ),
];

/// The context schema, as documented: the roots and helpers every rule can use, with
/// `settings` shown as the map it is for an unknown plugin. Each plugin's rules are checked
/// against this schema with `settings` narrowed to the settings that plugin declares.
pub fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut s = build_schema();
        s.root(SETTINGS_ROOT, Type::map(Type::Any), SETTINGS_DOC);
        s
    })
}

/// The schema the rules of one plugin are checked against: `settings` has exactly the
/// plugin's settings, each a typed scalar (so `token_usage > settings.threshold` takes the
/// fast path).
pub fn plugin_schema(settings: &[(ScalarId, &SettingDef)]) -> Schema {
    static BASE: OnceLock<Schema> = OnceLock::new();
    let mut s = BASE.get_or_init(build_schema).clone();
    let fields = settings
        .iter()
        .map(|(id, def)| {
            let ty = match def.kind {
                SettingKind::Integer => Type::Int,
                SettingKind::Float => Type::Float,
                SettingKind::String => Type::Str,
                SettingKind::Boolean => Type::Bool,
            };
            let doc = if def.description.is_empty() {
                "A plugin setting."
            } else {
                def.description.as_str()
            };
            FieldDef::new(&def.name, ty, doc).scalar(*id)
        })
        .collect();
    let record = s.record(SETTINGS_ROOT, fields);
    s.root(SETTINGS_ROOT, Type::Record(record), SETTINGS_DOC);
    s
}

/// The schema of the tables (without `settings`, which depends on the plugin).
fn build_schema() -> Schema {
    let mut s = Schema::new();
    let mut records: Vec<(&str, warden_expr::RecordId)> = Vec::new();
    let ty = |t: Ty, records: &[(&str, warden_expr::RecordId)]| {
        let record = |name: &str| {
            records
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, r)| Type::Record(*r))
                .unwrap_or(Type::Any)
        };
        match t {
            Ty::Int => Type::Int,
            Ty::Float => Type::Float,
            Ty::Str => Type::Str,
            Ty::Bool => Type::Bool,
            Ty::Any => Type::Any,
            Ty::NullableStr => Type::nullable(Type::Str),
            Ty::MapOfInt => Type::map(Type::Int),
            Ty::MapOfAny => Type::map(Type::Any),
            Ty::Record(name) => record(name),
            Ty::ListOf(name) => Type::list(record(name)),
            Ty::ListOfStr => Type::list(Type::Str),
        }
    };
    for (name, fields) in RECORDS {
        let defs = fields
            .iter()
            .map(|f| match f.reach {
                Reach::Plain => FieldDef::new(f.name, ty(f.ty, &records), f.doc),
                Reach::Scalar(id) => FieldDef::new(f.name, ty(f.ty, &records), f.doc).scalar(id),
                Reach::DirectMap(id) => {
                    FieldDef::new(f.name, ty(f.ty, &records), f.doc).direct_map(id)
                }
                Reach::Alias(to) => FieldDef::alias(f.name, to, f.doc),
            })
            .collect();
        let id = s.record(name, defs);
        records.push((name, id));
    }
    for (name, t, doc) in ROOTS {
        s.root(name, ty(*t, &records), doc);
    }
    s.hidden_root(STATE_ROOT, Type::map(Type::Any));
    s.hidden_root(SESSION_STATE_ROOT, Type::map(Type::Any));
    for (name, to, doc) in ROOT_ALIASES {
        s.root_alias(name, to, doc);
    }
    for (name, params, body, doc) in HELPERS {
        s.helper(name, params, body, doc);
    }
    s
}

/// The names of the fields of a record of the table, in order (for messages that list them).
pub(crate) fn field_names(record: &str) -> Vec<&'static str> {
    RECORDS
        .iter()
        .find(|(n, _)| *n == record)
        .map(|(_, fields)| fields.iter().map(|f| f.name).collect())
        .unwrap_or_default()
}

/// Roots that rules of `hook` cannot read, each with the reason shown to the author.
pub fn unavailable(hook: Hook) -> &'static [(&'static str, &'static str)] {
    match hook {
        Hook::OnToolComplete => &[],
        Hook::OnToolCall => &[(
            "result",
            "on_tool_call runs before the tool returns; use on_tool_complete",
        )],
        Hook::OnToolFailure => &[("result", "a failed tool has no result; read `event.error`")],
        _ => &[
            (
                "tool",
                "only the tool hooks (on_tool_call, on_tool_complete, on_tool_failure) have a tool; `context.history.tools` holds past calls",
            ),
            (
                "result",
                "only on_tool_complete has a tool result; `context.history.tools` holds past results",
            ),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_expr::{CompileOptions, Compiler};

    #[test]
    fn a_turn_is_documented_with_the_one_list_of_its_fields() {
        let (_, fields) = RECORDS
            .iter()
            .find(|(name, _)| *name == "context.turn")
            .unwrap();
        let documented: Vec<&str> = fields.iter().map(|f| f.name).collect();
        assert_eq!(documented, crate::event::TURN_FIELDS);
    }

    #[test]
    fn the_schema_is_consistent() {
        let compiler = Compiler::new(schema().clone());
        // Every documented path checks, and every helper body compiles.
        for (path, doc) in schema().paths() {
            assert!(!doc.is_empty(), "{path} has no documentation");
            compiler
                .check(&path, &CompileOptions::default())
                .unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        for h in schema().helpers() {
            let args = h.params().iter().map(|_| "'x'").collect::<Vec<_>>();
            let args = if h.name().ends_with("threshold") {
                vec!["0.5"]
            } else {
                args
            };
            let call = format!("{}({})", h.name(), args.join(", "));
            let ty = compiler.check(&call, &CompileOptions::default());
            assert!(ty.is_ok(), "{call}: {ty:?}");
        }
    }

    #[test]
    fn hook_availability_is_explained() {
        let compiler = Compiler::new(schema().clone());
        let opts = CompileOptions {
            unavailable: unavailable(Hook::OnTurnStart),
            force_script: false,
        };
        let err = compiler.compile("tool.name == 'x'", &opts).unwrap_err();
        assert!(err.message().contains("only the tool hooks"), "{err}");
        // tool_completed works on any hook: it reads the event, not `tool`.
        compiler
            .compile("tool_completed('vault_search')", &opts)
            .unwrap();
    }
}
