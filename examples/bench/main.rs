//! `cargo run --release --example bench [-- --quick] [-- --only NAME,…]`:
//! measures the pod against the machine's own limits, each figure a ratio
//! to a baseline measured in the same run. `docs/performance.md` explains
//! every scenario and records a run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // A developer's tool: a panic is its error report.

mod acp;
mod agents;
mod attach;
mod caching;
mod checkpoint;
mod clients;
mod durable;
mod exec;
mod fanout;
mod hooks;
mod images;
mod jobs;
mod later;
mod oneshot;
mod page;
mod remote;
mod sessions;
mod sse;
mod startup;
mod stream;
mod turn;
mod util;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(about = "Benchmarks of the pod against baselines measured in the same run")]
pub struct Config {
    /// Fewer repetitions and shorter streams (about a minute in all).
    #[arg(long)]
    quick: bool,
    /// Run only these scenarios: durable, attach, fanout, startup, turn,
    /// later, stream, sessions, checkpoint, images, hooks, remote, page,
    /// jobs, oneshot, caching, acp, agents, exec.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run this program's `serve` (another build of the bench) as the pod,
    /// to measure an older build against this run's baselines.
    #[arg(long)]
    serve_with: Option<PathBuf>,
    /// Where the logs are written; the durable baseline syncs to the same
    /// filesystem.
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    tmp: PathBuf,
}

type Scenario = fn(&Config) -> anyhow::Result<Vec<util::Row>>;

const SCENARIOS: [(&str, Scenario); 19] = [
    ("durable", durable::run),
    ("attach", attach::run),
    ("fanout", fanout::run),
    ("startup", startup::run),
    ("turn", turn::run),
    ("later", later::run),
    ("stream", stream::run),
    ("sessions", sessions::run),
    ("checkpoint", checkpoint::run),
    ("images", images::run),
    ("hooks", hooks::run),
    ("remote", remote::run),
    ("page", page::run),
    ("jobs", jobs::run),
    ("oneshot", oneshot::run),
    ("caching", caching::run),
    ("acp", acp::run),
    ("agents", agents::run),
    ("exec", exec::run),
];

fn main() -> ExitCode {
    // The scenarios start `pod serve` as this program re-executed (see
    // `util::PodProcess`).
    match std::env::args().nth(1).as_deref() {
        // `send` too: the one-shot scenario runs `pod send` as a user does;
        // `acp` for scenario 17's editor; `exec` and `replay` for 19.
        Some("serve" | "send" | "acp" | "exec" | "replay") => return serve(),
        Some(pod::tools::reaper::SUBCOMMAND) => return pod::tools::reaper::run(),
        Some("bare-read") => return stream::bare_read(),
        _ => {}
    }
    let config = Config::parse();
    if let Some(path) = &config.serve_with {
        util::serve_with(path.clone());
    }
    let mut rows = Vec::new();
    let mut failed = false;
    let steal = util::Steal::now();
    for (name, scenario) in SCENARIOS {
        if !config.only.is_empty() && !config.only.iter().any(|o| o == name) {
            continue;
        }
        eprintln!("bench: {name}…");
        match scenario(&config) {
            Ok(r) => rows.extend(r),
            Err(e) => {
                eprintln!("bench: {name} failed: {e:#}");
                failed = true;
            }
        }
    }
    println!("| scenario | baseline | pod | ratio | bar | |");
    println!("|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {:.2} | {} | {} |",
            row.scenario,
            row.baseline,
            row.pod,
            row.ratio,
            row.bar,
            match (row.bar, row.pass) {
                (util::CONTEXT, _) => "—",
                (_, true) => "pass",
                (_, false) => "**FAIL**",
            }
        );
    }
    println!(
        "\nCPU time stolen by the hypervisor during the run: {:.1}% (a shared host \
         stalls pod and bench alike; latencies suffer first)",
        steal.share_since() * 100.0
    );
    if failed || rows.iter().any(|r| !r.pass) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn serve() -> ExitCode {
    use clap::Parser as _;
    let cli = pod::cli::Cli::parse_from(
        std::iter::once("pod".to_owned()).chain(std::env::args().skip(1)),
    );
    match pod::cli::run(cli, pod::cli::ConfigFile::default()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pod: {e:#}");
            ExitCode::FAILURE
        }
    }
}
