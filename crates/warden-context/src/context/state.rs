//! Plugin state as one tick reads it: a key is read from the store when a rule first reads it,
//! and kept for the rest of the tick; the whole of a plugin's state is read only when a rule
//! reads it whole (iterates it, counts it, prints it). So a tick costs what its rules read, not
//! what the plugins keep.
//!
//! Templates read through views that cannot borrow the tick (minijinja values are `'static`):
//! a view answers from what the tick has read so far and records what it missed; the template
//! is then rendered again once the missing keys are read ([`StateReader::refetch`]).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use warden_store::{StateScope, StoreError, TickTransaction};

/// Where a tick reads plugin state from: its transaction, so that what it reads cannot change
/// before what it writes is committed.
pub trait StateSource {
    /// One key of `scope`.
    fn get(&self, scope: &StateScope, key: &str) -> Result<Option<Value>, StoreError>;
    /// Every key of `scope`.
    fn all(&self, scope: &StateScope) -> Result<BTreeMap<String, Value>, StoreError>;
}

impl StateSource for TickTransaction<'_> {
    fn get(&self, scope: &StateScope, key: &str) -> Result<Option<Value>, StoreError> {
        self.state_get(scope, key)
    }
    fn all(&self, scope: &StateScope) -> Result<BTreeMap<String, Value>, StoreError> {
        self.state_all(scope)
    }
}

/// The state of a Warden whose database could not be opened: every read fails with why.
pub struct Unavailable<'a>(pub &'a str);

impl StateSource for Unavailable<'_> {
    fn get(&self, _: &StateScope, _: &str) -> Result<Option<Value>, StoreError> {
        Err(StoreError::Unavailable {
            reason: self.0.to_string(),
        })
    }
    fn all(&self, _: &StateScope) -> Result<BTreeMap<String, Value>, StoreError> {
        Err(StoreError::Unavailable {
            reason: self.0.to_string(),
        })
    }
}

/// Where a tick's plugin state comes from: the one thing to change to read it elsewhere.
type Source<'a> = &'a dyn StateSource;

/// A render reads what it misses and renders again at most this many times; then the whole of
/// the plugin's state is read, so the next render misses nothing.
const KEYED_PASSES: u32 = 4;

/// What a tick has read of one plugin's state, shared with the template views.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// Keys read one by one (`None`: not set).
    keys: HashMap<String, Option<Value>>,
    /// The whole state, once something read it whole.
    all: Option<BTreeMap<String, Value>>,
    /// Keys a view asked for that were not read yet.
    wanted: Vec<String>,
    /// A view asked for the whole state before it was read.
    wants_all: bool,
    /// Why the state could not be read (every later read of the tick fails the same way).
    error: Option<String>,
    /// A view read the state after it failed (the render that did so reports the failure; one
    /// that read nothing of the state does not).
    read_failed: bool,
}

/// A key as a snapshot knows it.
pub(crate) enum Known<'s> {
    /// Read: its value, or `None` when it is not set.
    Read(Option<&'s Value>),
    /// Not read yet (a view records it as wanted).
    Unknown,
    /// The state could not be read.
    Failed,
}

impl Snapshot {
    /// The state of no plugin: nothing, read whole.
    pub(crate) fn empty() -> Self {
        Snapshot {
            all: Some(BTreeMap::new()),
            ..Snapshot::default()
        }
    }

    /// What the snapshot knows of `key`.
    pub(crate) fn key(&self, key: &str) -> Known<'_> {
        if self.error.is_some() {
            return Known::Failed;
        }
        if let Some(all) = &self.all {
            return Known::Read(all.get(key));
        }
        match self.keys.get(key) {
            Some(v) => Known::Read(v.as_ref()),
            None => Known::Unknown,
        }
    }

    /// The whole state, when it was read.
    pub(crate) fn all(&self) -> Option<&BTreeMap<String, Value>> {
        self.all.as_ref()
    }

    /// Whether the state could not be read.
    pub(crate) fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// A view read the state, which could not be read.
    pub(crate) fn mark_failed_read(&mut self) {
        self.read_failed = true;
    }

    /// A view asks for `key`, which was not read yet.
    pub(crate) fn want(&mut self, key: &str) {
        if !self.wanted.iter().any(|k| k == key) {
            self.wanted.push(key.to_string());
        }
    }

    /// A view asks for the whole state, which was not read yet.
    pub(crate) fn want_all(&mut self) {
        self.wants_all = true;
    }
}

/// Locks a snapshot (a panic while it was held cannot leave it half-written: every write is
/// one assignment).
pub(crate) fn lock(snapshot: &Mutex<Snapshot>) -> MutexGuard<'_, Snapshot> {
    snapshot.lock().unwrap_or_else(|p| p.into_inner())
}

struct PluginState {
    plugin: Arc<str>,
    /// Made when the store is first read (a tick that reads no state makes none).
    scope: Option<StateScope>,
    snapshot: Arc<Mutex<Snapshot>>,
    /// Renders of this tick that read what they missed and rendered again.
    passes: u32,
}

/// Plugin state as one tick reads it (see the module docs).
pub struct StateReader<'a> {
    source: Source<'a>,
    user: &'a str,
    project: &'a str,
    /// The plugins read so far (a tick reads one or two: a list, searched in order).
    plugins: RefCell<Vec<PluginState>>,
}

impl<'a> StateReader<'a> {
    pub(crate) fn new(source: Source<'a>, user: &'a str, project: &'a str) -> Self {
        StateReader {
            source,
            user,
            project,
            plugins: RefCell::new(Vec::new()),
        }
    }

    /// Runs `f` on the state of `plugin` as read so far (made empty on first use).
    fn with<R>(&self, plugin: &Arc<str>, f: impl FnOnce(&mut PluginState) -> R) -> R {
        let mut plugins = self.plugins.borrow_mut();
        let i = match plugins.iter().position(|s| same(&s.plugin, plugin)) {
            Some(i) => i,
            None => {
                plugins.push(PluginState {
                    plugin: plugin.clone(),
                    scope: None,
                    snapshot: Arc::default(),
                    passes: 0,
                });
                plugins.len() - 1
            }
        };
        f(&mut plugins[i])
    }

    /// The store's scope of a plugin's state.
    fn scope<'s>(&self, state: &'s mut PluginState) -> &'s StateScope {
        let (user, project) = (self.user, self.project);
        state
            .scope
            .get_or_insert_with(|| StateScope::new(user, project, state.plugin.as_ref()))
    }

    /// The snapshot of `plugin`'s state that template views read.
    pub(crate) fn snapshot(&self, plugin: &Arc<str>) -> Arc<Mutex<Snapshot>> {
        self.with(plugin, |s| s.snapshot.clone())
    }

    /// Reads `key` of `plugin` (from the store on first read) and hands it to `f`: its value
    /// (`None`: not set), or why the state could not be read.
    pub(crate) fn key<R>(
        &self,
        plugin: &Arc<str>,
        key: &str,
        f: impl FnOnce(Result<Option<&Value>, &str>) -> R,
    ) -> R {
        let source = self.source;
        self.with(plugin, |s| {
            let snapshot = s.snapshot.clone();
            let mut snap = lock(&snapshot);
            if matches!(snap.key(key), Known::Unknown) {
                read_key(source, self.scope(s), &mut snap, key);
            }
            match snap.key(key) {
                Known::Read(v) => f(Ok(v)),
                _ => f(Err(failure(&snap))),
            }
        })
    }

    /// Reads the whole state of `plugin` (from the store on first read) and hands it to `f`,
    /// or why it could not be read.
    pub(crate) fn all<R>(
        &self,
        plugin: &Arc<str>,
        f: impl FnOnce(Result<&BTreeMap<String, Value>, &str>) -> R,
    ) -> R {
        let source = self.source;
        self.with(plugin, |s| {
            let snapshot = s.snapshot.clone();
            let mut snap = lock(&snapshot);
            if snap.all().is_none() && !snap.failed() {
                read_all(source, self.scope(s), &mut snap);
            }
            match snap.all() {
                Some(all) => f(Ok(all)),
                None => f(Err(failure(&snap))),
            }
        })
    }

    /// After a render of a template of `plugin`: reads what its views missed. True when the
    /// template must be rendered again (it read something that was not read yet, and that is
    /// now read); false when it missed nothing, or the state could not be read.
    pub(crate) fn refetch(&self, plugin: &Arc<str>) -> bool {
        let source = self.source;
        self.with(plugin, |s| {
            let snapshot = s.snapshot.clone();
            let mut snap = lock(&snapshot);
            if snap.wanted.is_empty() && !snap.wants_all {
                return false;
            }
            s.passes += 1;
            let whole = snap.wants_all || s.passes > KEYED_PASSES;
            let scope = self.scope(s);
            if whole {
                snap.wanted.clear();
                read_all(source, scope, &mut snap);
            } else {
                for key in std::mem::take(&mut snap.wanted) {
                    read_key(source, scope, &mut snap, &key);
                }
            }
            if snap.failed() {
                snap.read_failed = true;
            }
            !snap.failed()
        })
    }

    /// Why the state of `plugin` could not be read (for the rule's error).
    pub fn failure(&self, plugin: &Arc<str>) -> String {
        self.with(plugin, |s| failure(&lock(&s.snapshot)).to_string())
    }

    /// Whether a view read the state of `plugin` that could not be read, since the last time
    /// this was asked (so a render that read no state is not failed by an earlier one's read).
    pub(crate) fn take_failed_read(&self, plugin: &Arc<str>) -> bool {
        self.plugins
            .borrow()
            .iter()
            .find(|s| same(&s.plugin, plugin))
            .is_some_and(|s| std::mem::take(&mut lock(&s.snapshot).read_failed))
    }
}

fn same(a: &Arc<str>, b: &Arc<str>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

fn failure(snap: &Snapshot) -> &str {
    snap.error
        .as_deref()
        .unwrap_or("plugin state could not be read")
}

fn read_key(source: Source<'_>, scope: &StateScope, snap: &mut Snapshot, key: &str) {
    if !matches!(snap.key(key), Known::Unknown) {
        return;
    }
    match source.get(scope, key) {
        Ok(v) => {
            snap.keys.insert(key.to_string(), v);
        }
        Err(e) => snap.error = Some(format!("plugin state could not be read: {e}")),
    }
}

fn read_all(source: Source<'_>, scope: &StateScope, snap: &mut Snapshot) {
    snap.wants_all = false;
    if snap.all.is_some() || snap.failed() {
        return;
    }
    match source.all(scope) {
        Ok(all) => {
            snap.keys.clear();
            snap.all = Some(all);
        }
        Err(e) => snap.error = Some(format!("plugin state could not be read: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A source over a map of keys, counting what is asked of it.
    #[derive(Default)]
    struct Counting {
        keys: BTreeMap<String, Value>,
        gets: Cell<u32>,
        alls: Cell<u32>,
    }

    impl StateSource for Counting {
        fn get(&self, _: &StateScope, key: &str) -> Result<Option<Value>, StoreError> {
            self.gets.set(self.gets.get() + 1);
            Ok(self.keys.get(key).cloned())
        }
        fn all(&self, _: &StateScope) -> Result<BTreeMap<String, Value>, StoreError> {
            self.alls.set(self.alls.get() + 1);
            Ok(self.keys.clone())
        }
    }

    fn source(keys: usize) -> Counting {
        Counting {
            keys: (0..keys)
                .map(|i| (format!("k{i}"), Value::from(i)))
                .collect(),
            ..Counting::default()
        }
    }

    #[test]
    fn keys_are_read_one_by_one_and_kept_for_the_tick() {
        let source = source(3);
        let reader = StateReader::new(&source, "u", "p");
        let plugin: Arc<str> = Arc::from("plug");
        let read = |key: &str| {
            reader.key(&plugin, key, |v| {
                v.map(|v| v.cloned()).map_err(str::to_string)
            })
        };
        assert_eq!(read("k1"), Ok(Some(1.into())));
        assert_eq!(read("nope"), Ok(None));
        assert_eq!(read("k1"), Ok(Some(1.into())));
        assert_eq!(read("nope"), Ok(None));
        assert_eq!(
            (source.gets.get(), source.alls.get()),
            (2, 0),
            "each key read once"
        );
        assert_eq!(
            reader.all(&plugin, |all| all.map(BTreeMap::len).ok()),
            Some(3)
        );
        assert_eq!(read("k2"), Ok(Some(2.into())));
        assert_eq!(
            (source.gets.get(), source.alls.get()),
            (2, 1),
            "the whole state answers keys"
        );
        let other: Arc<str> = Arc::from("other");
        assert_eq!(
            reader.all(&other, |all| all.map(BTreeMap::len).ok()),
            Some(3)
        );
        assert_eq!(source.alls.get(), 2, "per plugin");
    }

    #[test]
    fn views_record_what_they_miss_and_the_render_goes_again() {
        let source = source(2);
        let reader = StateReader::new(&source, "u", "p");
        let plugin: Arc<str> = Arc::from("plug");
        let snap = reader.snapshot(&plugin);
        assert!(matches!(lock(&snap).key("k0"), Known::Unknown));
        lock(&snap).want("k0");
        assert!(reader.refetch(&plugin), "a missed key means another render");
        assert!(matches!(lock(&snap).key("k0"), Known::Read(Some(_))));
        assert!(!reader.refetch(&plugin), "nothing missed: done");
        lock(&snap).want_all();
        assert!(reader.refetch(&plugin));
        assert_eq!(lock(&snap).all().map(BTreeMap::len), Some(2));
        // A template that keeps missing keys ends up with the whole state.
        let reader = StateReader::new(&source, "u", "p");
        let snap = reader.snapshot(&plugin);
        for i in 0..=KEYED_PASSES {
            lock(&snap).want(&format!("missing{i}"));
            assert!(reader.refetch(&plugin));
        }
        assert!(lock(&snap).all().is_some());
    }
}
