//! Scenario 1, durable commit: one `SessionLog` append against a raw
//! `write` + `fdatasync` of the same bytes in the same directory, and a burst
//! of appends against one sync per entry.

use std::fs::OpenOptions;
use std::io::Write;
use std::time::Instant;

use anyhow::{bail, ensure};
use pod::pod::bench::DurableLog;
use pod::protocol::{LogEntry, LogLine, Segment};

use crate::util::{median, ms, Row};
use crate::Config;

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let rounds = if config.quick { 4 } else { 10 };
    let per_round = 20;
    let burst = 1000;
    let bursts = if config.quick { 2 } else { 5 };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let entry = LogEntry::UserInput {
        segments: vec![Segment::text(crate::util::filler(1000, 0))],
        at: LogEntry::now(),
        turn_id: None,
        request_id: None,
        resolved: Default::default(),
    };
    let system = actix_rt::System::new();
    let (raw, pod, burst_rates) = system.block_on(async {
        let log = DurableLog::create(&dir.path().join("data"))?;
        let mut raw_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("data/sessions/raw.jsonl"))?;
        let mut raw = Vec::new();
        let mut pod = Vec::new();
        let mut seq = 1u64;
        for _ in 0..rounds {
            for _ in 0..per_round {
                let mut line = serde_json::to_vec(&LogLine {
                    seq,
                    entry: entry.clone(),
                })?;
                line.push(b'\n');
                let t = Instant::now();
                raw_file.write_all(&line)?;
                raw_file.sync_data()?;
                raw.push(ms(t.elapsed()));
                let t = Instant::now();
                let got = log.append(entry.clone()).await?;
                pod.push(ms(t.elapsed()));
                ensure!(got == seq, "append answered seq {got}, expected {seq}");
                seq += 1;
            }
        }
        let mut burst_rates = Vec::new();
        for _ in 0..bursts {
            let log = DurableLog::create(&dir.path().join("data"))?;
            let t = Instant::now();
            let appends: Vec<_> = (0..burst).map(|_| log.append(entry.clone())).collect();
            let seqs = futures::future::join_all(appends).await;
            let elapsed = t.elapsed();
            for (i, got) in seqs.into_iter().enumerate() {
                let got = got?;
                ensure!(got == i as u64 + 1, "burst append {i} got seq {got}");
            }
            check_file(&log, burst)?;
            burst_rates.push(burst as f64 / elapsed.as_secs_f64());
        }
        anyhow::Ok((raw, pod, burst_rates))
    })?;
    let raw_median = median(&raw);
    let pod_median = median(&pod);
    let one_sync_rate = raw.len() as f64 / (raw.iter().sum::<f64>() / 1e3);
    let burst_rate = median(&burst_rates);
    Ok(vec![
        Row::at_most(
            "1. durable commit, median latency",
            format!("{raw_median:.3} ms write+fdatasync"),
            format!("{pod_median:.3} ms append"),
            pod_median / raw_median,
            "≤ 1.3×",
            1.3,
        ),
        Row::at_least(
            "1. burst of 1,000 appends, throughput",
            format!("{one_sync_rate:.0} entries/s, one sync each"),
            format!("{burst_rate:.0} entries/s"),
            burst_rate / one_sync_rate,
            "≥ 5×",
            5.0,
        ),
    ])
}

/// After a burst: the file holds `session_start` and then every append, in
/// seq order, each line whole — what a restart would recover.
fn check_file(log: &DurableLog, appended: usize) -> anyhow::Result<()> {
    let data = std::fs::read(log.path())?;
    let mut count = 0;
    for (i, line) in data
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        let line: LogLine = serde_json::from_slice(line)?;
        if line.seq != i as u64 {
            bail!("line {i} of {} has seq {}", log.path().display(), line.seq);
        }
        count += 1;
    }
    ensure!(
        count == appended + 1,
        "{count} lines after {appended} appends"
    );
    Ok(())
}
