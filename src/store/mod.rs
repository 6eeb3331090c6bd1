//! Durable storage: session log files, the pod's current-session pointer,
//! and the session listing's index.
//! Plain synchronous file code; the `SessionLog` actor is its only user at
//! run time, which is what makes it the single writer.

pub mod index;
pub mod log_file;
pub mod pointer;
pub mod sessions;

pub use log_file::{LogError, LogFile, Recovered};
