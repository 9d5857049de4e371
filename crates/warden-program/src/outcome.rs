//! What the supervisor decided at one hook: the [`Outcome`] of a tick.

use std::sync::{Arc, OnceLock};

use serde_json::Value as Json;

use warden_load::{Decision, Hook, LogLevel, Scope};

use crate::program::Program;
pub use warden_context::notification::Notification;

/// One applied effect of a fired rule.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// `notify_self`: a notification was queued (see [`Outcome::inject`] for delivery).
    NotifySelf(Notification),
    /// `log`: a line was written to the log (target `warden::rule`).
    Log {
        /// The rule.
        rule: Arc<str>,
        /// Its level.
        level: LogLevel,
        /// The rendered message.
        message: String,
    },
    /// `set_state`: a value was stored in the rule's plugin state.
    SetState {
        /// The rule.
        rule: Arc<str>,
        /// The plugin whose state it is.
        plugin: Arc<str>,
        /// Whose state: the sessions' shared state (in the store), or this session's own.
        scope: Scope,
        /// The key.
        key: String,
        /// The value (boxed: a JSON value is larger than every other effect, and each
        /// effect is as large as the largest).
        value: Box<Json>,
    },
    /// `emit_event`: an event was published on the bus.
    EmitEvent {
        /// The rule.
        rule: Arc<str>,
        /// The event type.
        event_type: Arc<str>,
        /// The rendered payload (boxed, as [`Effect::SetState`]'s value).
        payload: Box<Json>,
    },
    /// `enrich_context`: the query was enriched with knowledge (see [`Outcome::enrichment`]).
    EnrichContext {
        /// The rule.
        rule: Arc<str>,
        /// The result: mode, selected sources, the `<reference_material>` section.
        enrichment: Arc<warden_knowledge::Enrichment>,
    },
    /// `decide`: the rule decided about the event (merged with the others' into
    /// [`Outcome::ruling`]).
    Decide {
        /// The rule.
        rule: Arc<str>,
        /// What it decided.
        decision: Decision,
        /// The rendered reason.
        reason: Arc<str>,
    },
    /// `rewrite`: the rule set paths of the tool call's arguments (merged into
    /// [`Outcome::ruling`]).
    Rewrite {
        /// The rule.
        rule: Arc<str>,
        /// The paths below `arguments` and their rendered values, in order.
        set: Vec<(Vec<String>, Json)>,
    },
}

impl Effect {
    /// The rule that produced it.
    pub fn rule(&self) -> &str {
        match self {
            Effect::NotifySelf(n) => &n.rule,
            Effect::Log { rule, .. }
            | Effect::SetState { rule, .. }
            | Effect::EmitEvent { rule, .. }
            | Effect::EnrichContext { rule, .. }
            | Effect::Decide { rule, .. }
            | Effect::Rewrite { rule, .. } => rule,
        }
    }

    /// The action type name (`notify_self`...).
    pub fn action(&self) -> &'static str {
        match self {
            Effect::NotifySelf(_) => "notify_self",
            Effect::Log { .. } => "log",
            Effect::SetState { .. } => "set_state",
            Effect::EmitEvent { .. } => "emit_event",
            Effect::EnrichContext { .. } => "enrich_context",
            Effect::Decide { .. } => "decide",
            Effect::Rewrite { .. } => "rewrite",
        }
    }

    /// Why this effect means nothing at `hook`, if it does not: a decision or a rewrite made
    /// where the host cannot act on it.
    pub fn misplaced_at(&self, hook: Hook) -> Option<String> {
        match self {
            Effect::Decide { decision, .. } => decision.misplaced_at(hook),
            Effect::Rewrite { .. } => warden_load::rewrite_misplaced_at(hook),
            _ => None,
        }
    }
}

/// What the rules decided about an event, merged: the most restrictive decision wins (`stop`
/// over `deny` over `ask` over `allow`; `continue` is made at `on_turn_end`, where only `stop`
/// beats it), ties go to the higher priority, and rewrites apply in priority order when the
/// call may run.
#[derive(Debug, Clone, PartialEq)]
pub struct Ruling {
    /// The decision; `None` when the rules only rewrote the call's arguments (it runs, with
    /// [`Ruling::input`]).
    pub decision: Option<Decision>,
    /// The rule that decided (for a rewrite alone, the first rule that rewrote).
    pub rule: Arc<str>,
    /// What the agent (or the person asked) is told; empty for a rewrite alone.
    pub reason: Arc<str>,
    /// The whole rewritten arguments, when a rewrite applies (the call runs, or is asked
    /// about, with them).
    pub input: Option<Json>,
}

impl Ruling {
    /// The word replay prints: the decision's name, or `rewrite`.
    pub fn name(&self) -> &'static str {
        self.decision.map_or("rewrite", Decision::name)
    }

    /// How restrictive it is (a rewrite alone lets the call run, as `allow` does).
    pub fn rank(&self) -> u8 {
        self.decision.map_or(0, Decision::rank)
    }
}

/// A decision or rewrite that did not make it into the ruling ([`Overridden::why`] says why).
#[derive(Debug, Clone, PartialEq)]
pub struct Overridden {
    /// The rule whose decision or rewrite was overridden.
    pub rule: Arc<str>,
    /// What it lost.
    pub lost: Lost,
    /// The rule that won.
    pub by: Arc<str>,
    /// The decision that won (none when a rewrite won a path).
    pub won: Option<Decision>,
}

/// What an overridden rule had decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Lost {
    /// Its decision: a more restrictive one won, or the same one made by a rule of higher
    /// priority.
    Decision(Decision),
    /// Its rewrite: the call does not run.
    Rewrite,
    /// Its rewrite of this path (below `arguments`): a rule of higher priority set it first.
    Path(Vec<String>),
}

impl Overridden {
    /// What it decided, in words (`deny`, `rewrite`, `rewrite arguments.limit`).
    pub fn what(&self) -> String {
        match &self.lost {
            Lost::Decision(d) => d.name().to_string(),
            Lost::Rewrite => "rewrite".into(),
            Lost::Path(p) => format!("rewrite arguments.{}", p.join(".")),
        }
    }

    /// Why it lost, in words.
    pub fn why(&self) -> String {
        let by = &self.by;
        match (&self.lost, self.won) {
            (Lost::Decision(d), Some(w)) if *d == w => {
                format!(
                    "`{by}` decided {} first (it has the higher priority)",
                    w.name()
                )
            }
            (Lost::Decision(d), Some(w)) => format!("{} beats {}", w.name(), d.name()),
            (Lost::Rewrite, Some(w)) => format!(
                "the call does not run ({}), so its arguments are not rewritten",
                w.name()
            ),
            (Lost::Path(p), _) => format!(
                "`{by}` set arguments.{} first (it has the higher priority)",
                p.join(".")
            ),
            (_, None) => format!("`{by}` decided first"),
        }
    }
}

/// Whether the event may go on, as the host must act on it ([`Outcome::proceed`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Proceed<'a> {
    /// Nothing stops it: run the call (or go on) as reported.
    Yes,
    /// Run the call, with these arguments instead of the reported ones.
    WithInput(&'a Json),
    /// Ask a person first; run the call (with `input` when given) only if they agree.
    Ask {
        /// Why, for the person asked.
        reason: &'a str,
        /// The arguments to run it with, when a rewrite applies.
        input: Option<&'a Json>,
    },
    /// Do not run the call; refuse the prompt. Tell the agent why.
    No {
        /// Why, for the agent.
        reason: &'a str,
    },
    /// The agent wanted to stop: it must keep working, with this as its next instruction.
    KeepWorking {
        /// Its next instruction.
        reason: &'a str,
    },
    /// End the session now. At a tool call, the call does not run either (a `stop` is a
    /// refusal and more); at a prompt, the prompt is refused. Until the next prompt, every
    /// tool call of the session is refused with this reason.
    Stop {
        /// Why.
        reason: &'a str,
    },
}

impl Proceed<'_> {
    /// Whether the call (or the prompt) may run without a person's yes: only on
    /// [`Proceed::Yes`] and [`Proceed::WithInput`]. [`Proceed::No`] and [`Proceed::Stop`]
    /// refuse it; [`Proceed::Ask`] needs a yes first.
    pub fn runs(&self) -> bool {
        matches!(self, Proceed::Yes | Proceed::WithInput(_))
    }
}

/// A failure isolated to one rule (or to the event itself, when `rule` is `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleError {
    /// The rule concerned, if any.
    pub rule: Option<Arc<str>>,
    /// What went wrong.
    pub error: String,
}

/// A script or a behavior stopped before it finished: its session ended, its rule changed or
/// was removed in a reload, it was switched off or left its mode, or its tree moved on without
/// it. It is closed cleanly and reported here (and logged).
#[derive(Debug, Clone, PartialEq)]
pub struct Halted {
    /// The rule whose script was stopped.
    pub rule: Arc<str>,
    /// Why.
    pub reason: String,
}

/// What evaluating one rule at one tick came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Evaluation {
    /// The condition held and the effects were applied.
    Fired,
    /// The condition was false.
    NotMatched,
    /// The condition could not be evaluated (missing data); the reason says what was missing.
    Undetermined(String),
    /// The condition, a template or an effect failed; see [`Outcome::errors`].
    Failed(String),
    /// A decorator held the rule back (cooldown, once per session, max fires).
    Suppressed(&'static str),
    /// The rule's node is still running (a script waiting for a later hook).
    Running,
    /// The rule is switched off for this session's user.
    Disabled,
    /// The rule is not active in the current mode (named).
    Inactive(Arc<str>),
}

/// A change of mode, and what Warden's own `on_mode_change` hook decided about it.
#[derive(Debug, Clone)]
pub struct ModeChange {
    /// The mode before.
    pub from: Arc<str>,
    /// The mode now.
    pub to: Arc<str>,
    /// The `on_mode_change` tick: rules that react to the change. Its notifications due now
    /// are also in the outer outcome's [`Outcome::injected`], and written in the outer outcome's block
    /// (this one's [`Outcome::rendered`] is `None`).
    pub outcome: Box<Outcome>,
}

#[derive(Debug, Clone)]
/// What one rule's evaluation came to at a tick, for traces.
pub struct TraceEntry {
    /// The rule's number in the program.
    pub rule: u32,
    /// What its evaluation came to.
    pub evaluation: Evaluation,
    /// The rule ran in shadow: its evaluation is recorded, nothing it decided applied.
    pub shadow: bool,
}

/// Which notifications an outcome injects ([`Outcome::inject`]; read them with
/// [`Outcome::injected`]): those it holds, then, when it says so, the `notify_self` effects of
/// the outcome due at its hook, read in [`Outcome::effects`] rather than copied out of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inject {
    held: Vec<Notification>,
    effects: bool,
}

impl Inject {
    /// Exactly `notifications`, in this order (most urgent first).
    pub fn new(notifications: Vec<Notification>) -> Self {
        Inject {
            held: notifications,
            effects: false,
        }
    }

    /// `delivered` (the notifications the mailbox delivered), then the outcome's `notify_self`
    /// effects due at its hook, in their order. The whole must be most urgent first already.
    pub fn with_effects_due(delivered: Vec<Notification>) -> Self {
        Inject {
            held: delivered,
            effects: true,
        }
    }

    /// The notifications the outcome holds itself (without those read in its effects).
    pub fn held(&self) -> &[Notification] {
        &self.held
    }

    /// Whether the outcome's effects due at its hook follow [`Inject::held`].
    pub fn reads_effects(&self) -> bool {
        self.effects
    }

    /// The notifications, for an outcome of these `effects` at `hook` ([`Outcome::injected`]
    /// is this with the outcome's own).
    pub fn of<'a>(&'a self, effects: &'a [Effect], hook: Hook) -> Injected<'a> {
        Injected {
            held: &self.held,
            effects: if self.effects { effects } else { &[] },
            hook,
        }
    }
}

/// The notifications an outcome injects ([`Outcome::injected`]), most urgent first.
#[derive(Debug, Clone, Copy)]
pub struct Injected<'a> {
    held: &'a [Notification],
    effects: &'a [Effect],
    hook: Hook,
}

impl<'a> Injected<'a> {
    /// Each, most urgent first.
    pub fn iter(&self) -> InjectedIter<'a> {
        InjectedIter {
            held: self.held.iter(),
            effects: self.effects.iter(),
            hook: self.hook,
        }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        let hook = self.hook;
        self.held.len()
            + self
                .effects
                .iter()
                .filter(|e| matches!(e, Effect::NotifySelf(n) if n.deliver_at.is_due_at(hook)))
                .count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// The `i`-th, most urgent first.
    pub fn get(&self, i: usize) -> Option<&'a Notification> {
        self.iter().nth(i)
    }

    /// The most urgent.
    pub fn first(&self) -> Option<&'a Notification> {
        self.iter().next()
    }

    /// A copy of each, in order.
    pub fn to_vec(&self) -> Vec<Notification> {
        self.iter().cloned().collect()
    }
}

impl<'a> IntoIterator for Injected<'a> {
    type Item = &'a Notification;
    type IntoIter = InjectedIter<'a>;

    fn into_iter(self) -> InjectedIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &Injected<'a> {
    type Item = &'a Notification;
    type IntoIter = InjectedIter<'a>;

    fn into_iter(self) -> InjectedIter<'a> {
        self.iter()
    }
}

/// An iterator over the notifications an outcome injects ([`Injected::iter`]).
#[derive(Debug, Clone)]
pub struct InjectedIter<'a> {
    held: std::slice::Iter<'a, Notification>,
    effects: std::slice::Iter<'a, Effect>,
    hook: Hook,
}

impl<'a> Iterator for InjectedIter<'a> {
    type Item = &'a Notification;

    fn next(&mut self) -> Option<&'a Notification> {
        if let Some(n) = self.held.next() {
            return Some(n);
        }
        let hook = self.hook;
        self.effects.find_map(|e| match e {
            Effect::NotifySelf(n) if n.deliver_at.is_due_at(hook) => Some(n),
            _ => None,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let held = self.held.len();
        (held, Some(held + self.effects.len()))
    }
}

impl std::iter::FusedIterator for InjectedIter<'_> {}

/// What the supervisor decided at one hook.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The hook that was handled.
    pub hook: Hook,
    /// The effects applied, in the order they were applied (rule priority order).
    ///
    /// The tick's own notifications due at the hook are read from here by
    /// [`Outcome::injected`]: a host that edits these effects changes what is injected (and
    /// their order is not checked again). To edit one without the other, fix the injection
    /// first: `outcome.inject = Inject::new(outcome.injected().to_vec())`.
    pub effects: Vec<Effect>,
    /// Notifications due now: fired by this hook for now, or queued earlier for this point.
    /// Most urgent first. An agent loop injects these into the agent's context: read them
    /// with [`Outcome::injected`]. They are held once: those the mailbox delivered, then
    /// (usually) the `notify_self` effects of [`Outcome::effects`] due at this hook, read where
    /// they are. [`Inject::new`] sets exactly the notifications given.
    pub inject: Inject,
    /// The block of [`Outcome::rendered`]: written by the tick when an operator's template is
    /// set (its errors belong to the tick's), else on first asking (most hosts never ask).
    pub rendered: OnceLock<Option<String>>,
    /// Failures isolated to a rule. The other rules ran.
    pub errors: Vec<RuleError>,
    /// Scripts stopped at this tick before they finished.
    pub halted: Vec<Halted>,
    /// Knowledge for the agent's system prompt, when this tick enriched the query: at
    /// `on_query_start` when knowledge enrichment is configured and registered, or when a rule's
    /// `enrich_context` action fired (the last one wins). Put its `section` after the system
    /// prompt (`Enrichment::integrate`).
    pub enrichment: Option<Arc<warden_knowledge::Enrichment>>,
    /// The mode this hook ran in (`default` without modes).
    pub mode: Arc<str>,
    /// Set when this event changed the mode: from what, to what, and the `on_mode_change`
    /// tick that ran first.
    pub mode_change: Option<ModeChange>,
    /// What the rules decided about the event, merged (none: the host's default applies, the
    /// agent proceeds). See [`Outcome::proceed`].
    pub ruling: Option<Ruling>,
    /// Decisions and rewrites the ruling overrode, and why.
    pub overridden: Vec<Overridden>,
    /// Why nothing this tick wrote (plugin state, execution-log rows, the saved session) was
    /// saved, when the store refused it (a lock held too long by another process, a full
    /// disk). Its decisions and notifications stand; it is also in [`Outcome::errors`].
    pub unsaved: Option<String>,
    /// What the rules in shadow rendered at this hook (their decisions, notifications, state
    /// writes...), none of it applied: not in the ruling, not injected, not written. What a
    /// shadow rule would have done, beside what the live rules did.
    pub shadow: Vec<Effect>,
    /// Failures of rules in shadow. They are not in [`Outcome::errors`]: a rule in shadow
    /// changes nothing the host sees.
    pub shadow_errors: Vec<RuleError>,
    /// Each rule evaluated, in order (kept when tracing).
    pub trace: Vec<TraceEntry>,
    /// Behavior nodes that ran (explain mode): rule, node, what it came to.
    pub nodes: Vec<(u32, u32, crate::behavior::NodeStatus)>,
    /// The program that ticked (names rules and nodes for traces).
    pub program: Arc<Program>,
}

impl Outcome {
    /// The notifications due now, most urgent first: what an agent loop injects into the
    /// agent's context (those the mailbox delivered, then this hook's own; see
    /// [`Outcome::inject`]).
    pub fn injected(&self) -> Injected<'_> {
        self.inject.of(&self.effects, self.hook)
    }

    /// The notifications due now ([`Outcome::injected`]) written as one block for the agent's
    /// context: each message once, most urgent first, in few tokens (an operator's
    /// `[render] template` when set). `None` when there is nothing to inject. Every host
    /// injects this same text.
    ///
    /// It is the block of the notifications the tick delivered: ask for it before changing
    /// `inject`. (Warden's own block is written on first asking, from `inject` as it is then;
    /// an operator's template is run in the tick, so that its failure is one of the tick's
    /// errors.)
    pub fn rendered(&self) -> Option<&str> {
        self.rendered
            .get_or_init(|| warden_context::notification::plain_block(self.injected()))
            .as_deref()
    }

    /// The notifications fired at this hook (whenever they are to be delivered).
    pub fn notifications(&self) -> impl Iterator<Item = &Notification> {
        self.effects.iter().filter_map(|e| match e {
            Effect::NotifySelf(n) => Some(n),
            _ => None,
        })
    }

    /// The ids of the rules that fired, in order (rules in shadow are not among them: see
    /// [`Outcome::shadow_fired`]).
    pub fn fired(&self) -> Vec<&str> {
        self.trace()
            .filter(|(_, e)| **e == Evaluation::Fired)
            .map(|(r, _)| r)
            .collect()
    }

    /// Every rule evaluated at this hook and what it came to, in evaluation order. This is how
    /// an operator tells a false condition from one that could not be evaluated. Rules in
    /// shadow are in [`Outcome::shadow_trace`].
    pub fn trace(&self) -> impl Iterator<Item = (&str, &Evaluation)> {
        self.trace
            .iter()
            .filter(|t| !t.shadow)
            .map(|t| (self.program.rule_key(t.rule), &t.evaluation))
    }

    /// Every rule in shadow evaluated at this hook and what it came to, in evaluation order.
    pub fn shadow_trace(&self) -> impl Iterator<Item = (&str, &Evaluation)> {
        self.trace
            .iter()
            .filter(|t| t.shadow)
            .map(|t| (self.program.rule_key(t.rule), &t.evaluation))
    }

    /// The ids of the rules in shadow that fired, in order: what would have fired had they
    /// been on.
    pub fn shadow_fired(&self) -> Vec<&str> {
        self.shadow_trace()
            .filter(|(_, e)| **e == Evaluation::Fired)
            .map(|(r, _)| r)
            .collect()
    }

    /// What each rule in shadow decided at this hook (`deny`, `ask`, `rewrite`...), with its
    /// reason: what it would have decided had it been on.
    pub fn shadow_decisions(&self) -> impl Iterator<Item = (&str, &'static str, &str)> {
        self.shadow.iter().filter_map(|e| match e {
            Effect::Decide {
                rule,
                decision,
                reason,
            } => Some((&**rule, decision.name(), &**reason)),
            Effect::Rewrite { rule, .. } => Some((&**rule, "rewrite", "")),
            _ => None,
        })
    }

    /// The nodes of behaviors that ran at this hook, in the order they finished, with what
    /// each came to: `(behavior, node label, status)`. Recorded in explain mode only
    /// (`SessionOptions::explain` in `warden-core`).
    pub fn node_trace(&self) -> impl Iterator<Item = (&str, &str, crate::behavior::NodeStatus)> {
        self.nodes.iter().map(|(rule, node, status)| {
            let rule_body = self
                .program
                .rules
                .get(*rule as usize)
                .and_then(|r| r.body());
            let label = match rule_body.map(|b| &b.condition) {
                Some(crate::rule::RuleCondition::Tree(t)) => t.label(*node),
                _ => "?",
            };
            (self.program.rule_key(*rule), label, *status)
        })
    }

    /// Whether the event may go on, and how: the one question a host must answer after every
    /// tick. A tool call runs only on [`Proceed::Yes`] or [`Proceed::WithInput`] (or on a
    /// person's yes to [`Proceed::Ask`]). `warden-core`'s crate documentation shows a host
    /// answering each case.
    pub fn proceed(&self) -> Proceed<'_> {
        let Some(r) = &self.ruling else {
            return Proceed::Yes;
        };
        let reason = &*r.reason;
        match r.decision {
            None | Some(Decision::Allow) => {
                r.input.as_ref().map_or(Proceed::Yes, Proceed::WithInput)
            }
            Some(Decision::Ask) => Proceed::Ask {
                reason,
                input: r.input.as_ref(),
            },
            Some(Decision::Deny) => Proceed::No { reason },
            Some(Decision::Continue) => Proceed::KeepWorking { reason },
            Some(Decision::Stop) => Proceed::Stop { reason },
        }
    }

    /// Why the event is refused, when it is: a tool call that must not run, a prompt that must
    /// not reach the agent (`deny`, or `stop`, which refuses and ends the session). A host
    /// that maps decisions one by one checks this first, so that no mapping drops a refusal.
    pub fn refused(&self) -> Option<&str> {
        match self.proceed() {
            Proceed::No { reason } | Proceed::Stop { reason } => Some(reason),
            _ => None,
        }
    }

    /// Why the session ends, when a rule stopped it (at any hook; see [`Proceed::Stop`]).
    pub fn ends_session(&self) -> Option<&str> {
        match self.proceed() {
            Proceed::Stop { reason } => Some(reason),
            _ => None,
        }
    }

    /// Whether nothing fired and nothing failed.
    pub fn is_quiet(&self) -> bool {
        self.effects.is_empty() && self.errors.is_empty() && self.injected().is_empty()
    }
}
