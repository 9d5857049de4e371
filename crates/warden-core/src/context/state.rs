//! Plugin state as one tick reads it: loaded from the store on first use, once per plugin.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use warden_store::{StateScope, StoreError, TickTransaction};

/// One plugin's state, or why it could not be read.
pub(crate) type LoadedState = Result<Arc<BTreeMap<String, Value>>, String>;

/// Where a tick reads plugin state from: its transaction, so that what it reads cannot change
/// before what it writes is committed.
pub(crate) trait StateSource {
    /// One key of `scope`.
    #[allow(dead_code)]
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

/// Plugin state as one tick reads it: loaded from the store on first use, once per plugin.
pub(crate) struct StateReader<'a> {
    store: &'a dyn StateSource,
    user: &'a str,
    project: &'a str,
    cache: RefCell<HashMap<Arc<str>, LoadedState>>,
}

impl<'a> StateReader<'a> {
    pub(crate) fn new(store: &'a dyn StateSource, user: &'a str, project: &'a str) -> Self {
        StateReader {
            store,
            user,
            project,
            cache: RefCell::new(HashMap::new()),
        }
    }

    /// The state of `plugin`, or why it could not be read.
    pub(crate) fn get(&self, plugin: &Arc<str>) -> LoadedState {
        if let Some(hit) = self.cache.borrow().get(plugin) {
            return hit.clone();
        }
        let scope = StateScope::new(self.user, self.project, plugin.as_ref());
        let loaded = self
            .store
            .all(&scope)
            .map(Arc::new)
            .map_err(|e| format!("plugin state could not be read: {e}"));
        self.cache
            .borrow_mut()
            .insert(plugin.clone(), loaded.clone());
        loaded
    }
}
