//! Durable storage: session log files, the content-addressed store (image
//! blobs, checkpointed files), the pod's current-session pointer,
//! the listing's index, and the lock that makes one pod the only user of
//! its pointer; and the device tokens of `--listen` (`device_tokens`). Plain
//! synchronous file code; the `SessionLog` actor is the only user of the
//! logs at run time, which is what makes it their single writer.

pub mod claim;
pub mod content;
pub mod device_tokens;
pub mod index;
pub mod log_file;
pub mod pod_lock;
pub mod pod_socket;
pub mod pointer;
pub mod sessions;
pub mod staged;
#[cfg(test)]
mod test_entries;

pub use log_file::{LogError, LogFile, Recovered};
pub use pod_lock::PodLock;
pub use staged::StagedSession;
