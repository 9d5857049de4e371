//! A waiting script brought back in another runtime (perhaps another process): its globals
//! saved and set again, and its runs replayed from its record until it waits where it waited.

use super::*;

impl Runtime {
    /// Brings back a waiting script from its replay record (made by a runtime that records,
    /// perhaps in another process): runs it again from its start, answering what it reads from
    /// the record, until it waits where it waited last. An error says where the re-run
    /// diverged from the record (the script or its rule changed, or it iterated a table whose
    /// order differs between Lua states); nothing of it is kept then.
    pub fn restore(
        &mut self,
        script: &Script,
        journal: &Journal,
        timeout: Duration,
    ) -> Result<Task, RestoreError> {
        self.restore_task(script, journal, timeout)
            .map_err(|reason| RestoreError { reason })
    }

    fn restore_task(
        &mut self,
        script: &Script,
        journal: &Journal,
        timeout: Duration,
    ) -> Result<Task, String> {
        if journal.runs.is_empty() {
            return Err("its replay record is empty".into());
        }
        self.compile(script).map_err(|e| describe_error(&e))?;
        self.set_globals(script, &journal.globals)
            .map_err(|e| describe_error(&e))?;
        let (thread, state) = self.task_thread().map_err(|e| describe_error(&e))?;
        let mut rng = journal.seed;
        let mut first = true;
        for (n, run) in journal.runs.iter().enumerate() {
            let tape = Tape::Replay {
                inputs: run.inputs.iter().cloned().collect(),
                diverged: None,
            };
            let on = run::On {
                thread: state,
                key: script.key,
                first: std::mem::take(&mut first),
            };
            let (step, tape, next, _) = self.run(on, &Replaying, timeout, tape, rng);
            rng = next;
            let left = match tape {
                Tape::Replay { inputs, .. } => inputs.len(),
                _ => 0,
            };
            let why = match &step {
                Step::Waiting { wake, effects } => {
                    if *wake != run.wake {
                        Some(format!(
                            "its re-run waited for {} where the record has {}",
                            wake.as_deref().unwrap_or("its own hook"),
                            run.wake.as_deref().unwrap_or("its own hook")
                        ))
                    } else if journal::digest(effects) != run.actions {
                        Some("its re-run acted otherwise than the record".into())
                    } else if left > 0 {
                        Some(format!(
                            "its re-run read {left} values fewer than the record"
                        ))
                    } else {
                        None
                    }
                }
                Step::Done { .. } => Some("its re-run finished where the record waits".into()),
                Step::Failed { error } => Some(error.clone()),
            };
            if let Some(why) = why {
                let _ = thread.reset(self.call.clone());
                return Err(format!("run {} of {}: {why}", n + 1, journal.runs.len()));
            }
        }
        self.ledger.open(script.key, &script.name);
        self.ledger.own(&thread, script.key);
        Ok(Task {
            thread,
            state,
            script: script.name.clone(),
            key: script.key,
            rng: Cell::new(rng),
            journal: RefCell::new(Some(journal.clone())),
        })
    }

    /// The data a script keeps in its globals (what its runs leave there for the next), or
    /// `None` when it has not run in this runtime. Functions, coroutines and tables with a
    /// metatable (Warden's read-only views among them) are left out, and so are the waiting
    /// primitives bound in them (`coroutine`, `wait_turns`, `wait_for`: [`Runtime::set_globals`]
    /// binds them again).
    pub fn globals(&self, script: &Script) -> Option<Recorded> {
        let env = self.envs.get(&script.key)?;
        let g = Value::String(self.lua.create_string("_G").ok()?);
        Some(Recorded::data_of(&env.table, |k, v| {
            *k == g || self.waits.contains(&(v.to_pointer() as usize))
        }))
    }

    /// Sets a script's globals to `data` (what [`Runtime::globals`] gave, perhaps in another
    /// process): the data they held is dropped; what [`Runtime::globals`] leaves out, the
    /// functions the script defined among them, stays (a session brings its waiting scripts
    /// back first, whose runs replayed define them again, then sets their saved globals).
    pub fn set_globals(&mut self, script: &Script, data: &Recorded) -> mlua::Result<()> {
        self.function(script)?;
        // Its globals are no longer as they were made: its runs check them.
        if let Some(c) = self.compiled.get_mut(&script.key) {
            c.keeps_nothing = false;
        }
        let Some(Env { table: env, .. }) = self.envs.get(&script.key) else {
            return Ok(());
        };
        let old: Vec<Value> = env
            .clone()
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok())
            .filter(|(_, v)| Recorded::of(v).is_ok())
            .map(|(k, _)| k)
            .collect();
        for k in old {
            if !matches!(&k, Value::String(s) if s.as_bytes() == b"_G") {
                env.raw_set(k, Value::Nil)?;
            }
        }
        // (Left out of the data: see `globals`.)
        self.bind_waits(env, &script.source)?;
        if let Recorded::Table(pairs) = data {
            for (k, v) in pairs {
                let k = k.to_lua(&self.lua, &mut no_records)?;
                if !matches!(&k, Value::String(s) if s.as_bytes() == b"_G") {
                    env.raw_set(k, v.to_lua(&self.lua, &mut no_records)?)?;
                }
            }
        }
        Ok(())
    }
}

/// Why a waiting script could not be brought back from its replay record
/// ([`Runtime::restore`]): where the re-run diverged from the record, or what kept it from
/// starting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct RestoreError {
    /// What went wrong.
    pub reason: String,
}
