//! The Lua side of a session: the runtime (created when a script first runs, so a session
//! without scripts pays nothing for Lua), the scripts waiting to be resumed, and the run state
//! of its behaviors.

use std::sync::Arc;

use warden_load::{Decision, DeliverAt, Hook, LogLevel, Priority};

use crate::behavior::run::TreeRun;
use crate::outcome::{Effect, Halted, Notification};
use crate::program::Program;
use crate::rule::CompiledRule;
use crate::session::keys::{IndexMap, RuleId};

/// The Lua side of a saved session: waiting scripts as replay journals, and scripts' globals.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct SavedScripts {
    /// The rules whose scripts were waiting.
    waiting: Vec<RuleId>,
}

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
        let mut waiting: Vec<RuleId> = match program {
            Some(p) => self
                .tasks
                .keys()
                .filter_map(|(rule, _)| RuleId::of(p, *rule))
                .collect(),
            None => Vec::new(),
        };
        waiting.sort_by(|a, b| a.key.cmp(&b.key));
        waiting.dedup();
        SavedScripts { waiting }
    }

    /// Puts back what a saved session kept of the Lua side, under `program`; what could not
    /// be put back is halted.
    pub(crate) fn restore(
        &mut self,
        saved: SavedScripts,
        _program: &Program,
        _session: &str,
    ) -> Vec<Halted> {
        saved
            .waiting
            .into_iter()
            .map(|r| Halted {
                rule: r.key,
                reason: "its waiting script could not be resumed in this process".to_string(),
            })
            .collect()
    }

    pub(crate) fn new(limits: warden_lua::Limits) -> Self {
        Scripts {
            runtime: None,
            tasks: IndexMap::default(),
            trees: IndexMap::default(),
            limits,
        }
    }

    pub(crate) fn runtime(&mut self) -> Result<&mut warden_lua::Runtime, String> {
        if self.runtime.is_none() {
            let rt = warden_lua::Runtime::new(self.limits, VOCABULARY)
                .map_err(|e| format!("the Lua runtime could not start: {e}"))?;
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
        warden_lua::Effect::SetState { key, value } => Effect::SetState {
            rule: rule.key.clone(),
            plugin: rule.def.plugin.clone(),
            key,
            value,
        },
        warden_lua::Effect::EmitEvent {
            event_type,
            payload,
        } => Effect::EmitEvent {
            rule: rule.key.clone(),
            event_type: Arc::from(event_type),
            payload,
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
