//! Modes: the context-detection layer. A modes file lists modes in priority order, each with a
//! condition (`when`) and the rule sets it activates; at every tick the first mode whose
//! condition holds is active, and only its rules (and core rules) run. A game bot picks its
//! rotation the same way: in an instance, the instance rotation; in a battleground, the
//! battleground rotation; else solo.
//!
//! ```toml
//! [[mode]]
//! id = "unavailable"
//! when = "context.turn.context_window > 0 and context.turn.context_window < 30000"
//! rules = { plugins = ["builtin"] }
//!
//! [[mode]]
//! id = "reduced"
//! when = "context.turn.context_window > 0 and context.turn.context_window < 100000"
//! rules = { tags = ["core"], plugins = ["builtin"] }
//! min_turns = 2
//!
//! [[mode]]
//! id = "full"
//! rules = "all"
//! ```
//!
//! A change of mode is logged, reported in the outcome (`Outcome::mode_change`), visible as
//! `context.mode`, and ticks Warden's own `on_mode_change` hook, so rules can react to it.

use std::sync::Arc;

use warden_expr::{CompileOptions, Compiler, Condition};
use warden_input::{Diagnostic, SourceFile};
use warden_load::{ModeDef, RuleSets, parse_modes};

use crate::actions::expr_diagnostic;
use crate::rule::CompiledRule;
use warden_context::context::Frame;

pub(crate) use warden_load::DEFAULT_MODE;

/// A compiled mode.
pub struct Mode {
    /// Its id.
    pub id: Arc<str>,
    pub(crate) when: Option<Condition>,
    /// Per rule of the program: whether this mode activates it (core rules always).
    pub active: Vec<bool>,
    pub(crate) def: ModeDef,
}

/// A program's modes, in priority order.
pub struct Modes {
    /// The modes.
    pub modes: Vec<Mode>,
    /// The id of the default mode (none of the modes' conditions holds).
    pub default: Arc<str>,
}

/// Why a mode's condition cannot read `tool` or `result`.
const AT_EVERY_HOOK: &str = "modes are checked at every hook, and only tool hooks have it";

/// Compiles the modes of `file` against the program's rules.
pub(crate) fn compile_modes(
    file: Arc<SourceFile>,
    compiler: &Compiler,
    rules: &[CompiledRule],
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Modes> {
    let (defs, problems) = parse_modes(file.clone());
    let broken = problems.iter().any(Diagnostic::is_error);
    diagnostics.extend(problems);
    if broken {
        return None;
    }
    let opts = CompileOptions {
        unavailable: &[("tool", AT_EVERY_HOOK), ("result", AT_EVERY_HOOK)],
        force_script: false,
    };
    let mut modes = Vec::new();
    let mut ok = true;
    for def in defs {
        let when = match &def.when {
            Some(l) => match compiler.compile(&l.text, &opts) {
                Ok(c) => Some(c),
                Err(e) => {
                    diagnostics.push(expr_diagnostic(&file, &l.span, &l.text, &l.field, &e));
                    ok = false;
                    continue;
                }
            },
            None => None,
        };
        let active: Vec<bool> = rules
            .iter()
            .map(|r| r.def.core || def.rules.contains(&r.def))
            .collect();
        if let RuleSets::Some { .. } = def.rules
            // Of rules that compile (a program compiled on demand compiles them here, until one
            // does).
            && !rules
                .iter()
                .zip(&active)
                .any(|(r, &on)| on && !r.def.core && r.body().is_some())
        {
            diagnostics.push(
                Diagnostic::warning(
                    &file,
                    Some(def.span.clone()),
                    Some("rules"),
                    format!("mode `{}` activates no rule (besides core rules)", def.id),
                )
                .with_help("check the plugin ids, tags, groups and rule ids it lists"),
            );
        }
        modes.push(Mode {
            id: Arc::from(def.id.as_str()),
            when,
            active,
            def,
        });
    }
    ok.then_some(Modes {
        modes,
        default: Arc::from(DEFAULT_MODE),
    })
}

/// What a session remembers of its mode.
#[derive(Debug, Clone)]
pub struct ModeState {
    /// The active mode (an index into the program's modes), `None` for the default mode.
    pub current: Option<usize>,
    /// Its id.
    pub id: Arc<str>,
    /// The turn it became active.
    pub since_turn: u32,
}

impl Default for ModeState {
    fn default() -> Self {
        ModeState {
            current: None,
            id: Arc::from(DEFAULT_MODE),
            since_turn: 0,
        }
    }
}

/// The mode a tick runs in, as [`ModeState::next`] detected it.
pub struct NextMode<'p> {
    /// The mode, as an index into the program's modes (`None`: the default mode).
    pub index: Option<usize>,
    /// When it is not the session's mode until now: from which mode, to which.
    pub changed: Option<(Arc<str>, &'p Arc<str>)>,
    turn: u32,
}

impl ModeState {
    /// The mode of this tick, detected on `frame`: the first mode whose condition holds,
    /// unless the current one must stay a while longer (`min_turns`). Without modes, the
    /// default mode.
    pub fn next<'p>(&self, modes: Option<&'p Modes>, frame: &Frame<'_>) -> NextMode<'p> {
        let turn = frame.facts.turn.number;
        let Some(modes) = modes else {
            return NextMode {
                index: self.current,
                changed: None,
                turn,
            };
        };
        let detected = modes.detect(&mut warden_expr::Frame::new(frame));
        let index = modes.next(self, detected, turn);
        let to = index.map_or(&modes.default, |i| &modes.modes[i].id);
        NextMode {
            index,
            // The same mode may have moved in a reload: only the id says whether it changed.
            changed: (*to != self.id).then(|| (self.id.clone(), to)),
            turn,
        }
    }

    /// Makes `next` the session's mode.
    pub fn enter(&mut self, next: &NextMode<'_>, session: &str) {
        self.current = next.index;
        if let Some((from, to)) = &next.changed {
            tracing::info!(session, from = %from, to = %to, "mode changed");
            self.id = Arc::clone(to);
            self.since_turn = next.turn;
        }
    }
}

impl Modes {
    /// The mode whose condition holds first; `None` when none does (the default mode).
    pub(crate) fn detect(&self, frame: &mut warden_expr::Frame<'_>) -> Option<usize> {
        self.modes.iter().position(|m| match &m.when {
            None => true,
            Some(c) => c.eval(frame) == warden_expr::Verdict::True,
        })
    }

    /// The mode to be in: `detected`, unless the current one must stay a while longer.
    pub(crate) fn next(
        &self,
        state: &ModeState,
        detected: Option<usize>,
        turn: u32,
    ) -> Option<usize> {
        if detected == state.current {
            return detected;
        }
        if let Some(cur) = state.current
            && let Some(m) = self.modes.get(cur)
            && turn < state.since_turn.saturating_add(m.def.min_turns)
        {
            return state.current;
        }
        detected
    }
}
