//! Warden's sessions: one conversation's facts, mode, trees left running, queued
//! notifications and Lua state, ticked against a compiled program (`warden-program`) at each
//! hook ([`session`]), saved as plain data and read back in any process; and what every
//! session of a Warden shares ([`shared`]: the program in force, the store, the event bus,
//! users' choices as `warden-control` reads them, knowledge enrichment in [`knowledge`]),
//! with an operator's template for the block of notifications ([`render`]) and the engine's
//! [`error`].
//!
//! This crate is a layer of Warden's engine, above the program and below the host's entry
//! point (`warden-core`: the builder, hot reload, the async session); hosts use it through
//! `warden-core`, which re-exports what its interface hands out.

#![warn(missing_docs)]

pub mod error;
pub mod knowledge;
pub mod render;
pub mod session;
pub mod shared;
