//! The Lua side of a session: the runtime (created when a script first runs, so a session
//! without scripts pays nothing for Lua), the scripts waiting to be resumed, and the run state
//! of its behaviors.

use std::sync::Arc;

use warden_load::{Decision, DeliverAt, Hook, LogLevel, Priority, Scope};

use crate::session::keys::{IndexMap, RuleId};
use warden_program::behavior::run::TreeRun;
use warden_program::outcome::{Effect, Halted, Notification};
use warden_program::program::Program;
use warden_program::rule::CompiledRule;

/// The Lua side of a saved session: waiting scripts as replay journals, and scripts' globals.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct SavedScripts {
    /// Waiting scripts: the rule, the node (`ROOT` for its own script), the replay record.
    tasks: Vec<(RuleId, u32, warden_lua::Journal)>,
    /// What scripts keep in their globals: the rule, which of its scripts, the data.
    globals: Vec<(RuleId, u32, warden_lua::Recorded)>,
}

/// Most values a waiting script's replay record holds, by default (`[sessions]
/// journal_limit` in `warden.toml`).
pub const DEFAULT_JOURNAL_LIMIT: usize = 100_000;

/// The node of a rule's own script (not a behavior node) in the table of waiting scripts.
pub(crate) const ROOT: u32 = u32::MAX;

/// The Lua side of a session: the runtime (created when a script first runs, so a session
/// without scripts pays nothing for Lua) and the scripts waiting to be resumed, by rule.
pub(crate) struct Scripts {
    pub(crate) runtime: Option<warden_lua::Runtime>,
    /// Waiting scripts, by (rule, node): a rule's own script is node [`ROOT`].
    pub(crate) tasks: IndexMap<(u32, u32), (warden_lua::Task, Arc<str>)>,
    /// Behavior runs, by rule: running nodes, and decorator memory that outlives a run.
    pub(crate) trees: IndexMap<u32, TreeRun>,
    pub(crate) limits: warden_lua::Limits,
    /// Whether waiting scripts keep a replay record (the session is saved after every tick).
    pub(crate) recording: bool,
    /// Most values a replay record may hold before its script is stopped.
    pub(crate) journal_limit: usize,
    /// Waiting scripts a saved session could not bring back, by rule, with why: their rules
    /// are halted at the next tick.
    pub(crate) lost: Vec<(u32, String)>,
    /// What each rule adds to the seed of the scripts it starts (`keys::key_seed` of its key),
    /// by rule, with the key it was made from (a reload gives rules new keys).
    pub(crate) seeds: IndexMap<u32, (Arc<str>, u64)>,
    /// The session id's part of the seed of a step's scripts (`keys::session_seed`), with the
    /// id it was made from: hashed once, where each step that starts a script hashed it again.
    pub(crate) session_seed: Option<(Box<str>, u64)>,
}

/// The names the script API accepts, from the same tables rule files use.
const VOCABULARY: warden_lua::Vocabulary = warden_lua::Vocabulary {
    hooks: Hook::NAMES,
    priorities: Priority::NAMES,
    delivery_points: DeliverAt::NAMES,
    log_levels: &["debug", "info", "warning", "warn", "error"],
    decisions: Decision::NAMES,
};

impl Scripts {
    /// What of the Lua side a saved session keeps.
    pub(crate) fn save(&self, program: Option<&Program>) -> SavedScripts {
        let Some(program) = program else {
            return SavedScripts::default();
        };
        let mut tasks: Vec<(RuleId, u32, warden_lua::Journal)> = self
            .tasks
            .iter()
            .filter_map(|(&(rule, node), (task, _))| {
                Some((RuleId::of(program, rule)?, node, task.journal()?))
            })
            .collect();
        tasks.sort_by(|a, b| (&a.0.key, a.1).cmp(&(&b.0.key, b.1)));
        let mut globals = Vec::new();
        if let Some(rt) = &self.runtime {
            // Only compiled rules can have run a script (or had its globals put back).
            for (ix, rule) in program.rules.iter().enumerate() {
                let Some(body) = rule.compiled_body() else {
                    continue;
                };
                for (n, script) in body.condition.scripts().into_iter().enumerate() {
                    match rt.globals(script) {
                        Some(warden_lua::Recorded::Table(t)) if t.is_empty() => {}
                        Some(data) => {
                            if let (Some(id), Ok(n)) =
                                (RuleId::of(program, ix as u32), u32::try_from(n))
                            {
                                globals.push((id, n, data));
                            }
                        }
                        None => {}
                    }
                }
            }
        }
        SavedScripts { tasks, globals }
    }

    /// Puts back what a saved session kept of the Lua side, under `program`: each waiting
    /// script is run again from its start against its record until it waits where it waited
    /// (see `warden_lua::Runtime::restore`), then the scripts' globals are set. A script that
    /// cannot be brought back (its rule changed, or its re-run diverged) is remembered in
    /// `lost`, and its rule halted at the next tick.
    pub(crate) fn restore(&mut self, saved: SavedScripts, program: &Program) {
        if saved.tasks.is_empty() && saved.globals.is_empty() {
            return;
        }
        let timeout = self.limits.timeout;
        for (rule, node, journal) in saved.tasks {
            let Some(ix) = rule.find(program) else {
                // A rule that is gone or changed: the reload path reports it.
                if let Some(ix) = program.rules.iter().position(|r| r.key == rule.key) {
                    self.lost.push((
                        ix as u32,
                        "its rule changed while the session was saved".into(),
                    ));
                }
                continue;
            };
            let compiled = &program.rules[ix as usize];
            let Some(script) = compiled.body().and_then(|b| b.condition.script_of(node)) else {
                self.lost
                    .push((ix, "its script is no longer where it waited".into()));
                continue;
            };
            let script = script.clone();
            let restored = self
                .runtime()
                .and_then(|rt| rt.restore(&script, &journal, timeout).map_err(|e| e.reason));
            match restored {
                Ok(task) => {
                    self.tasks.insert((ix, node), (task, compiled.key.clone()));
                }
                Err(why) => {
                    tracing::warn!(rule = %compiled.key, reason = %why, "a waiting script could not be brought back");
                    self.lost.push((
                        ix,
                        format!("its waiting script could not be brought back: {why}"),
                    ));
                }
            }
        }
        for (rule, n, data) in saved.globals {
            let Some(ix) = rule.find(program) else {
                continue;
            };
            let scripts = program.rules[ix as usize]
                .body()
                .map(|b| b.condition.scripts())
                .unwrap_or_default();
            if let Some(script) = scripts.get(n as usize).map(|s| (*s).clone())
                && let Ok(rt) = self.runtime()
                && let Err(e) = rt.set_globals(&script, &data)
            {
                tracing::warn!(script = script.name(), error = %e, "a script's globals could not be put back");
            }
        }
    }

    pub(crate) fn new(limits: warden_lua::Limits) -> Self {
        Scripts {
            runtime: None,
            tasks: IndexMap::default(),
            trees: IndexMap::default(),
            limits,
            recording: false,
            journal_limit: DEFAULT_JOURNAL_LIMIT,
            lost: Vec::new(),
            seeds: IndexMap::default(),
            session_seed: None,
        }
    }

    pub(crate) fn runtime(&mut self) -> Result<&mut warden_lua::Runtime, String> {
        if self.runtime.is_none() {
            let mut rt = warden_lua::Runtime::new(self.limits, VOCABULARY)
                .map_err(|e| format!("the Lua runtime could not start: {e}"))?;
            rt.set_recording(self.recording);
            self.runtime = Some(rt);
        }
        self.runtime
            .as_mut()
            .ok_or_else(|| "the Lua runtime is unavailable".to_string())
    }

    /// Whether `rule` has something running: its script, or its behavior's tree.
    pub(crate) fn waiting(&self, rule: u32) -> bool {
        self.tasks.contains_key(&(rule, ROOT))
            || self.trees.get(&rule).is_some_and(TreeRun::is_running)
    }

    /// Stops whatever `rule` has running: its script, its tree and the tree's scripts, without
    /// a tick (a tree's `on_halted` actions do not run; see `Tick::halt_tree` for halts that
    /// happen within a tick).
    pub(crate) fn halt(&mut self, rule: u32, reason: &str) -> Vec<Halted> {
        let mut out = Vec::new();
        let mut nodes: Vec<u32> = self
            .tasks
            .keys()
            .filter(|(r, _)| *r == rule)
            .map(|(_, n)| *n)
            .collect();
        nodes.sort_unstable();
        let mut key = None;
        for n in nodes {
            if let Some((task, k)) = self.tasks.remove(&(rule, n)) {
                key = Some(k.clone());
                out.push(self.halt_task(task, k, reason));
            }
        }
        if let Some(run) = self.trees.get_mut(&rule)
            && run.is_running()
        {
            run.reset();
            if out.is_empty()
                && let Some(k) = key.or_else(|| self.trees.get(&rule).map(|t| t.key.clone()))
            {
                tracing::info!(rule = %k, reason, "behavior halted");
                out.push(Halted {
                    rule: k,
                    reason: reason.to_string(),
                });
            }
        }
        out
    }

    pub(crate) fn halt_task(
        &mut self,
        task: warden_lua::Task,
        key: Arc<str>,
        reason: &str,
    ) -> Halted {
        tracing::info!(rule = %key, script = task.script(), reason, "script halted");
        if let Some(rt) = &mut self.runtime {
            rt.halt(task);
        }
        Halted {
            rule: key,
            reason: reason.to_string(),
        }
    }

    pub(crate) fn halt_all(&mut self, reason: &str) -> Vec<Halted> {
        let mut rules: Vec<u32> = self
            .tasks
            .keys()
            .map(|(r, _)| *r)
            .chain(
                self.trees
                    .iter()
                    .filter(|(_, t)| t.is_running())
                    .map(|(r, _)| *r),
            )
            .collect();
        rules.sort_unstable();
        rules.dedup();
        rules
            .into_iter()
            .flat_map(|r| self.halt(r, reason))
            .collect()
    }
}

/// A script's action as the rule's effect (defaults as in rule files); an error when it
/// means nothing at `hook` (a decision made where the host cannot act on it).
pub(crate) fn script_effect(
    rule: &CompiledRule,
    hook: Hook,
    e: warden_lua::Effect,
) -> Result<Effect, String> {
    let effect = match e {
        warden_lua::Effect::Notify {
            message,
            category,
            priority,
            deliver_at,
        } => Effect::NotifySelf(Notification {
            rule: rule.key.clone(),
            message: Arc::from(message),
            category: Arc::from(category.as_deref().unwrap_or("info")),
            priority: priority
                .as_deref()
                .and_then(Priority::parse)
                .unwrap_or(Priority::Normal),
            deliver_at: deliver_at
                .as_deref()
                .and_then(DeliverAt::parse)
                .unwrap_or(DeliverAt::TurnStart),
            fired_at: hook,
        }),
        warden_lua::Effect::Log { level, message } => Effect::Log {
            rule: rule.key.clone(),
            level: level
                .as_deref()
                .and_then(LogLevel::parse)
                .unwrap_or(LogLevel::Info),
            message,
        },
        warden_lua::Effect::SetState {
            key,
            value,
            session,
        } => Effect::SetState {
            rule: rule.key.clone(),
            plugin: rule.def.plugin.clone(),
            scope: if session {
                Scope::Session
            } else {
                Scope::Shared
            },
            key,
            value: Box::new(value),
        },
        warden_lua::Effect::EmitEvent {
            event_type,
            payload,
        } => Effect::EmitEvent {
            rule: rule.key.clone(),
            event_type: Arc::from(event_type),
            payload: Box::new(payload),
        },
        warden_lua::Effect::Decide { decision, reason } => Effect::Decide {
            rule: rule.key.clone(),
            // Checked against the vocabulary when the script called it.
            decision: Decision::parse(&decision).ok_or("decide: unknown decision")?,
            reason: Arc::from(reason),
        },
        warden_lua::Effect::Rewrite { set } => Effect::Rewrite {
            rule: rule.key.clone(),
            set: set
                .into_iter()
                .map(|(path, value)| (path.split('.').map(str::to_string).collect(), value))
                .collect(),
        },
    };
    match effect.misplaced_at(hook) {
        Some(why) => Err(why),
        None => Ok(effect),
    }
}
