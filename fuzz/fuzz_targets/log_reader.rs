//! A session log file's bytes, read as the pod reads one at start or for
//! `get_session`. Whatever it accepts, the writer's form of the same entries
//! must read back the same: the reader is never stricter than the writer.
#![no_main]

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pod::protocol::LogLine;
use pod::store::log_file::read_lines;

/// An in-memory file, reached by path (`read_lines` takes one).
fn memfile(slot: &'static OnceLock<(File, PathBuf)>) -> &'static (File, PathBuf) {
    slot.get_or_init(|| {
        let fd = rustix::fs::memfd_create("pod-fuzz-log", rustix::fs::MemfdFlags::CLOEXEC)
            .expect("memfd_create");
        let path = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)));
        (File::from(fd), path)
    })
}

fn load(slot: &'static OnceLock<(File, PathBuf)>, data: &[u8]) -> Option<pod::store::Recovered> {
    let (file, path) = memfile(slot);
    file.set_len(0).expect("truncate memfd");
    file.write_all_at(data, 0).expect("write memfd");
    read_lines(path).ok()
}

static INPUT: OnceLock<(File, PathBuf)> = OnceLock::new();
static REWRITTEN: OnceLock<(File, PathBuf)> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let Some(recovered) = load(&INPUT, data) else {
        return;
    };
    assert_eq!(recovered.lines.len(), recovered.entries.len());
    let mut rewritten = Vec::new();
    for (seq, entry) in recovered.entries.iter().enumerate() {
        let line = LogLine {
            seq: seq as u64,
            entry: entry.clone(),
        };
        serde_json::to_writer(&mut rewritten, &line).expect("an accepted entry serialises");
        rewritten.write_all(b"\n").expect("write to a Vec");
    }
    let again = load(&REWRITTEN, &rewritten).expect("the writer's form of accepted entries reads back");
    assert_eq!(again.entries, recovered.entries);
    assert!(again.truncated_tail.is_none());
});
