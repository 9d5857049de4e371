//! A stop that holds: once a rule stopped the session, every tool call is refused with the
//! stop's reason, and an agent that wants to stop is not sent back to work, until the next
//! prompt. (A host that ran a call after a stop, or a call made by a host that missed the stop,
//! still meets the refusal.)

use std::sync::Arc;

use warden_load::{Decision, Hook};

use warden_program::outcome::{Lost, Outcome, Overridden, Ruling};

/// The rule that stopped the session, and why.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stopped {
    pub rule: Arc<str>,
    pub reason: Arc<str>,
}

/// Applies a stop that holds to a tick's `outcome` at `hook`, and keeps the stop the tick made:
/// a new prompt lifts the stop; a tool call of a stopped session is refused (`deny`, with the
/// stop's reason); a `continue` becomes the stop; a tick whose ruling is `stop` stops the
/// session.
pub(crate) fn hold(stopped: &mut Option<Stopped>, hook: Hook, outcome: &mut Outcome) {
    if hook == Hook::OnQueryStart {
        *stopped = None;
    }
    if let Some(stop) = stopped.as_ref() {
        let held = match (hook, outcome.ruling.as_ref().and_then(|r| r.decision)) {
            (_, Some(Decision::Stop)) => None,
            (Hook::OnToolCall, _) => Some(Decision::Deny),
            (Hook::OnTurnEnd, Some(Decision::Continue)) => Some(Decision::Stop),
            _ => None,
        };
        if let Some(decision) = held {
            let ruling = Ruling {
                decision: Some(decision),
                rule: stop.rule.clone(),
                reason: stop.reason.clone(),
                input: None,
            };
            if let Some(lost) = outcome.ruling.replace(ruling) {
                outcome.overridden.push(Overridden {
                    rule: lost.rule,
                    lost: lost.decision.map_or(Lost::Rewrite, Lost::Decision),
                    by: stop.rule.clone(),
                    won: Some(decision),
                });
            }
        }
    }
    if let Some(r) = &outcome.ruling
        && r.decision == Some(Decision::Stop)
    {
        *stopped = Some(Stopped {
            rule: r.rule.clone(),
            reason: r.reason.clone(),
        });
    }
}
