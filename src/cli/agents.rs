//! `pod agents` and `pod agents rm NAME`: the pod's child pods (`list_agents`,
//! `remove_agent`; protocol.md "Child pods").

use std::process::ExitCode;

use crate::protocol::answer::{AgentRemoved, Agents};
use crate::protocol::{AgentInfo, Method, Request};
use crate::safe_text;

use super::args::AgentsAction;
use super::connect::{ask, connect, exit, snapshot};
use super::Paths;

pub fn run(paths: &Paths, json: bool, action: Option<AgentsAction>) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(async {
        let (mut events, mut sink) = match connect(&paths.endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
        let pod = snapshot(&mut events, &paths.endpoint).await?.greeting.pod;
        let listed = match ask::<Agents>(&mut events, &mut sink, Method::ListAgents).await? {
            Ok(answer) => answer.agents,
            Err(why) => return refused(&why),
        };
        let Some(AgentsAction::Rm { agent }) = action else {
            if json {
                println!("{}", serde_json::to_string(&listed)?);
            } else {
                print!("{}", table(&listed));
            }
            return Ok(ExitCode::SUCCESS);
        };
        let name = full_name(&pod, &agent, &listed);
        sink.send(&Request::new(Method::Hello {
            client: "pod agents".into(),
        }))
        .await?;
        match ask::<AgentRemoved>(
            &mut events,
            &mut sink,
            Method::RemoveAgent { name: name.clone() },
        )
        .await?
        {
            Ok(response) => {
                println!(
                    "removed {}; its log stays (`{}`)",
                    safe_text::line(&name),
                    safe_text::line(&paths.command_for(Some(&name), "log"))
                );
                match response.worktree {
                    Some(w) if w.removed == Some(true) => println!(
                        "its worktree {} was removed; its branch {} stays",
                        safe_text::line(&w.path),
                        safe_text::line(&w.branch)
                    ),
                    Some(w) => println!(
                        "{}",
                        safe_text::line(w.note.as_deref().unwrap_or("its worktree was kept"))
                    ),
                    None => {}
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(why) => refused(&why),
        }
    })
}

fn refused(why: &crate::client::Refusal) -> anyhow::Result<ExitCode> {
    eprintln!("pod: {}", safe_text::line(&why.to_string()));
    Ok(ExitCode::from(exit::FAILED))
}

/// The child `given` names: a full name as listed, else a slug of this pod
/// (`tests` for `calc-3f2a9c.tests`). A name that is neither is sent as
/// typed, for the pod to say it has no such child.
fn full_name(pod: &str, given: &str, listed: &[AgentInfo]) -> String {
    let as_slug = format!("{pod}.{given}");
    match listed.iter().find(|a| a.status.name == given) {
        Some(_) => given.to_owned(),
        None if listed.iter().any(|a| a.status.name == as_slug) => as_slug,
        None => given.to_owned(),
    }
}

/// One line per child: name, state, pending approvals, the task's first
/// line. The task is the model's text, so it is shown with visible escapes.
fn table(agents: &[AgentInfo]) -> String {
    if agents.is_empty() {
        return "no child pods (a turn starts them with the spawn_agent tool)\n".into();
    }
    let width = agents
        .iter()
        .map(|a| a.status.name.len())
        .max()
        .unwrap_or(0)
        .max("NAME".len());
    let mut out = format!(
        "{:<width$}  {:<10}  {:>7}  TASK\n",
        "NAME", "STATE", "PENDING"
    );
    for agent in agents {
        let task = agent.task.lines().next().unwrap_or_default();
        let mut task = safe_text::line(task).into_owned();
        if task.chars().count() > 72 {
            task = task.chars().take(71).chain(['…']).collect();
        }
        out.push_str(&format!(
            "{:<width$}  {:<10}  {:>7}  {task}\n",
            safe_text::line(&agent.status.name),
            agent.status.state.as_str(),
            agent.status.pending_approvals.len(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{AgentStatus, PodState, Usage};

    fn agent(name: &str, state: PodState, pending: &[&str], task: &str) -> AgentInfo {
        AgentInfo {
            status: AgentStatus {
                name: name.into(),
                state,
                pending_approvals: pending.iter().map(|p| (*p).into()).collect(),
                session_id: uuid::Uuid::nil(),
                usage: Usage::default(),
            },
            task: task.into(),
            created_at: "2026-12-07T17:00:00Z".into(),
            worktree: None,
        }
    }

    #[test]
    fn each_child_on_a_line_with_its_state_pending_count_and_task() {
        let text = table(&[
            agent(
                "calc-3f2a9c.tests",
                PodState::Waiting,
                &["c1", "c2"],
                "run the tests\nand more",
            ),
            agent(
                "calc-3f2a9c.docs",
                PodState::Idle,
                &[],
                &format!("x\u{1b}[2K{}", "y".repeat(80)),
            ),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "NAME               STATE       PENDING  TASK");
        assert_eq!(
            lines[1],
            "calc-3f2a9c.tests  waiting           2  run the tests"
        );
        assert!(lines[2].starts_with("calc-3f2a9c.docs   idle              0  x\\e[2Kyyy"));
        assert!(lines[2].ends_with('…'), "{}", lines[2]);
        assert_eq!(
            table(&[]),
            "no child pods (a turn starts them with the spawn_agent tool)\n"
        );
    }

    #[test]
    fn a_slug_names_the_pods_own_child() {
        let listed = [agent("calc.tests", PodState::Idle, &[], "t")];
        assert_eq!(full_name("calc", "tests", &listed), "calc.tests");
        assert_eq!(full_name("calc", "calc.tests", &listed), "calc.tests");
        assert_eq!(full_name("calc", "nope", &listed), "nope");
    }
}
