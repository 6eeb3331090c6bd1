//! Plain `pod`: attach to the pod, starting it first (with the `serve`
//! flags typed) when none listens. When one already listens and differs
//! from what was asked — another workspace, another model, … — it says so
//! and asks before attaching: the TUI takes the whole screen at once, so a
//! warning printed on the way in would be hidden until the user quits.

use std::fmt::Write as _;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::Path;
use std::process::ExitCode;

use super::args::{Cli, Given, ServeArgs};
use super::connect::{connect, exit, nobody_listens, snapshot};
use super::{serve, Paths};
use crate::protocol::{Greeting, Snapshot, Status};
use crate::tools::Switch;

pub fn run(cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let name = &cli.global.name;
    if nobody_listens(&paths.socket) {
        serve::start_background(name, paths, cli.global.config.as_deref(), &cli.given.argv)?;
    } else if let Some(snapshot) = super::runtime()?.block_on(running(&paths.socket)) {
        let asked = Asked {
            serve: &cli.serve,
            given: &cli.given,
            workspace: &paths.workspace,
            workspace_given: cli.global.workspace.is_some(),
        };
        if let Some(message) = mismatch(name, &asked, &snapshot.greeting, &snapshot.status) {
            eprint!("{message}");
            if !attach_anyway()? {
                return Ok(ExitCode::from(exit::FAILED));
            }
        }
    }
    serve::attach(name, paths)
}

/// The running pod's snapshot; `None` when it cannot be read (the TUI
/// will say why, and keeps trying).
async fn running(socket: &Path) -> Option<Snapshot> {
    let (mut events, _sink) = connect(socket).await.ok()??;
    snapshot(&mut events, socket).await.ok()
}

/// Asks on the terminal; without one there is nobody to ask, and the TUI
/// cannot run anyway, so the answer is yes.
fn attach_anyway() -> anyhow::Result<bool> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Ok(true);
    }
    eprint!("Attach to it as it is? [Y/n] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    if stdin.lock().read_line(&mut answer)? == 0 {
        eprintln!();
        return Ok(false);
    }
    Ok(!matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "n" | "no"
    ))
}

/// What plain `pod` was asked for.
pub struct Asked<'a> {
    pub serve: &'a ServeArgs,
    pub given: &'a Given,
    pub workspace: &'a Path,
    /// `--workspace` (or `POD_WORKSPACE`) named it; else the current directory.
    pub workspace_given: bool,
}

/// One setting in which the running pod is not what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The setting, as its flag (`--model`) or `workspace`.
    pub setting: &'static str,
    pub running: String,
    pub asked: String,
    /// How to get what was asked without restarting, when there is a way.
    pub live_fix: Option<String>,
}

/// The settings that the running pod reports and that differ from the
/// flags given, and the workspace when it is not the one asked for.
pub fn differences(asked: &Asked, greeting: &Greeting, status: &Status) -> Vec<Difference> {
    let mut found = Vec::new();
    let mut compare = |setting, running: String, wanted: String, live_fix: Option<String>| {
        if running != wanted {
            found.push(Difference {
                setting,
                running,
                asked: wanted,
                live_fix,
            });
        }
    };
    let (serve, given) = (asked.serve, asked.given);
    let workspace = asked
        .workspace
        .canonicalize()
        .unwrap_or_else(|_| asked.workspace.to_owned());
    let place = if asked.workspace_given {
        "asked for"
    } else {
        "the current directory"
    };
    compare(
        "workspace",
        greeting.workspace.clone(),
        workspace.display().to_string(),
        None,
    );
    if let (true, Some(kind)) = (given.has("provider"), serve.provider) {
        compare(
            "--provider",
            greeting.provider.clone(),
            value_name(kind),
            None,
        );
    }
    if let (true, Some(model)) = (given.has("model"), &serve.model) {
        let running = if status.model.is_empty() {
            &greeting.model
        } else {
            &status.model
        };
        compare(
            "--model",
            running.clone(),
            model.clone(),
            Some(format!("`/model {model}` in the TUI switches it")),
        );
    }
    if given.has("approval") {
        let mode = serve.approval.as_str();
        compare(
            "--approval",
            status.approval.as_str().to_owned(),
            mode.to_owned(),
            Some(format!("`/approval {mode}` in the TUI changes it")),
        );
    }
    if given.has("sandbox") {
        compare(
            "--sandbox",
            greeting.sandbox.mode.as_str().to_owned(),
            serve.sandbox.as_str().to_owned(),
            None,
        );
    }
    if given.has("sandbox_network") {
        let switch = |on| if on { "on" } else { "off" }.to_owned();
        compare(
            "--sandbox-network",
            switch(greeting.sandbox.network),
            switch(serve.sandbox_network == Switch::On),
            None,
        );
    }
    if given.has("context_window") && status.context_window != 0 {
        compare(
            "--context-window",
            status.context_window.to_string(),
            serve.context_window.to_string(),
            None,
        );
    }
    if let Some(workspace) = found.iter_mut().find(|d| d.setting == "workspace") {
        workspace.asked = format!("{} ({place})", workspace.asked);
    }
    found
}

/// The flags given that a running pod does not report, so that nobody can
/// tell whether they match it (`--base-url`, `--max-steps`, …).
pub fn unchecked(given: &Given) -> Vec<String> {
    const CHECKED: [&str; 6] = [
        "provider",
        "model",
        "approval",
        "sandbox",
        "sandbox_network",
        "context_window",
    ];
    given
        .ids
        .iter()
        .filter(|id| !CHECKED.contains(&id.as_str()))
        .map(|id| format!("--{}", id.replace('_', "-")))
        .collect()
}

/// What to tell the user before attaching to pod `name`, or `None` when it
/// is what they asked for. Flags that cannot be checked are mentioned only
/// together with a difference: alone they would make every re-run of the
/// command that started the pod stop to ask.
pub fn mismatch(name: &str, asked: &Asked, greeting: &Greeting, status: &Status) -> Option<String> {
    let found = differences(asked, greeting, status);
    if found.is_empty() {
        return None;
    }
    let mut text = format!("pod: the pod {name:?} is already running, not as asked:\n");
    for d in &found {
        let _ = write!(
            text,
            "  {}: it has {}, not {}",
            d.setting, d.running, d.asked
        );
        match &d.live_fix {
            Some(fix) => {
                let _ = writeln!(text, " ({fix})");
            }
            None => text.push('\n'),
        }
    }
    let unchecked = unchecked(asked.given);
    if !unchecked.is_empty() {
        let _ = writeln!(
            text,
            "  {}: not checked (the pod does not report them); they apply only to a pod this command starts",
            unchecked.join(", ")
        );
    }
    let _ = writeln!(
        text,
        "To restart it as asked: `pod{} stop`, then run this command again.\n\
         To keep it and start another pod: add `--name NEW_NAME`.",
        name_flag(name)
    );
    Some(text)
}

fn name_flag(name: &str) -> String {
    if name == "default" {
        String::new()
    } else {
        format!(" --name {name}")
    }
}

fn value_name(value: impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}
