//! Warden's vocabulary and context: what an agent loop reports ([`event`]), what a session
//! knows ([`facts`]), the notifications rules send ([`notification`]), and the frozen context a
//! tick's rules read ([`context`]) through expressions, templates ([`template`]) and Lua, as
//! the documented [`schema`] says, with plugin settings in [`slots`].
//!
//! This crate is a layer of Warden's engine, below the program (`warden-program`) and the
//! sessions (`warden-core`); hosts use it through `warden-core`, which re-exports what its
//! interface hands out.

#![warn(missing_docs)]

pub mod context;
pub mod event;
pub mod facts;
pub mod notification;
pub mod schema;
pub mod slots;
pub mod template;
