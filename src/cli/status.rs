//! `pod status`, `pod stop`, `pod pause`, `pod resume` and `pod list`:
//! small clients of the protocol.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::protocol::answer::Ack;
use crate::protocol::{Method, PodState, Request, Snapshot};
use crate::store::pod_socket;

use super::connect::{connect, snapshot};
use super::Paths;
use crate::client::{self, Endpoint, Refusal};

/// Connects to the socket and returns the snapshot quietly, or `None`
/// when no pod answers there (for `pod list`).
async fn probe(socket: &Path) -> Option<Snapshot> {
    let endpoint = Endpoint::Socket(socket.to_owned());
    let (mut events, _sink) = crate::client::connect(&endpoint).await.ok()?;
    snapshot(&mut events, &endpoint).await.ok()
}

pub fn status(paths: &Paths, json: bool) -> anyhow::Result<ExitCode> {
    let s = super::runtime()?.block_on(async {
        let (mut events, _sink) = match connect(&paths.endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return anyhow::Ok(Err(code)),
        };
        snapshot(&mut events, &paths.endpoint).await.map(Ok)
    })?;
    let s = match s {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    if json {
        let value = serde_json::json!({
            "greeting": s.greeting,
            "status": s.status,
            "session_id": s.session_id,
            "entries": s.entries.len(),
        });
        println!("{value}");
        return Ok(ExitCode::SUCCESS);
    }
    // The pod's name, its workspace and MCP servers' errors come from
    // elsewhere: nothing in them reaches the terminal as a control.
    print!("{}", crate::safe_text::lines(&report(&s, paths)));
    Ok(ExitCode::SUCCESS)
}

/// `pod status`'s text: what the pod is, what it does and how it is set up
/// now (the model and approval mode as last changed, not as started).
fn report(s: &Snapshot, paths: &Paths) -> String {
    let (g, status) = (&s.greeting, &s.status);
    let pod = paths.command("");
    let usage = s
        .entries
        .iter()
        .rev()
        .find_map(|line| match &line.entry {
            crate::protocol::LogEntry::TurnEnd {
                usage: Some(usage), ..
            } => Some(crate::protocol::tokens::usage_line(usage)),
            _ => None,
        })
        .unwrap_or_else(|| "no usage reported yet".to_owned());
    let model = if status.model.is_empty() {
        &g.model
    } else {
        &status.model
    };
    let mut context = match status.context_window {
        0 => format!("{} tokens", status.context_tokens),
        window => format!(
            "{} of {window} tokens ({}%)",
            status.context_tokens,
            status.context_tokens.saturating_mul(100) / window
        ),
    };
    if status.context_source == crate::protocol::ContextSource::Estimate {
        context.push_str(" (estimated: the server reports no usage)");
    }
    let pending = match status.pending_approvals.len() {
        0 => "no tool call waits for approval".to_owned(),
        1 => format!("1 tool call waits for approval (`{pod} pending` shows it)"),
        n => format!("{n} tool calls wait for approval (`{pod} pending` lists them)"),
    };
    let sandbox = format!(
        "{}, {}, network {}",
        g.sandbox.mode.as_str(),
        if g.sandbox.available {
            "enforced"
        } else {
            "NOT enforced on this system"
        },
        if g.sandbox.network { "on" } else { "off" }
    );
    let mut lines = vec![
        format!(
            "pod        {} (pid {}, version {})",
            g.pod, g.pid, g.version
        ),
        format!(
            "state      {} ({} queued){}",
            status.state.as_str(),
            status.queued,
            waiting_for(status)
        ),
        format!("pending    {pending}"),
        format!("session    {} ({} entries)", s.session_id, s.entries.len()),
        format!("model      {} / {model}", g.provider),
        format!("context    {context}"),
        format!("last turn  {usage}"),
    ];
    lines.extend(agents(status));
    lines.extend([
        format!("approval   {}", status.approval.as_str()),
        format!("sandbox    {sandbox}"),
        format!("workspace  {}", g.workspace),
        match &paths.endpoint {
            Endpoint::Socket(socket) => format!("socket     {}", socket.display()),
            Endpoint::Remote(remote) => format!("url        {}", remote.url),
        },
    ]);
    if g.mcp_servers.is_empty() {
        lines.push("mcp        no servers".to_owned());
    } else {
        lines.push("mcp servers".to_owned());
        lines.extend(
            crate::mcp::format_servers(&g.mcp_servers)
                .lines()
                .map(|line| format!("  {line}")),
        );
    }
    lines.iter().map(|line| format!("{line}\n")).collect()
}

/// Which children a waiting pod waits on, for the state line: a parent
/// waits while any child waits for approval (its pending approvals include
/// theirs), and "waiting" alone would send the user looking at the parent.
fn waiting_for(status: &crate::protocol::Status) -> String {
    if status.state != PodState::Waiting {
        return String::new();
    }
    let children: Vec<&str> = status
        .agents
        .iter()
        .filter(|a| !a.pending_approvals.is_empty())
        .map(|a| a.name.as_str())
        .collect();
    match children.as_slice() {
        [] => String::new(),
        [one] => format!(": child {one} waits for approval"),
        many => format!(": children {} wait for approval", many.join(", ")),
    }
}

/// The children's lines of `pod status`: how many, what the whole tree
/// used (`tree_usage`: this pod's session plus every child's), then one
/// line a child — name, state, usage and the calls it waits on. None for a
/// pod without children, whose tree usage is its own.
fn agents(status: &crate::protocol::Status) -> Vec<String> {
    if status.agents.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "agents     {} · tree {}",
        status.agents.len(),
        crate::protocol::tokens::usage_line(&status.tree_usage)
    )];
    let name_width = status
        .agents
        .iter()
        .map(|a| a.name.len())
        .max()
        .unwrap_or(0);
    let state_width = status
        .agents
        .iter()
        .map(|a| a.state.as_str().len())
        .max()
        .unwrap_or(0);
    for a in &status.agents {
        let waits = match a.pending_approvals.as_slice() {
            [] => String::new(),
            ids => format!(
                " · {} waiting for approval ({})",
                if ids.len() == 1 {
                    "1 call".to_owned()
                } else {
                    format!("{} calls", ids.len())
                },
                ids.join(", ")
            ),
        };
        lines.push(format!(
            "  {:<name_width$}  {:<state_width$}  {}{waits}",
            a.name,
            a.state.as_str(),
            crate::protocol::tokens::usage_line(&a.usage)
        ));
    }
    lines
}

pub fn stop(paths: &Paths) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(async {
        let (mut events, mut sink) = match connect(&paths.endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
        if let Ok(s) = snapshot(&mut events, &paths.endpoint).await {
            let may_stop = s.greeting.access == crate::protocol::AccessLevel::Full;
            if may_stop {
                if let Some(warning) = stop_warning(&s.status, &paths.command("")) {
                    eprintln!("{warning}");
                }
            }
        }
        // The pod answers, says `shutdown` to everyone, then closes: wait
        // for either of the last two — or for its refusal (a read-only
        // token, a tool's connection).
        match client::call::<Ack>(&mut events, &mut sink, Method::Shutdown).await {
            Err(Refusal::Refused { message, .. }) => {
                eprintln!(
                    "pod: the pod refused to stop: {}",
                    crate::safe_text::line(&message)
                );
                return Ok(ExitCode::from(super::connect::exit::FAILED));
            }
            Ok(_) => events.until_shutdown().await,
            // Stopping already, or gone.
            Err(_) => {}
        }
        println!("stopped the pod at {}", paths.endpoint);
        Ok(ExitCode::SUCCESS)
    })
}

/// What stopping does to the turn in progress, said before the pod stops:
/// the user may have meant to stop a pod they believed idle. A stop cancels
/// a running turn, but one waiting for approval keeps its requests pending
/// and resumes, still waiting, at the next start (the contract) — so that
/// case names `pod deny`, the way to drop the turn for good.
fn stop_warning(status: &crate::protocol::Status, pod: &str) -> Option<String> {
    match status.state {
        PodState::Idle => None,
        PodState::Waiting => Some(match status.pending_approvals.len() {
            1 => format!(
                "pod: a turn is waiting for approval; it will resume, still waiting, when the pod \
                 starts again (run `{pod} deny` before stopping to drop that call)"
            ),
            n => format!(
                "pod: a turn is waiting for approval of {n} tool calls; it will resume, still \
                 waiting, when the pod starts again (run `{pod} deny CALL_ID` for each before \
                 stopping to drop them; `{pod} pending` lists them)"
            ),
        }),
        state => Some(format!(
            "pod: a turn was {}; stopping cancels it (what it wrote so far stays in the log)",
            state.as_str()
        )),
    }
}

/// `pod pause` / `pod resume`: `pause` holds the turn before its next model
/// call or tool run (the next turn, when idle); `resume` lets it go on.
pub fn pause(paths: &Paths, pause: bool) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(async {
        let (mut events, mut sink) = match connect(&paths.endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
        let busy = snapshot(&mut events, &paths.endpoint).await?.status.state != PodState::Idle;
        let client = if pause { "pod pause" } else { "pod resume" };
        sink.send(&Request::new(Method::Hello {
            client: client.into(),
        }))
        .await?;
        let method = if pause { Method::Pause } else { Method::Resume };
        if let Err(refusal) = super::connect::ask::<Ack>(&mut events, &mut sink, method).await? {
            eprintln!("pod: {refusal}");
            return Ok(ExitCode::from(super::connect::exit::FAILED));
        }
        let resume = paths.command("resume");
        match (pause, busy) {
            (true, true) => {
                println!("paused: the turn holds before its next step; `{resume}` goes on")
            }
            (true, false) => {
                println!("paused: the next turn holds before it starts; `{resume}` goes on")
            }
            (false, _) => println!("resumed"),
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// Every pod that answers: those whose socket is in the default socket
/// directory, those started with `--socket` that recorded their socket in
/// the data directory, and the children each of them lists (beside its
/// socket, as a parent puts them); children indented under their parent.
pub fn list(paths: &Paths) -> anyhow::Result<ExitCode> {
    let mut sockets: Vec<PathBuf> = std::fs::read_dir(&paths.socket_dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    sockets.extend(
        pod_socket::recorded(&paths.data_dir.join("pods"))
            .into_iter()
            .map(|(_, socket)| socket),
    );
    sockets.sort();
    sockets.dedup();
    let rt = super::runtime()?;
    let mut live: Vec<(PathBuf, Snapshot)> = sockets
        .into_iter()
        .filter_map(|socket| {
            let snapshot = rt.block_on(probe(&socket))?;
            Some((socket, snapshot))
        })
        .collect();
    // A child of a pod started with `--socket` listens beside its parent,
    // where neither directory above may look.
    let mut next = 0;
    while next < live.len() {
        let beside: Vec<PathBuf> = live[next]
            .1
            .status
            .agents
            .iter()
            .filter(|a| !live.iter().any(|(_, s)| s.greeting.pod == a.name))
            .map(|a| live[next].0.with_file_name(format!("{}.sock", a.name)))
            .collect();
        for socket in beside {
            if let Some(snapshot) = rt.block_on(probe(&socket)) {
                live.push((socket, snapshot));
            }
        }
        next += 1;
    }
    if live.is_empty() {
        println!("no pod is running; start one with `pod serve` (or just `pod`)");
        return Ok(ExitCode::SUCCESS);
    }
    let pods: Vec<(String, Vec<String>)> = live
        .iter()
        .map(|(_, s)| {
            let children = s.status.agents.iter().map(|a| a.name.clone()).collect();
            (s.greeting.pod.clone(), children)
        })
        .collect();
    let rows = tree(&pods);
    let names: Vec<String> = rows
        .iter()
        .map(|&(depth, i)| format!("{}{}", "  ".repeat(depth), live[i].1.greeting.pod))
        .collect();
    let width = names.iter().map(String::len).max().unwrap_or(0).max(16);
    println!(
        "{:<width$} {:<10} {:<24} {:<24} SOCKET",
        "NAME", "STATE", "MODEL", "WORKSPACE"
    );
    for (name, &(_, i)) in names.iter().zip(&rows) {
        let (socket, s) = &live[i];
        let g = &s.greeting;
        let line = format!(
            "{name:<width$} {:<10} {:<24} {:<24} {}",
            s.status.state.as_str(),
            format!("{}/{}", g.provider, g.model),
            g.workspace,
            socket.display()
        );
        println!("{}", crate::safe_text::line(&line));
    }
    Ok(ExitCode::SUCCESS)
}

/// The order `pod list` prints pods in, as `(depth, index into pods)`: each
/// pod no other lists as its child, in the order given, followed by its
/// children (in the order their parent lists them), theirs below them. A
/// pod is printed once, however many list it.
fn tree(pods: &[(String, Vec<String>)]) -> Vec<(usize, usize)> {
    fn visit(
        pods: &[(String, Vec<String>)],
        at: usize,
        depth: usize,
        rows: &mut Vec<(usize, usize)>,
    ) {
        if rows.iter().any(|&(_, i)| i == at) {
            return;
        }
        rows.push((depth, at));
        for child in &pods[at].1 {
            if let Some(c) = pods.iter().position(|(name, _)| name == child) {
                visit(pods, c, depth + 1, rows);
            }
        }
    }
    let is_child = |name: &str| {
        pods.iter()
            .any(|(_, children)| children.iter().any(|c| c == name))
    };
    let mut rows = Vec::new();
    for (at, (name, _)) in pods.iter().enumerate() {
        if !is_child(name) {
            visit(pods, at, 0, &mut rows);
        }
    }
    // Children whose parent is not among them (a cycle no pod makes).
    for at in 0..pods.len() {
        visit(pods, at, 0, &mut rows);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_follow_their_parent_one_level_deeper() {
        let pod = |name: &str, children: &[&str]| {
            (
                name.to_owned(),
                children.iter().map(|c| (*c).to_owned()).collect(),
            )
        };
        let pods = vec![
            pod("b", &[]),
            pod("calc.tests", &["calc.tests.x"]),
            pod("calc", &["calc.tests", "calc.docs", "calc.gone"]),
            pod("calc.docs", &[]),
            pod("calc.tests.x", &[]),
        ];
        assert_eq!(tree(&pods), [(0, 0), (0, 2), (1, 1), (2, 4), (1, 3)]);
        let cycle = vec![pod("a", &["b"]), pod("b", &["a"])];
        assert_eq!(tree(&cycle), [(0, 0), (1, 1)]);
    }
}
