//! Images: `put_blob`'s store against writing and fsyncing the same bytes;
//! attaching to a session of 50 images of 1 MiB against the same session
//! without them (time, snapshot bytes, pod memory); and building a request
//! with 5 images of 1 MiB against base64-encoding them.

use std::borrow::Cow;
use std::io::Write;
use std::time::Instant;

use base64::Engine as _;
use pod::blobs::{BlobLimits, Blobs};
use pod::context::Conversation;
use pod::input::Resolvers;
use pod::protocol::{AssistantItem, LogEntry, Segment, TurnEndReason};
use pod::provider::fuzzing::{write_body, Wire};
use pod::workspace::Workspace;

use crate::util::{median, ms, PodProcess, Row};
use crate::Config;

const MIB: usize = 1024 * 1024;

/// A PNG header then `size` bytes in all, distinct per `salt`.
fn image(size: usize, salt: usize) -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x05\0\0\0\x02\xd0\x08\x06\0\0\0".to_vec();
    let mut state = salt as u64 ^ 0x9e37_79b9_7f4a_7c15;
    while bytes.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(size);
    bytes
}

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 5 } else { 15 };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let limits = BlobLimits::default();
    let mut rows = Vec::new();

    // put_blob's store vs write + fsync, each on new bytes.
    let blobs = Blobs::open(&dir.path().join("store"), limits)?;
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain)?;
    let (mut base, mut put) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let bytes = image(5 * MIB, rep * 2);
        let t = Instant::now();
        let mut file = std::fs::File::create(plain.join(format!("f{rep}")))?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        base.push(ms(t.elapsed()));
        let bytes = image(5 * MIB, rep * 2 + 1);
        let t = Instant::now();
        blobs.put("image/png", &bytes)?;
        put.push(ms(t.elapsed()));
    }
    let (base, put) = (median(&base), median(&put));
    rows.push(Row::at_most(
        "8. put_blob of a 5 MiB image (store: hash, checks, write, fsync, rename, fsync dir)",
        format!("{base:.1} ms write + fsync"),
        format!("{put:.1} ms"),
        put / base,
        "≤ 1.5×",
        1.5,
    ));

    // A request with 5 images of 1 MiB vs base64 of them.
    let data = dir.path().join("req");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws)?;
    let blobs = Blobs::open(&data, limits)?;
    let images: Vec<Vec<u8>> = (0..5).map(|i| image(MIB, 100 + i)).collect();
    let mut segments = vec![Segment::text("what differs?")];
    for (i, bytes) in images.iter().enumerate() {
        let info = blobs.put("image/png", bytes)?;
        segments.push(Segment::image(
            info.digest.id(),
            "image/png",
            Some(format!("{i}.png")),
        ));
    }
    let workspace = Workspace::new(&ws)?;
    let resolvers = Resolvers::for_workspace(&workspace).with_blobs(Some(blobs), 20);
    let mut conversation = Conversation::new(
        uuid::Uuid::new_v4(),
        vec![LogEntry::UserInput {
            segments,
            at: LogEntry::now(),
            turn_id: None,
            request_id: None,
            resolved: Default::default(),
        }],
    );
    let (mut base, mut build) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        let encoded: usize = images
            .iter()
            .map(|b| base64::engine::general_purpose::STANDARD.encode(b).len())
            .sum();
        base.push(ms(t.elapsed()));
        let t = Instant::now();
        let request = conversation
            .prepare(&workspace, &resolvers)
            .request("system", Cow::Borrowed(&[]));
        let body = write_body(Wire::OpenAi, &request)?;
        build.push(ms(t.elapsed()));
        anyhow::ensure!(body.len() > encoded, "the body lacks the images");
    }
    let (base, build) = (median(&base), median(&build));
    rows.push(Row::at_most(
        "8. request with 5 images of 1 MiB, built (files read, body written)",
        format!("{base:.1} ms base64 of them"),
        format!("{build:.1} ms"),
        build / base,
        "≤ 2×",
        2.0,
    ));

    // Attach to 50 images of 1 MiB vs the same session without them.
    // Both pods run at once and the connects alternate, so that a drift in
    // the machine's load moves both sides of these sub-millisecond times;
    // and the pods are started afresh each round, so that where one
    // process happens to run (a core, a cache) does not decide the ratio.
    let with_dir = attach_session(config, true)?;
    let without_dir = attach_session(config, false)?;
    let (mut with_times, mut without_times) = (Vec::new(), Vec::new());
    let (mut with_bytes, mut without_bytes) = (0, 0);
    let (mut with_rss, mut without_rss) = (0, 0);
    for _ in 0..reps {
        let with_pod = listening_pod(with_dir.path())?;
        let without_pod = listening_pod(without_dir.path())?;
        for _ in 0..8 {
            let t = Instant::now();
            with_bytes = crate::attach::read_snapshot(&with_pod.socket)?.len();
            with_times.push(ms(t.elapsed()));
            let t = Instant::now();
            without_bytes = crate::attach::read_snapshot(&without_pod.socket)?.len();
            without_times.push(ms(t.elapsed()));
        }
        with_rss = with_rss.max(with_pod.rss()?.1);
        without_rss = without_rss.max(without_pod.rss()?.1);
    }
    let (with_ms, without_ms) = (median(&with_times), median(&without_times));
    rows.push(Row::at_most(
        "8. attach to 50 images of 1 MiB, connect → snapshot",
        format!("{without_ms:.2} ms without them"),
        format!("{with_ms:.2} ms"),
        with_ms / without_ms,
        "≤ 1.1×",
        1.1,
    ));
    rows.push(Row::at_most(
        "8. attach to 50 images, snapshot bytes",
        format!("{without_bytes} B without them"),
        format!("{with_bytes} B"),
        with_bytes as f64 / without_bytes as f64,
        "≤ 1.1×",
        1.1,
    ));
    rows.push(Row::at_most(
        "8. attach to 50 images, pod peak RSS",
        format!("{:.1} MiB without them", without_rss as f64 / MIB as f64),
        format!("{:.1} MiB", with_rss as f64 / MIB as f64),
        with_rss as f64 / without_rss as f64,
        "≤ 1.1×",
        1.1,
    ));
    Ok(rows)
}

/// A pod's directory holding a session of 50 turns of 1,000-character
/// messages and answers, each input with an image of 1 MiB or without.
fn attach_session(config: &Config, with_images: bool) -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let data = dir.path().join("data");
    let blobs = Blobs::open(&data, BlobLimits::default())?;
    let mut entries = Vec::new();
    for i in 0..50 {
        let mut segments = vec![Segment::text(crate::util::filler(1000, i))];
        if with_images {
            let info = blobs.put("image/png", &image(MIB, 1000 + i))?;
            segments.push(Segment::image(
                info.digest.id(),
                "image/png",
                Some(format!("{i}.png")),
            ));
        }
        entries.push(LogEntry::UserInput {
            segments,
            at: LogEntry::now(),
            turn_id: None,
            request_id: None,
            resolved: Default::default(),
        });
        entries.push(LogEntry::AssistantItems {
            items: vec![AssistantItem::Text {
                text: crate::util::filler(1000, 100 + i),
            }],
        });
        entries.push(LogEntry::TurnEnd {
            reason: TurnEndReason::Completed,
            turn_id: None,
            request_id: None,
            usage: None,
            error: None,
        });
    }
    crate::util::write_session(&data, entries.into_iter())?;
    Ok(dir)
}

/// A pod on the session [`attach_session`] wrote, listening.
fn listening_pod(dir: &std::path::Path) -> anyhow::Result<PodProcess> {
    let mut pod = PodProcess::spawn(dir, &["--provider", "offline"])?;
    pod.wait_listening(Instant::now())?;
    Ok(pod)
}
