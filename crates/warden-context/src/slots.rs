//! The settings of a program's plugins, numbered: setting `i` is read by conditions as the
//! scalar `ScalarId(SETTINGS_BASE + i)`, so a comparison with a setting stays on the native
//! path, and a session keeps one value per slot.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use warden_load::SettingDef;

/// One setting of one plugin, as a program numbers them (`ScalarId(SETTINGS_BASE + i)`).
pub struct Slot {
    /// The plugin that declares it.
    pub plugin: Arc<str>,
    /// Its declaration in the plugin's manifest.
    pub def: Arc<SettingDef>,
}

/// Every setting of a program's plugins.
#[derive(Default)]
pub struct SettingSlots {
    /// The slots, numbered as conditions read them.
    pub slots: Vec<Slot>,
    /// The slots of each plugin.
    pub by_plugin: HashMap<Arc<str>, Range<usize>>,
}

impl SettingSlots {
    /// The slots of `plugin` (none for rules outside a plugin).
    pub fn of(&self, plugin: &str) -> Range<usize> {
        self.by_plugin.get(plugin).cloned().unwrap_or(0..0)
    }

    /// The slot of `plugin`'s setting `name`.
    pub fn find(&self, plugin: &str, name: &str) -> Option<usize> {
        self.of(plugin).find(|&i| self.slots[i].def.name == name)
    }
}
