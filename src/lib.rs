//! pod: a single-binary LLM agent pod.
//!
//! `docs/architecture.md` is the map: the session log is the single source of
//! truth, actors in [`pod`] serialise every change to it, and every client
//! (the TUI in [`tui`], `pod send`, third parties) is a projection of it.

pub mod client;
pub mod input;
pub mod protocol;
pub mod provider;
pub mod tokens;
pub mod tools;
pub mod tui;
pub mod workspace;
