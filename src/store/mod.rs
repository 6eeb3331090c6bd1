//! Durable storage: session log files and the pod's current-session pointer.
//! Plain synchronous file code; the `SessionLog` actor is its only user at
//! run time, which is what makes it the single writer.

pub mod log_file;
pub mod pod_socket;
pub mod pointer;
pub mod sessions;

pub use log_file::{LogError, LogFile, Recovered};
