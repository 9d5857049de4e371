//! Every JSON shape Warden speaks to the outside, versioned: what agent loops write (an event, a
//! trace line, the body of a request reporting one), what the agent API answers for an event
//! (the outcome, its effects, ruling, notifications, errors), the lines a replay writes, what
//! the management API shows of rules and settings, the service's error body and its live feed.
//!
//! The engine's own types (`Event`, `Outcome`, `Effect`, `Notification`, `RuleInfo`...) do not
//! derive serde for the wire: a shape here is written from them (`From<&Engine>`), borrowing
//! what it can, or read into one (`v1::Event::into_engine`), so that the engine may change its
//! types without changing what clients read and write, and a new version of a shape can stand
//! beside the old one (`v2`). The serialization of a shape is its contract: its field names,
//! their order, its tagging and its nulls are tested byte for byte (`tests/golden.rs`). Readers
//! and writers of these shapes: serve's OpenAPI document, the Settings page's JavaScript, the
//! Python package, `warden replay` and `warden backtest`, the book.

pub mod v1;
