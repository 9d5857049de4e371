//! The context API: what conditions, templates and scripts can read.
//!
//! - `schema.rs`: the documented context as tables (records, fields, scalar ids, helpers), and
//!   which roots each hook may read. The book's reference is checked against it.
//! - `frame.rs`: the frame one tick reads, and how the expression engine, templates and Lua
//!   read it.
//! - `views.rs`: what templates read: the frame as minijinja objects that fetch a field when
//!   the template reads it.
//! - `state.rs`: plugin state, read by key when a rule reads it, kept for the tick.
//! - `shell.rs`: `tool.shell`, the analysis of a shell tool's command, made at its first read.

mod frame;
mod shell;
mod state;
mod views;

pub use crate::schema::{
    NO_SETTINGS, SETTINGS_BASE, SETTINGS_ROOT, STATE_ROOT, plugin_schema, unavailable,
};
pub use frame::Frame;
pub use state::{StateSource, Unavailable};

#[cfg(test)]
mod tests;
