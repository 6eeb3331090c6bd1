//! Checkpoints against git on the same tree: a turn-start checkpoint of a
//! 10,000-file (~100 MB) workspace with one file changed vs `git status
//! --porcelain` (both warm); the first checkpoint vs `git add -A` into a
//! fresh index; a rewind of 100 files vs copying them durably; and the
//! store's growth over 100 one-line edits of a 100 KB file.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use pod::checkpoint::{restore, Checkpoints, DEFAULT_MAX_FILE_BYTES, DEFAULT_STORE_BYTES};

use super::util::{median, ms, Row};
use super::Config;

fn git(dir: &Path, args: &[&str], envs: &[(&str, &Path)]) -> anyhow::Result<Duration> {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir).args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let out = cmd.output()?;
    let took = started.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(took)
}

/// `files` files of about `size` bytes in 100 directories.
fn tree(root: &Path, files: usize, size: usize) -> anyhow::Result<()> {
    for i in 0..files {
        let dir = root.join(format!("d{:02}", i % 100));
        std::fs::create_dir_all(&dir)?;
        let mut body = format!("file {i}\n").repeat(size / 10 + 1);
        body.truncate(size);
        std::fs::write(dir.join(format!("f{i:05}.txt")), body)?;
    }
    Ok(())
}

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let (files, size, reps) = if config.quick {
        (2_000, 10_000, 3)
    } else {
        (10_000, 10_000, 5)
    };
    let dir = tempfile::tempdir_in(&config.tmp)?;
    let ws = dir.path().join("ws");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&ws)?;
    tree(&ws, files, size)?;
    let mut rows = Vec::new();

    // First checkpoint vs `git add -A` into a fresh repository's index.
    let fresh_git = dir.path().join("fresh.git");
    git(
        dir.path(),
        &["init", "-q", "--bare", fresh_git.to_str().unwrap_or("")],
        &[],
    )?;
    let git_add = git(
        &ws,
        &["add", "-A"],
        &[("GIT_DIR", &fresh_git), ("GIT_WORK_TREE", &ws)],
    )?;
    let store = Checkpoints::open(&data, &ws, DEFAULT_MAX_FILE_BYTES, DEFAULT_STORE_BYTES)?;
    let started = Instant::now();
    let first = store.take()?;
    let took = started.elapsed();
    rows.push(Row::at_most(
        "8. checkpoint: first, 10k files ~100 MB (vs git add -A, fresh index)",
        format!("{:.0} ms", ms(git_add)),
        format!("{:.0} ms", ms(took)),
        ms(took) / ms(git_add),
        "≤ 1.5",
        1.5,
    ));

    // Turn start with one file changed, warm, vs `git status --porcelain`.
    git(&ws, &["init", "-q"], &[])?;
    git(&ws, &["add", "-A"], &[])?;
    git(
        &ws,
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "x",
        ],
        &[],
    )?;
    // Let the files' times age past the stat cache's racy window.
    std::thread::sleep(Duration::from_secs(3));
    store.take()?;
    git(&ws, &["status", "--porcelain"], &[])?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        std::fs::write(ws.join("d07/f00007.txt"), format!("changed {rep}\n"))?;
        theirs.push(ms(git(&ws, &["status", "--porcelain"], &[])?));
        let started = Instant::now();
        store.take()?;
        ours.push(ms(started.elapsed()));
    }
    let (ours, theirs) = (median(&ours), median(&theirs));
    rows.push(Row::at_most(
        "8. checkpoint: turn start, one file changed (vs git status --porcelain)",
        format!("{theirs:.1} ms"),
        format!("{ours:.1} ms"),
        ours / theirs,
        "≤ 2 and ≤ 50 ms",
        if ours <= 50.0 { 2.0 } else { 0.0 },
    ));

    // Rewind of 100 changed files vs copying them durably.
    let before = store.take()?;
    let paths: Vec<String> = (0..100)
        .map(|i| format!("d{:02}/f{i:05}.txt", i % 100))
        .collect();
    for p in &paths {
        std::fs::write(ws.join(p), "rewritten\n")?;
    }
    let now = store.take()?;
    let target = store.manifest(&before.id)?;
    let started = Instant::now();
    let outcome = restore::restore(&store, &target, &now.manifest, &paths);
    let rewind = started.elapsed();
    anyhow::ensure!(outcome.restored.len() == 100, "{:?}", outcome.not_restored);
    let copies = dir.path().join("copies");
    std::fs::create_dir_all(&copies)?;
    let started = Instant::now();
    for (i, p) in paths.iter().enumerate() {
        let to = copies.join(format!("{i}"));
        std::fs::copy(ws.join(p), &to)?;
        std::fs::File::open(&to)?.sync_all()?;
    }
    let copy = started.elapsed();
    rows.push(Row::at_most(
        "8. rewind: 100 files (vs copying them, each synced)",
        format!("{:.1} ms", ms(copy)),
        format!("{:.1} ms", ms(rewind)),
        ms(rewind) / ms(copy),
        "≤ 2",
        2.0,
    ));
    drop(first);

    // Storage: 100 turns each changing one line of one 100 KB file.
    let small = dir.path().join("small");
    let small_data = dir.path().join("small-data");
    std::fs::create_dir_all(&small)?;
    let mut lines: Vec<String> = (0..2_000).map(|i| format!("line {i:045}\n")).collect();
    std::fs::write(small.join("big.txt"), lines.concat())?;
    std::fs::write(small.join("README"), "a small project\n")?;
    let store = Checkpoints::open(
        &small_data,
        &small,
        DEFAULT_MAX_FILE_BYTES,
        DEFAULT_STORE_BYTES,
    )?;
    store.take()?;
    let start_bytes = store.objects().total_bytes()?;
    let mut changed = 0u64;
    for turn in 0..100 {
        lines[turn * 7 % 2_000] = format!("turn {turn:045}\n");
        let body = lines.concat();
        changed += body.len() as u64;
        let mut f = std::fs::File::create(small.join("big.txt"))?;
        f.write_all(body.as_bytes())?;
        store.take()?;
    }
    let grown = store.objects().total_bytes()? - start_bytes;
    rows.push(Row::at_most(
        "8. checkpoint: store growth, 100 one-line edits of a 100 KB file",
        format!("{} KB changed", changed / 1024),
        format!("{} KB stored", grown / 1024),
        grown as f64 / changed as f64,
        "≤ 2",
        2.0,
    ));
    Ok(rows)
}
