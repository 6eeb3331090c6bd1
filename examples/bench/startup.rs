//! Scenario 4, startup: `pod serve` on a 100,000-entry log until it listens,
//! against reading the file and parsing every line with serde_json.

use std::time::Instant;

use anyhow::ensure;
use pod::protocol::LogLine;

use crate::util::{median, ms, realistic_entry, PodProcess, Row};
use crate::Config;

const ENTRIES: usize = 100_000;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 2 } else { 5 };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let log = crate::util::write_session(
        &dir.path().join("data"),
        (0..ENTRIES).map(|i| realistic_entry(i, 400)),
    )?;
    let size = std::fs::metadata(&log)?.len();
    let mut parse = Vec::new();
    let mut serve = Vec::new();
    // One unmeasured read first, so both sides start from a warm page cache.
    parse_file(&log)?;
    for _ in 0..reps {
        let t = Instant::now();
        let n = parse_file(&log)?;
        parse.push(ms(t.elapsed()));
        ensure!(n == ENTRIES + 1, "parsed {n} lines");
        let t = Instant::now();
        let mut pod = PodProcess::spawn(dir.path(), &["--provider", "offline"])?;
        serve.push(ms(pod.wait_listening(t)?));
    }
    let parse = median(&parse);
    let serve = median(&serve);
    Ok(vec![Row::at_most(
        "4. startup on 100,000 entries",
        format!(
            "{parse:.0} ms read + serde_json parse ({:.0} MiB)",
            size as f64 / (1024.0 * 1024.0)
        ),
        format!("{serve:.0} ms spawn → listening"),
        serve / parse,
        "≤ 1.5×",
        1.5,
    )])
}

/// Reads the file and parses each line into the log's own type.
fn parse_file(path: &std::path::Path) -> anyhow::Result<usize> {
    let data = std::fs::read(path)?;
    let mut n = 0;
    for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let _: LogLine = serde_json::from_slice(line)?;
        n += 1;
    }
    Ok(n)
}
