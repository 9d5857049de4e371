//! A behavior's tree ticked within a step (`Tick::tree`) or halted (`Tick::halt_tree`), and
//! what its nodes read and do, through the tick (`TreeEnv`, bonsai's `tree_run::Env`).

use std::sync::Arc;

use warden_load::Hook;

use crate::session::evaluate::Tick;
use crate::session::scripts::script_effect;
use warden_expr::Verdict;
use warden_program::behavior::run::{self as tree_run, NodeStatus, TreeRun};
use warden_program::outcome::{Evaluation, Halted, RuleError};
use warden_program::rule::RuleCondition;

impl Tick<'_, '_> {
    /// Ticks a behavior's tree (starting it, or resuming it where it runs). Its action nodes'
    /// effects of this tick apply together; it fires when the tree succeeds.
    pub(super) fn tree(&mut self, ix: u32) -> Evaluation {
        let program = self.program;
        let rule = &program.rules[ix as usize];
        let Some(RuleCondition::Tree(tree)) = rule.body().map(|b| &b.condition) else {
            return Evaluation::Failed("internal: not a behavior".into());
        };
        self.select_plugin(&rule.def.plugin);
        let mut run = self
            .scripts
            .trees
            .remove(&ix)
            .unwrap_or_else(|| TreeRun::new(tree, rule.key.clone()));
        let mark = self.rendered.len();
        let status = {
            let mut env = TreeEnv {
                tick: self,
                rule: ix,
                tree,
            };
            tree_run::tick(tree, &mut run, &mut env)
        };
        self.scripts.trees.insert(ix, run);
        let holds = status == tree_run::Status::Success;
        self.record_firing(ix, mark, holds);
        match status {
            tree_run::Status::Success => Evaluation::Fired,
            tree_run::Status::Failure => Evaluation::NotMatched,
            tree_run::Status::Running => Evaluation::Running,
        }
    }

    /// Halts the running tree of behavior `ix` within this tick, so that its `on_halted`
    /// actions apply with the tick's effects (they do not count as a firing). False when `ix`
    /// has no running tree.
    pub(crate) fn halt_tree(&mut self, ix: u32, reason: &str) -> bool {
        let program = self.program;
        let rule = &program.rules[ix as usize];
        let Some(RuleCondition::Tree(tree)) = rule.body().map(|b| &b.condition) else {
            return false;
        };
        let Some(mut run) = self.scripts.trees.remove(&ix) else {
            return false;
        };
        if !run.is_running() {
            self.scripts.trees.insert(ix, run);
            return false;
        }
        self.select_plugin(&rule.def.plugin);
        let mark = self.rendered.len();
        let reported = self.halted.len();
        self.halt_reason = Some(reason.to_string());
        {
            let mut env = TreeEnv {
                tick: self,
                rule: ix,
                tree,
            };
            tree_run::halt_tree(tree, &mut run, &mut env);
        }
        self.halt_reason = None;
        self.scripts.trees.insert(ix, run);
        // In the trace only when a rule's evaluation halted it.
        self.record_firing(ix, mark, false);
        // One report for the behavior: its scripts', if it had any running (with this reason).
        if self.halted.len() == reported {
            tracing::info!(rule = %rule.key, reason, "behavior halted");
            self.halted.push(Halted {
                rule: rule.key.clone(),
                reason: reason.to_string(),
            });
        }
        true
    }
}

/// What a behavior's tree reads and does, through the tick it runs in.
struct TreeEnv<'t, 'a, 'f> {
    tick: &'t mut Tick<'a, 'f>,
    rule: u32,
    tree: &'a warden_program::behavior::Tree,
}

impl TreeEnv<'_, '_, '_> {
    fn key(&self) -> Arc<str> {
        self.tick.program.rules[self.rule as usize].key.clone()
    }

    fn error(&mut self, error: String) {
        let rule = Some(self.key());
        match self.tick.is_shadow(self.rule) {
            true => self.tick.shadow_errors.push(RuleError { rule, error }),
            false => self.tick.errors.push(RuleError { rule, error }),
        }
    }
}

impl tree_run::Env for TreeEnv<'_, '_, '_> {
    fn hook(&self) -> Hook {
        self.tick.facts.hook()
    }

    fn turn(&self) -> u32 {
        self.tick.turn
    }

    fn now(&self) -> f64 {
        self.tick.facts.time
    }

    fn tool(&self) -> Option<&str> {
        self.tick
            .facts
            .event()
            .tool
            .as_ref()
            .map(|t| t.name.as_str())
    }

    fn condition(&mut self, condition: u32) -> bool {
        let Some(c) = self.tree.conditions.get(condition as usize) else {
            return false;
        };
        let verdict = c.eval(&mut self.tick.frame);
        if self.tick.facts.state_error.replace(false) {
            let plugin = self.tick.program.rules[self.rule as usize]
                .def
                .plugin
                .clone();
            let e = self.tick.state_failure(&plugin);
            self.error(e);
            return false;
        }
        match verdict {
            Verdict::True => true,
            Verdict::False => false,
            Verdict::Undetermined(why) => {
                tracing::debug!(rule = %self.key(), reason = %why, "behavior condition undetermined");
                false
            }
            Verdict::Error(e) => {
                self.error(format!("condition `{}`: {e}", c.source()));
                false
            }
        }
    }

    fn act(&mut self, group: u32) -> bool {
        let Some(actions) = self.tree.actions.get(group as usize) else {
            return false;
        };
        let rule = &self.tick.program.rules[self.rule as usize];
        let (key, plugin) = (rule.key.clone(), rule.def.plugin.clone());
        match self.tick.render_actions(&key, &plugin, actions) {
            Ok(()) => true,
            Err(e) => {
                self.error(e);
                false
            }
        }
    }

    fn script(&mut self, node: u32, script: u32, start: bool) -> tree_run::Status {
        let Some(leaf) = self.tree.scripts.get(script as usize) else {
            return tree_run::Status::Failure;
        };
        let program = self.tick.program;
        let rule = &program.rules[self.rule as usize];
        let step = self.tick.drive_script(
            (self.rule, node),
            &rule.key,
            start.then_some(&leaf.script),
            leaf.timeout,
        );
        let (effects, status) = match step {
            warden_lua::Step::Waiting { effects, .. } => (effects, tree_run::Status::Running),
            warden_lua::Step::Done { holds, effects } => (
                effects,
                if holds {
                    tree_run::Status::Success
                } else {
                    tree_run::Status::Failure
                },
            ),
            warden_lua::Step::Failed { error } => {
                self.error(format!("script {}: {error}", leaf.script.name()));
                return tree_run::Status::Failure;
            }
        };
        let hook = self.tick.facts.hook();
        let mark = self.tick.rendered.len();
        for e in effects {
            match script_effect(rule, hook, e) {
                Ok(effect) => self.tick.rendered.push(effect),
                Err(why) => {
                    self.tick.rendered.truncate(mark);
                    self.error(format!("script {}: {why}", leaf.script.name()));
                    self.halt_script(node);
                    return tree_run::Status::Failure;
                }
            }
        }
        status
    }

    fn halt_script(&mut self, node: u32) {
        if let Some((task, key)) = self.tick.scripts.tasks.remove(&(self.rule, node)) {
            let reason = self
                .tick
                .halt_reason
                .clone()
                .unwrap_or_else(|| "its node was halted".into());
            let halted = self.tick.scripts.halt_task(task, key, &reason);
            self.tick.halted.push(halted);
        }
    }

    fn wake(&mut self, hook: Hook) {
        self.tick.wake.insert(hook);
    }

    fn trace(&mut self, node: u32, status: NodeStatus) {
        if let Some(t) = &mut self.tick.node_trace {
            t.push((self.rule, node, status));
        }
    }
}
