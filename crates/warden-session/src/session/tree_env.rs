//! A behavior's tree ticked within a step: what its nodes read and do, through the tick
//! (`tree_run::Env`), for `Tick::tree` and `Tick::halt_tree`.

use std::sync::Arc;

use warden_load::Hook;

use crate::session::evaluate::Tick;
use crate::session::scripts::script_effect;
use warden_expr::Verdict;
use warden_program::behavior::run::{self as tree_run, NodeStatus};
use warden_program::outcome::RuleError;

/// What a behavior's tree reads and does, through the tick it runs in.
pub(crate) struct TreeEnv<'t, 'a, 'f> {
    pub(crate) tick: &'t mut Tick<'a, 'f>,
    pub(crate) rule: u32,
    pub(crate) tree: &'a warden_program::behavior::Tree,
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
