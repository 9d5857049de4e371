//! The lean leaves: what the general leaf (`Tick::run`, through bonsai's bridge) does for the
//! commonest two, without what they never need: a lone expression rule in a step where nothing
//! runs, no rule is in shadow and the tick is not sampled (`Tick::lone_expression`: most ticks
//! of many rules), and a lone rule whose script waits, resumed at its hook (`Tick::lone_script`).

use warden_context::template::Text;
use warden_program::actions::CompiledAction;
use warden_program::outcome::{Effect, Evaluation, Notification, RuleError, TraceEntry};
use warden_program::rule::{Body, CompiledRule, RuleCondition};

use crate::session::evaluate::{Fired, Tick};
use crate::session::keys::HookSet;
use crate::session::place::room_for_one;
use crate::session::scripts::ROOT;

impl<'a> Tick<'a, '_> {
    /// Whether the step's leaves may take the lean path (`Tick::lone_expression`): no script
    /// waits, no behavior's tree runs, no rule is in shadow and the tick is not sampled.
    #[inline]
    pub(crate) fn plain(&self) -> bool {
        self.scripts.tasks.is_empty()
            && self.scripts.trees.is_empty()
            && self.shadow.is_empty()
            && self.timings.is_none()
    }

    /// The leaf of a lone rule `ix` whose condition is an expression, in a [`Tick::plain`]
    /// step (`holds`: the threshold index found its condition true). What [`Tick::run`] does
    /// for it, without what such a leaf never needs: it is not in shadow, not timed (an
    /// expression is timed only when the tick is sampled), never left running, and starts no
    /// script (so bonsai's bridge, `tick_entry`, has nothing to keep or halt after it). False,
    /// having done nothing, when the rule is not such a rule: the caller takes the general
    /// path. A property test (`warden-core`'s `tests/lean.rs`) holds the two paths to the
    /// same outcomes.
    #[inline(always)]
    pub(crate) fn lone_expression(&mut self, ix: u32, holds: bool) -> bool {
        let program = self.program;
        let rule = &program.rules[ix as usize];
        let Some(
            body @ Body {
                condition: RuleCondition::Expr(_),
                ..
            },
        ) = rule.body()
        else {
            return false;
        };
        if holds && self.fixed_notification(ix, rule, body) {
            return true;
        }
        self.holds = holds;
        self.at = Some(self.trace.len());
        let evaluation = self.rule_inline(ix, rule, Some(body));
        self.at = None;
        match &evaluation {
            Evaluation::Fired | Evaluation::NotMatched => {}
            Evaluation::Failed(error) => {
                self.at = Some(self.trace.len());
                self.fail_closed(ix, error);
                self.at = None;
                // (An expression is timed only in a sampled tick.)
                self.failed_unsampled(ix, error, 0.0);
            }
            Evaluation::Undetermined(why) => {
                tracing::debug!(rule = %rule.key, reason = %why, "condition undetermined");
            }
            _ => {}
        }
        self.trace.push(TraceEntry {
            rule: ix,
            evaluation,
            shadow: false,
        });
        true
    }

    /// The leaf of a rule the threshold index proved true (`holds`), without a decorator or a
    /// tool filter, whose one action is a notification of a fixed text: the most common leaf
    /// of a many-rule tick (a threshold that notifies). What [`Tick::rule`] would do for it
    /// (it fires: its notification, its firing, its trace entry), without the checks that
    /// cannot stop it. False, having done nothing, for any other rule, or when a context
    /// read failed earlier in the step (`Tick::rule` reports that).
    ///
    /// (The notification is matched and written as `Tick::render` does. Sharing the two through
    /// a helper that returns the action's parts, or writes them, was measured: the compiler
    /// then lays the step's loop out worse, by 35 to 45 instructions a tick.)
    #[inline(always)]
    fn fixed_notification(&mut self, ix: u32, rule: &'a CompiledRule, body: &Body) -> bool {
        let [
            CompiledAction::Notify {
                message: Text::Static(message),
                category,
                priority,
                deliver_at,
            },
        ] = &body.actions[..]
        else {
            return false;
        };
        let gate = &rule.gate;
        if gate.once_per_session
            || gate.max_fires.is_some()
            || gate.cooldown_turns.is_some()
            || gate.tool_filter
            || !self.enabled.get(ix as usize).copied().unwrap_or(true)
            || self.facts.state_error.get()
        {
            return false;
        }
        self.select_plugin(&rule.def.plugin);
        let (at, end) = (self.rendered.len(), room_for_one(&mut self.rendered));
        // SAFETY: `end` is the vector's end, with room for one more: written, then counted.
        unsafe {
            end.write(Effect::NotifySelf(Notification {
                rule: rule.key.clone(),
                message: message.clone(),
                category: category.clone(),
                priority: *priority,
                deliver_at: *deliver_at,
                fired_at: self.facts.hook(),
            }));
            self.rendered.set_len(at + 1);
        }
        self.fired.push(Fired {
            rule: ix,
            trace: Some(self.trace.len()),
            effects: at..at + 1,
            counts: true,
        });
        let (len, end) = (self.trace.len(), room_for_one(&mut self.trace));
        // SAFETY: as above.
        unsafe {
            end.write(TraceEntry {
                rule: ix,
                evaluation: Evaluation::Fired,
                shadow: false,
            });
            self.trace.set_len(len + 1);
        }
        true
    }

    /// The leaf of a lone rule `ix` whose script waits, ticked at its own hook (the hook it
    /// waits for is the one of its tree), in a step where no rule is in shadow and the tick is
    /// not sampled: what bonsai's bridge (`tick_entry`) and [`Tick::run`] do for it, without
    /// what such a leaf never needs (bonsai, the timing of a sampled tick, shadow, the
    /// checks of a rule that starts). `Some(true)` when its script waits on (the caller keeps
    /// its tree running, waiting for [`Tick::wake_of`] its hook), `Some(false)` when it is
    /// done (the caller drops its tree); `None`, having done nothing, when the rule is not
    /// such a rule (switched off or out of mode, or no script of it waits): the caller takes
    /// the general path. A property test (`warden-core`'s `tests/lean.rs`) holds the two paths
    /// to the same outcomes.
    #[inline]
    pub(crate) fn lone_script(&mut self, ix: u32) -> Option<bool> {
        if !self.shadow.is_empty()
            || self.timings.is_some()
            || !self.enabled.get(ix as usize).copied().unwrap_or(true)
            || !matches!(
                self.program.rules[ix as usize].body(),
                Some(Body {
                    condition: RuleCondition::Script { .. },
                    ..
                })
            )
            || !self.scripts.tasks.contains_key(&(ix, ROOT))
        {
            return None;
        }
        let hook = self.facts.hook();
        self.wake = HookSet::default();
        self.entry_hook = hook;
        self.in_group = false;
        // (Neither is read on this path; cleared as `tick_entry` clears them, so that no
        // later leaf can find them stale.)
        self.running_leaves.clear();
        self.holds = false;
        // A script is timed by the clock its run's time limit counts from: a failure is
        // logged with how long its run took.
        if let Some(rt) = &mut self.scripts.runtime {
            rt.take_run_started();
        }
        self.at = Some(self.trace.len());
        let evaluation = self.script(ix, None);
        if let Evaluation::Failed(error) = &evaluation {
            self.fail_closed(ix, error);
            let ms = self.script_ms();
            self.failed_unsampled(ix, error, ms);
        }
        self.at = None;
        let waits = matches!(evaluation, Evaluation::Running);
        self.trace.push(TraceEntry {
            rule: ix,
            evaluation,
            shadow: false,
        });
        // A script its leaf no longer runs is halted, as after any tree (a run whose effects
        // could not be read fails while its script still waits).
        if !waits && self.scripts.waiting(ix) {
            self.halted
                .extend(self.scripts.halt(ix, "its tree left it behind"));
        }
        Some(waits)
    }

    /// Reports the failure of rule `ix` (not in shadow) in a tick that is not sampled: among
    /// the step's errors, and in the execution log whatever the sampling, taking `ms`. (The
    /// lean leaves'; `Tick::run` also knows shadow and sampled ticks.)
    #[cold]
    #[inline(never)]
    fn failed_unsampled(&mut self, ix: u32, error: &str, ms: f64) {
        self.unsampled_rows.push((self.trace.len(), ms));
        self.errors.push(RuleError {
            rule: Some(self.program.rules[ix as usize].key.clone()),
            error: error.to_string(),
        });
    }
}
