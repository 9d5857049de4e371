//! Warden's compiled program: rules ([`rule`]) with their conditions and [`actions`],
//! behavior trees authors compose in TOML ([`behavior`]), context-detection [`mode`]s, and the
//! per-hook trees and [`index`] they compile into ([`hooks`], [`program`]), with the
//! [`outcome`] a tick of them returns.
//!
//! This crate is a layer of Warden's engine, above the vocabulary and context
//! (`warden-context`) and below the sessions that tick a program (`warden-core`); hosts use it
//! through `warden-core`, which re-exports what its interface hands out.

#![warn(missing_docs)]

pub mod actions;
pub mod behavior;
pub mod hooks;
pub mod index;
pub mod mode;
pub mod outcome;
pub mod program;
pub mod rule;
