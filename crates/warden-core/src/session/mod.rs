//! A session: one agent conversation. It keeps the facts Warden learns from events, the memory
//! of decorators (cooldowns, fire counts), trees left running, and notifications waiting for
//! their delivery point. [`Session::tick`] runs one hook.
//!
//! - `mod.rs`: the session and its tick, step by step.
//! - `step.rs`: one step: a hook's trees ticked on the frame, their effects applied.
//! - `evaluate.rs`: a rule's leaf: gates, condition, script or behavior, rendering.
//! - `bonsai.rs`: the bridge to bonsai-bt; trees left running, resumed where they stand.
//! - `effects.rs`: state writes, events, log lines, delivery, the execution log.
//! - `ruling.rs`: the decisions and rewrites of a step, merged into one ruling.
//! - `trees.rs`: what the trees keep between ticks, and how it moves to a new program.
//! - `scripts.rs`: the Lua side: the runtime, waiting scripts, behavior runs.
//! - `keys.rs`: small keys and sets for the tables above.

mod bonsai;
mod effects;
mod evaluate;
mod keys;
mod ruling;
mod scripts;
mod step;
mod trees;

use std::cell::OnceCell;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use warden_load::{DEFAULT_ID, Hook};

use crate::context::Frame;
use crate::control::Resolved;
use crate::event::Event;
use crate::facts::SessionFacts;
use crate::mode::ModeState;
use crate::outcome::{Halted, Lost, ModeChange, Notification, Outcome, Overridden, RuleError};
use crate::program::Program;
use crate::shared::Shared;
use step::Step;
use trees::Trees;

/// Options for a new session.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// The session id (generated when absent).
    pub id: Option<String>,
    /// The user (until an event says otherwise; `default` when absent).
    pub user: Option<String>,
    /// The project (until an event says otherwise; `default` when absent).
    pub project: Option<String>,
    /// Evaluate every rule of a hook and record why each did or did not fire (see
    /// [`Outcome::trace`]). Otherwise rules whose threshold cannot hold are skipped unseen;
    /// the outcomes are the same either way.
    pub explain: bool,
}

/// One agent conversation supervised by Warden. Not shared: an agent loop owns its session
/// (use [`crate::AsyncSession`] from async code).
pub struct Session {
    shared: Arc<Shared>,
    id: String,
    facts: SessionFacts,
    /// The program the session last ran (its running trees and scripts belong to it).
    program: Option<Arc<Program>>,
    /// The rules on and the settings in force for the session's user and project.
    resolved: Resolved,
    /// The active mode.
    mode: ModeState,
    /// Decorator memory, trees left running, waiting scripts.
    trees: Trees,
    /// Notifications waiting for a later delivery point.
    mailbox: Vec<Notification>,
    ended: bool,
    explain: bool,
    /// The execution log's sampling position (see `log_this_tick`).
    log_credit: f64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("ended", &self.ended)
            .finish()
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Session {
    pub(crate) fn new(shared: Arc<Shared>, id: String, opts: &SessionOptions) -> Self {
        let facts = SessionFacts::new(
            opts.user.as_deref().unwrap_or(DEFAULT_ID),
            opts.project.as_deref().unwrap_or(DEFAULT_ID),
            shared.config.history_limit,
        );
        let trees = Trees::new(shared.config.script_limits);
        Session {
            shared,
            id,
            facts,
            program: None,
            resolved: Resolved::default(),
            mode: ModeState::default(),
            trees,
            mailbox: Vec::new(),
            ended: false,
            explain: opts.explain,
            log_credit: 0.0,
        }
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What Warden knows about the session so far.
    pub fn facts(&self) -> &SessionFacts {
        &self.facts
    }

    /// Notifications waiting for a later delivery point.
    pub fn pending(&self) -> &[Notification] {
        &self.mailbox
    }

    /// The memory of the session's Lua state, in bytes; `None` while no script has run (a
    /// session without scripts never creates one).
    pub fn script_memory(&self) -> Option<usize> {
        self.trees
            .scripts
            .runtime
            .as_ref()
            .map(warden_lua::Runtime::memory_used)
    }

    /// The rules with something running (a script waiting for a later hook, or a behavior's
    /// tree), in rule order.
    pub fn running(&self) -> Vec<&str> {
        let Some(program) = &self.program else {
            return Vec::new();
        };
        (0..program.rules.len() as u32)
            .filter(|&ix| self.trees.scripts.waiting(ix))
            .map(|ix| program.rule_key(ix))
            .collect()
    }

    /// Whether `on_session_end` was handled.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Handles one hook: updates the facts, ticks the hook's trees, applies the effects of
    /// the rules that fired (in priority order) and returns what was decided. Never panics
    /// on bad input and never fails as a whole: a failing rule is reported in
    /// [`Outcome::errors`] and the others run.
    ///
    /// A tick reads one frame. It folds the event into the facts, resolves the users'
    /// choices, detects the mode on the frame and, when the mode changed, runs Warden's own
    /// `on_mode_change` as a first step; then the step of the hook reported.
    pub fn tick(&mut self, hook: Hook, event: Event) -> Outcome {
        let program = self.shared.program();
        let halted = self.adopt(&program);
        let time = event.time.unwrap_or_else(now);
        let errors = self.fold(hook, &event, time);
        self.resolved.refresh(
            &program,
            &self.shared.controls(),
            &self.facts.user.id,
            &self.facts.project.id,
        );
        let logging = self.log_this_tick();

        // Declared before the frame, which may point at it for the mode-change step.
        let mode_event = OnceCell::new();
        let frame = Frame::new(
            &self.facts,
            hook,
            &event,
            &self.mode.id,
            time,
            &self.shared.store,
            &program.settings,
            &self.resolved.settings,
        );
        let next = self.mode.next(program.modes.as_ref(), &frame);
        let mut step = Step {
            shared: &self.shared,
            program: &program,
            frame: &frame,
            resolved: &self.resolved,
            mode: next.index,
            session: &self.id,
            trees: &mut self.trees,
            mailbox: &mut self.mailbox,
            explain: self.explain,
            logging,
        };
        // A change of mode ticks Warden's own `on_mode_change` first, in the new mode.
        let change = next.changed.clone().map(|(from, to)| {
            frame.set_mode(to);
            let data = serde_json::json!({ "from": &*from, "to": &**to });
            frame.set_step(
                Hook::OnModeChange,
                mode_event.get_or_init(|| Event::new().with_data(data)),
            );
            let outcome = step.run(Vec::new(), Vec::new());
            frame.set_step(hook, &event);
            ModeChange {
                from,
                to: to.clone(),
                outcome: Box::new(outcome),
            }
        });
        let mut outcome = step.run(errors, halted);
        drop(frame);

        self.mode.enter(&next, &self.id);
        if next.changed.is_some() {
            self.facts.mode = self.mode.id.to_string();
        }
        if hook == Hook::OnSessionEnd {
            outcome.halted.extend(self.end());
        }
        if let Some(mut change) = change {
            // One ruling per event: the mode change's (a `stop`) is merged into this hook's as
            // the one evaluated first (it wins a tie), and the loser is reported overridden.
            if let Some(earlier) = change.outcome.ruling.take() {
                let (won, lost) = match outcome.ruling.take() {
                    Some(now) if now.rank() > earlier.rank() => (now, Some(earlier)),
                    now => (earlier, now),
                };
                if let Some(lost) = lost {
                    outcome.overridden.push(Overridden {
                        lost: lost.decision.map_or(Lost::Rewrite, Lost::Decision),
                        rule: lost.rule,
                        by: won.rule.clone(),
                        won: won.decision,
                    });
                }
                outcome.ruling = Some(won);
            }
            // The agent gets the mode change's notifications with this hook's.
            let mut inject = change.outcome.inject.clone();
            inject.append(&mut outcome.inject);
            inject.sort_by_key(|n| std::cmp::Reverse(n.priority));
            outcome.inject = inject;
            outcome.mode_change = Some(change);
        }
        outcome
    }

    /// Moves the session onto `program` if it is new to it; what that halted.
    fn adopt(&mut self, program: &Arc<Program>) -> Vec<Halted> {
        let mut halted = Vec::new();
        if self
            .program
            .as_ref()
            .is_none_or(|p| p.generation != program.generation)
        {
            let old = self.program.replace(program.clone());
            self.trees.adopt(old.as_deref(), program, &mut halted);
        }
        halted
    }

    /// Folds the event into the facts; what was wrong with it (reported, the tick goes on).
    fn fold(&mut self, hook: Hook, event: &Event, time: f64) -> Vec<RuleError> {
        let mut errors = Vec::new();
        if self.ended {
            errors.push(RuleError {
                rule: None,
                error: format!("{hook} arrived after on_session_end; the session had ended"),
            });
        }
        if let Some(complaint) = self.facts.update(hook, event, time) {
            errors.push(RuleError {
                rule: None,
                error: complaint,
            });
        }
        errors
    }

    /// Whether this tick goes into the execution log: with a sample share `s`, a tick is
    /// recorded each time the accumulated share passes a whole number, so exactly one tick in
    /// `1/s` is recorded, evenly spread, the first tick included.
    fn log_this_tick(&mut self) -> bool {
        let share = self.shared.config.log_sample;
        if share <= 0.0 {
            return false;
        }
        let before = self.log_credit;
        self.log_credit += share;
        before == 0.0 || self.log_credit.floor() > before.floor()
    }

    fn end(&mut self) -> Vec<Halted> {
        self.ended = true;
        self.program = None;
        if !self.mailbox.is_empty() {
            tracing::debug!(session = %self.id, dropped = self.mailbox.len(), "session ended with notifications still waiting for delivery");
            self.mailbox.clear();
        }
        self.trees.end()
    }
}
