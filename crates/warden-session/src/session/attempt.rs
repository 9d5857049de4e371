//! One attempt at a tick: the users' choices and the program in force, the store's
//! transaction, the step (and the mode change's before it), and the commit.

use super::*;

impl Session {
    /// One attempt at a tick. `Again` when `retry` and the session could not be saved because
    /// another process saved it since it was read: this copy is then stale, and the next
    /// attempt reads it again, `locked`: with the session locked first, so that it cannot lose
    /// the race again. With `batch`, a tick that used the store for nothing but its save is
    /// `Deferred`, with that save.
    pub(super) fn attempt(
        &mut self,
        hook: Hook,
        event: &Arc<Event>,
        retry: bool,
        locked: bool,
        batch: bool,
    ) -> Attempt {
        self.attempts += 1;
        // The users' choices first, before the store's transaction: asking another process's
        // changes of them reads the store, and so does a new read of them, which holds their
        // lock meanwhile (`Shared::refresh_controls`): a tick waiting for that lock while its
        // transaction holds the store's connection would wait for ever.
        let mut in_force = self.shared.in_force(self.in_force.take());
        let mut early = Vec::new();
        if let Err(error) = self.catch_up(false) {
            early.push(RuleError { rule: None, error });
        }
        let shared = self.shared.clone();
        let tx = shared.store.tick();
        if self.durable.is_some() {
            tx.for_session(&self.id);
            if locked && let Err(error) = self.catch_up_locked(&tx) {
                early.push(RuleError { rule: None, error });
            }
        }
        // After catching up: a session read back is on the program in force then, at least.
        // (A reload never reads the store while it holds the program's lock.)
        shared.program_since(&mut in_force);
        let (program, controls) = (&in_force.program, &*in_force.controls);
        let mut halted = std::mem::take(&mut self.restored_halted);
        halted.extend(self.adopt(program));
        let time = event.time.unwrap_or_else(now);
        early.extend(self.fold(hook, event, time));
        self.resolved.refresh(
            program,
            controls,
            &self.facts.user.id,
            &self.facts.project.id,
        );
        let logging = self.log_this_tick();
        let mut after_commit = Vec::new();

        // Declared before the frame, which may point at it for the mode-change step.
        let mode_event = OnceCell::new();
        // Without its database, shared plugin state cannot be read (nor written: `Step`).
        let unavailable = shared.store_unavailable.as_deref().map(Unavailable);
        let state: &dyn StateSource = match &unavailable {
            Some(down) => down,
            None => &tx,
        };
        let frame = Frame::new(
            &self.facts,
            hook,
            event,
            &self.mode.id,
            time,
            state,
            &program.settings,
            self.resolved.settings(),
            &shared.config.shell_tools,
        );
        let next = self.mode.next(program.modes.as_ref(), &frame);
        let mut step = Step {
            shared: &self.shared,
            program,
            frame: &frame,
            resolved: &self.resolved,
            mode: next.index,
            session: &self.id,
            trees: &mut self.trees,
            mailbox: &mut self.mailbox,
            explain: self.explain,
            logging,
            tx: &tx,
            store_unavailable: shared.store_unavailable.as_deref(),
            after_commit: &mut after_commit,
            session_state: false,
        };
        // A change of mode ticks Warden's own `on_mode_change` first, in the new mode.
        let change = next.changed.clone().map(|(from, to)| {
            frame.set_mode(to);
            let data = serde_json::json!({ "from": &*from, "to": &**to });
            frame.set_step(
                Hook::OnModeChange,
                mode_event.get_or_init(|| Arc::new(Event::new().with_data(data))),
            );
            let outcome = step.run(Vec::new(), Vec::new());
            // Its notifications are injected with the event's, in the event's block: it has
            // none of its own.
            let _ = outcome.rendered.set(None);
            frame.set_step(hook, event);
            ModeChange {
                from,
                to: to.clone(),
                outcome: Box::new(outcome),
            }
        });
        let mut outcome = step.run(early, halted);
        let session_state = step.session_state;
        drop(frame);
        // The session's own state, as the rules that fired set it (the mode change's first).
        if session_state {
            if let Some(change) = &change {
                effects::write_session_state(&mut self.facts, &change.outcome.effects);
            }
            effects::write_session_state(&mut self.facts, &outcome.effects);
        }

        self.mode.enter(&next, &self.id);
        if next.changed.is_some() {
            Arc::make_mut(&mut self.facts).mode = self.mode.id.to_string();
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
            let mut inject = change.outcome.injected().to_vec();
            inject.extend(outcome.injected().iter().cloned());
            inject.sort_by_key(|n| std::cmp::Reverse(n.priority));
            outcome.inject = Inject::new(inject);
            outcome.mode_change = Some(change);
        }
        stop::hold(&mut self.stopped, hook, &mut outcome);
        // Warden's own block is written when a host asks for it (`Outcome::rendered`); an
        // operator's template runs now, so that its failure is one of this tick's errors.
        if shared.renderer.is_custom() {
            let (rendered, error) = shared.renderer.render(outcome.injected());
            let _ = outcome.rendered.set(rendered);
            if let Some(error) = error {
                outcome.errors.push(RuleError { rule: None, error });
            }
        }
        self.events += 1;
        // (`batch` is asked only of a durable session: there is a save to defer.)
        if batch
            && tx.is_untouched()
            && let Some((save, touched)) = self.session_save()
        {
            let pending = PendingSave {
                outcome,
                after_commit,
                hook,
                event: event.clone(),
                touched,
                attempts: self.attempts,
            };
            self.in_force = Some(in_force);
            return Attempt::Deferred(pending, save);
        }
        let committed = if self.durable.is_none() && tx.is_untouched() {
            // What `commit` does for a tick that saves no session and used the store for
            // nothing (most ticks of a session that is not durable), without moving the
            // transaction into it: a copy of over 500 bytes, PostgreSQL's connection being held
            // inline. It is dropped where it is, at the end, with nothing to roll back.
            self.settle(Ok(None), &mut outcome, after_commit, retry, None)
        } else {
            self.commit(tx, &mut outcome, after_commit, retry)
        };
        self.in_force = Some(in_force);
        if committed {
            if let Some(why) = &shared.store_unavailable {
                unsaved(&mut outcome, format!("the database is unavailable ({why})"));
            }
            Attempt::Done(outcome)
        } else {
            Attempt::Again
        }
    }
}
