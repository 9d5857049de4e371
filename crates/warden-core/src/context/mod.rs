//! The context API: what conditions, templates and scripts can read.
//!
//! - `schema.rs`: the documented context as tables (records, fields, scalar ids, helpers), and
//!   which roots each hook may read. The book's reference is checked against it.
//! - `frame.rs`: the frame one tick reads, and how the expression engine, templates and Lua
//!   read it.
//! - `state.rs`: plugin state, read once per plugin per tick.

mod frame;
mod schema;
mod state;

pub(crate) use frame::Frame;
pub use schema::schema;
pub(crate) use schema::{
    NO_SETTINGS, SETTINGS_BASE, SETTINGS_ROOT, STATE_ROOT, plugin_schema, unavailable,
};
