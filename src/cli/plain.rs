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
use super::connect::{exit, nobody_listens, snapshot};
use super::{serve, Paths};
use crate::protocol::{Greeting, Snapshot, Status};
use crate::tools::Switch;

pub fn run(cli: &Cli, paths: &Paths) -> anyhow::Result<ExitCode> {
    let name = &paths.name;
    if paths.is_remote() {
        // A pod over the network is attached to as it is: this machine
        // cannot start it, nor compare its settings with the flags.
        return serve::attach(paths, cli.tui.notify.unwrap_or_default(), false);
    }
    // Bad usage whether or not a pod runs: said before comparing with one.
    if let Some(code) = serve::missing_script(&cli.serve) {
        return Ok(code);
    }
    if nobody_listens(&paths.socket) {
        serve::start_background(paths, cli.global.config.as_deref(), &cli.given.argv)?;
    } else if let Some(snapshot) = super::runtime()?.block_on(running(&paths.socket)) {
        let asked = Asked {
            serve: &cli.serve,
            given: &cli.given,
            workspace: &paths.workspace,
            workspace_given: cli.global.workspace.is_some(),
            implied_provider: implied_provider(&cli.serve),
        };
        let given = paths.name_given.then_some(name.as_str());
        if let Some(message) = mismatch(name, given, &asked, &snapshot.greeting, &snapshot.status) {
            eprint!("{message}");
            match answer()? {
                Answer::Attach => {}
                Answer::Leave => return Ok(ExitCode::from(exit::FAILED)),
                Answer::Restart => {
                    super::runtime()?.block_on(stop(paths))?;
                    serve::start_background(paths, cli.global.config.as_deref(), &cli.given.argv)?;
                }
            }
        }
    }
    serve::attach(paths, cli.tui.notify.unwrap_or_default(), false)
}

/// The running pod's snapshot; `None` when it cannot be read (the TUI
/// will say why, and keeps trying).
async fn running(socket: &Path) -> Option<Snapshot> {
    let endpoint = crate::client::Endpoint::Socket(socket.to_owned());
    let (mut events, _sink) = crate::client::connect(&endpoint).await.ok()?;
    snapshot(&mut events, &endpoint).await.ok()
}

/// What the user wants done with a pod that is not as asked.
enum Answer {
    Attach,
    Leave,
    /// Stop it and start it again as asked.
    Restart,
}

/// Asks on the terminal; without one there is nobody to ask, and the TUI
/// cannot run anyway, so the answer is to attach.
fn answer() -> anyhow::Result<Answer> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Ok(Answer::Attach);
    }
    eprint!("Attach to it as it is? [Y/n, r: restart it as asked] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    if stdin.lock().read_line(&mut answer)? == 0 {
        eprintln!();
        return Ok(Answer::Leave);
    }
    Ok(match answer.trim().to_ascii_lowercase().as_str() {
        "n" | "no" => Answer::Leave,
        "r" | "restart" => Answer::Restart,
        _ => Answer::Attach,
    })
}

/// Stops the pod and waits until it has let go of its name (its lock), so
/// that the one started next is not refused.
async fn stop(paths: &Paths) -> anyhow::Result<()> {
    let socket = &paths.socket;
    let endpoint = crate::client::Endpoint::Socket(socket.to_owned());
    let (mut events, mut sink) = crate::client::connect(&endpoint).await?;
    sink.send(&crate::protocol::Request::new(
        crate::protocol::Method::Shutdown,
    ))
    .await?;
    while let Some(event) = events.next().await {
        if let Ok(crate::protocol::Event::Shutdown { .. }) = event {
            break;
        }
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let pods = paths.data_dir.join("pods");
    let free = || crate::store::PodLock::acquire(&paths.data_dir, &pods, &paths.name).is_ok();
    while !nobody_listens(socket) || !free() {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the pod at {} did not stop within 10 s",
            socket.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    eprintln!("pod: stopped it; starting it as asked");
    Ok(())
}

/// Without `--provider`, the provider the other flags or the environment
/// ask for now, and what asks for it — in the order a starting pod picks
/// one (`ProviderConfig::resolve_kind`): `--script` means `script`, an API
/// key its vendor, `--base-url` an OpenAI-compatible server. A script or a
/// key given after the pod started must not be ignored without a word.
/// `None` when nothing but the defaults decide.
pub fn implied_provider(serve: &ServeArgs) -> Option<(String, &'static str)> {
    let key = |name| std::env::var(name).ok().filter(|k| !k.trim().is_empty());
    if serve.provider.is_some() {
        None
    } else if serve.script.is_some() {
        Some(("script".into(), "--script is given"))
    } else if key("ANTHROPIC_API_KEY").is_some() {
        Some(("anthropic".into(), "ANTHROPIC_API_KEY is set"))
    } else if key("OPENAI_API_KEY").is_some() {
        Some(("openai".into(), "OPENAI_API_KEY is set"))
    } else if serve.base_url.is_some() {
        Some(("openai".into(), "--base-url is given"))
    } else {
        None
    }
}

/// What plain `pod` was asked for.
pub struct Asked<'a> {
    /// Without `--provider`: the provider the other flags or an API key
    /// ask for, and why ([`implied_provider`]).
    pub implied_provider: Option<(String, &'static str)>,
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
    if let (false, Some((kind, why))) = (given.has("provider"), &asked.implied_provider) {
        let wanted = if *kind == greeting.provider {
            kind.clone()
        } else {
            format!("{kind} ({why})")
        };
        compare("the provider", greeting.provider.clone(), wanted, None);
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
    let session = greeting.session_id.to_string();
    if let (true, Some(wanted)) = (given.has("session"), &serve.session) {
        if !session.starts_with(wanted.as_str()) {
            compare(
                "--session",
                short(&session),
                wanted.clone(),
                Some("`/sessions` in the TUI resumes another one".to_owned()),
            );
        }
    }
    if given.has("new_session") {
        compare(
            "--new-session",
            format!("session {}", short(&session)),
            "a new one".to_owned(),
            Some("`/new` in the TUI starts one".to_owned()),
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
    const CHECKED: [&str; 8] = [
        "provider",
        "model",
        "session",
        "new_session",
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

/// What to tell the user before attaching to pod `name` (`given` when
/// `--name` named it, else it was derived from the workspace), or `None`
/// when it is what they asked for. Flags that cannot be checked are mentioned only
/// together with a difference: alone they would make every re-run of the
/// command that started the pod stop to ask.
pub fn mismatch(
    name: &str,
    given: Option<&str>,
    asked: &Asked,
    greeting: &Greeting,
    status: &Status,
) -> Option<String> {
    let found = differences(asked, greeting, status);
    if found.is_empty() {
        return None;
    }
    let mut text = format!("pod: the pod {name:?} is already running, not as asked:\n");
    for d in &found {
        let _ = write!(text, "  {} is {}, not {}", d.setting, d.running, d.asked);
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
        "To restart it as asked: answer r, or `pod{} stop` and run this command again.\n\
         To keep it and start another pod: add `--name NEW_NAME`.",
        name_flag(given)
    );
    Some(text)
}

/// A session id as the TUI and `pod sessions` show it.
fn short(session: &str) -> String {
    session.chars().take(8).collect()
}

/// `--name` as the user must repeat it: a derived name comes back by
/// itself in the same workspace.
fn name_flag(given: Option<&str>) -> String {
    given
        .map(|name| format!(" --name {name}"))
        .unwrap_or_default()
}

fn value_name(value: impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ApprovalMode;

    fn cli(args: &[&str]) -> Cli {
        let args = ["pod"].iter().chain(args).map(std::ffi::OsString::from);
        super::super::args::parse(args, &toml::Table::new()).unwrap()
    }

    fn greeting(workspace: &Path) -> Greeting {
        serde_json::from_value(serde_json::json!({
            "pod": "default", "version": "0", "pid": 1,
            "session_id": "00000000-0000-0000-0000-000000000000",
            "provider": "script", "model": "script-model",
            "workspace": workspace.display().to_string(),
            "approval": "auto",
            "sandbox": {"mode": "workspace-write", "available": true, "network": true},
        }))
        .unwrap()
    }

    fn status() -> Status {
        Status {
            approval: ApprovalMode::Auto,
            model: "script-model".into(),
            context_window: 128_000,
            ..Status::default()
        }
    }

    fn asked<'a>(cli: &'a Cli, workspace: &'a Path) -> Asked<'a> {
        Asked {
            serve: &cli.serve,
            given: &cli.given,
            workspace,
            workspace_given: false,
            implied_provider: None,
        }
    }

    #[test]
    fn only_the_flags_typed_are_compared() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().canonicalize().unwrap();
        let plain = cli(&[]);
        assert_eq!(
            differences(&asked(&plain, &here), &greeting(&here), &status()),
            []
        );
        let same = cli(&[
            "--provider",
            "script",
            "--script",
            "s.jsonl",
            "--approval",
            "auto",
            "--model",
            "script-model",
        ]);
        assert_eq!(
            differences(&asked(&same, &here), &greeting(&here), &status()),
            []
        );
        assert_eq!(
            mismatch(
                "default",
                None,
                &asked(&same, &here),
                &greeting(&here),
                &status()
            ),
            None
        );
    }

    #[test]
    fn each_difference_is_named_with_both_values() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().canonicalize().unwrap();
        let other = cli(&[
            "--provider",
            "offline",
            "--model",
            "other",
            "--approval",
            "ask",
            "--sandbox",
            "off",
            "--sandbox-network",
            "off",
            "--context-window",
            "1000",
            "--max-steps",
            "3",
        ]);
        let found = differences(&asked(&other, &here), &greeting(&here), &status());
        let named: Vec<_> = found
            .iter()
            .map(|d| (d.setting, d.running.as_str(), d.asked.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("--provider", "script", "offline"),
                ("--model", "script-model", "other"),
                ("--approval", "auto", "ask"),
                ("--sandbox", "workspace-write", "off"),
                ("--sandbox-network", "on", "off"),
                ("--context-window", "128000", "1000"),
            ]
        );
        let text = mismatch(
            "work",
            Some("work"),
            &asked(&other, &here),
            &greeting(&here),
            &status(),
        )
        .unwrap();
        assert!(
            text.contains(
                "--model is script-model, not other (`/model other` in the TUI switches it)"
            ),
            "{text}"
        );
        assert!(text.contains("--max-steps: not checked"), "{text}");
        assert!(text.contains("`pod --name work stop`"), "{text}");
        assert!(text.contains("--name NEW_NAME"), "{text}");
    }

    #[test]
    fn another_session_or_a_new_one_is_a_difference() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().canonicalize().unwrap();
        let running = greeting(&here);
        let same = cli(&["--session", "0000"]);
        assert_eq!(differences(&asked(&same, &here), &running, &status()), []);
        let named = |args: &[&str]| {
            let cli = cli(args);
            let found = differences(&asked(&cli, &here), &running, &status());
            found
                .iter()
                .map(|d| format!("{} is {}, not {}", d.setting, d.running, d.asked))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            named(&["--session", "abcd"]),
            ["--session is 00000000, not abcd"]
        );
        assert_eq!(
            named(&["--new-session"]),
            ["--new-session is session 00000000, not a new one"]
        );
    }

    #[test]
    fn an_api_key_set_since_the_pod_started_is_a_difference() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().canonicalize().unwrap();
        let plain = cli(&[]);
        let mut asking = asked(&plain, &here);
        asking.implied_provider = Some(("anthropic".into(), "ANTHROPIC_API_KEY is set"));
        let text = mismatch("calc", None, &asking, &greeting(&here), &status()).unwrap();
        assert!(
            text.contains("the provider is script, not anthropic (ANTHROPIC_API_KEY is set)"),
            "{text}"
        );
        asking.implied_provider = Some(("script".into(), "why"));
        assert_eq!(
            mismatch("calc", None, &asking, &greeting(&here), &status()),
            None
        );
    }

    #[test]
    fn the_model_and_approval_are_the_current_ones() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().canonicalize().unwrap();
        let switched = Status {
            model: "other".into(),
            approval: ApprovalMode::Ask,
            ..status()
        };
        let asked_for = cli(&["--model", "other", "--approval", "ask"]);
        assert_eq!(
            differences(&asked(&asked_for, &here), &greeting(&here), &switched),
            []
        );
    }

    #[test]
    fn another_workspace_is_a_difference_even_without_flags() {
        let dir = tempfile::tempdir().unwrap();
        let here = dir.path().join("here");
        std::fs::create_dir(&here).unwrap();
        let there = dir.path().canonicalize().unwrap();
        let plain = cli(&[]);
        let text = mismatch(
            "default",
            None,
            &asked(&plain, &here),
            &greeting(&there),
            &status(),
        )
        .unwrap();
        let here = here.canonicalize().unwrap();
        assert!(
            text.contains(&format!(
                "workspace is {}, not {} (the current directory)",
                there.display(),
                here.display()
            )),
            "{text}"
        );
        assert!(text.contains("`pod stop`"), "{text}");
        assert!(!text.contains("not checked"), "{text}");
    }
}
