//! Every JSON shape Warden speaks to the outside, versioned: what the agent API answers for an
//! event (the outcome, its effects, ruling, notifications, errors), what the management API
//! shows of rules and settings, the service's error body and its live feed.
//!
//! The engine's own types (`Outcome`, `Effect`, `Notification`, `RuleInfo`...) do not derive
//! `Serialize` for the wire: a shape here is written from them (`From<&Engine>`), borrowing
//! what it can, so that the engine may change its types without changing what clients read,
//! and a new version of a shape can stand beside the old one (`v2`). The serialization of a
//! shape is its contract: its field names, their order, its tagging and its nulls are tested
//! byte for byte (`tests/golden.rs`). Readers of these shapes: serve's OpenAPI document, the
//! Settings page's JavaScript, the Python package, the book.

pub mod v1;
