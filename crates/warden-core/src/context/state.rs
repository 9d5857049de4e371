//! Plugin state as one tick reads it: loaded from the store on first use, once per plugin.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::Value;
use warden_store::{StateScope, Store};

/// One plugin's state, or why it could not be read.
pub(crate) type LoadedState = Result<Arc<BTreeMap<String, Value>>, String>;

/// Plugin state as one tick reads it: loaded from the store on first use, once per plugin.
pub(crate) struct StateReader<'a> {
    store: &'a Store,
    user: &'a str,
    project: &'a str,
    cache: RefCell<HashMap<Arc<str>, LoadedState>>,
}

impl<'a> StateReader<'a> {
    pub(crate) fn new(store: &'a Store, user: &'a str, project: &'a str) -> Self {
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
            .state_all(&scope)
            .map(Arc::new)
            .map_err(|e| format!("plugin state could not be read: {e}"));
        self.cache
            .borrow_mut()
            .insert(plugin.clone(), loaded.clone());
        loaded
    }
}
