//! pod: a single-binary LLM agent pod.
//!
//! `docs/architecture.md` is the map: the session log ([`store`]) is the
//! single source of truth, the actors in [`pod`] serialise every change to it,
//! and every client (`pod send`, the TUI, third parties) is a projection of it
//! over the [`protocol`].

pub mod acp;
pub mod approval;
pub mod blobs;
pub mod checkpoint;
pub mod cli;
pub mod client;
pub mod completion;
pub mod context;
pub mod hooks;
pub mod input;
pub mod mcp;
pub mod pod;
pub mod private;
pub mod prompt;
pub mod provider;
pub mod remote;
pub mod safe_text;
pub mod store;
pub mod tools;
pub mod tui;
pub mod web;
pub mod workspace;

/// The wire protocol is a crate of its own (`crates/protocol`), what a
/// third-party Rust client needs; re-exported here so the rest of the code
/// keeps naming it `crate::protocol`.
pub use pod_protocol as protocol;
