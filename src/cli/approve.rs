//! `pod approve`, `pod deny` and `pod pending`: answer the approvals a
//! turn waits for from any shell (`cli.md`).
//!
//! The snapshot says what is pending (`status.pending_approvals`) and the
//! `approval_request` entries say what each call would do.

use std::process::ExitCode;

use crate::client::{Endpoint, EventStream, RequestSink};
use crate::protocol::answer::Ack;
use crate::protocol::{Decision, LogEntry, Method, Request, Scope, Snapshot};

use super::args::{ApproveArgs, DenyArgs};
use super::connect::{ask, connect, exit, snapshot};
use super::Paths;

/// One approval the pod waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pending {
    call_id: String,
    tool: String,
    summary: String,
    /// The rule `--session` would add, from the request entry (the pod
    /// computed it when it asked).
    session_rule: Option<String>,
    /// The child pod whose call it is (`None`: the pod asked itself). A
    /// parent lists its children's requests too, and answers them.
    pod: Option<String>,
}

impl Pending {
    /// The call as one line, every control character in it (the model
    /// chose them all) shown as a visible escape; a child's call names its pod.
    fn line(&self) -> String {
        use crate::safe_text::line;
        let pod = match &self.pod {
            Some(pod) => format!("  (pod {})", line(pod)),
            None => String::new(),
        };
        format!(
            "{}  {}: {}{pod}",
            line(&self.call_id),
            line(&self.tool),
            line(&self.summary)
        )
    }
}

/// The request entry of `call_id` in a snapshot, as a [`Pending`].
fn request_in(snapshot: &Snapshot, call_id: &str, pod: Option<&str>) -> Option<Pending> {
    snapshot
        .entries
        .iter()
        .rev()
        .find_map(|line| match &line.entry {
            LogEntry::ApprovalRequest {
                call_id: id,
                tool,
                summary,
                session_rule,
                ..
            } if id == call_id => Some(Pending {
                call_id: call_id.to_owned(),
                tool: tool.clone(),
                summary: summary.clone(),
                session_rule: session_rule.clone(),
                pod: pod.map(str::to_owned),
            }),
            _ => None,
        })
}

/// The pending approvals of a snapshot, in the order the pod lists them,
/// its children's among them (each child's too, should the pod not list
/// them). A child's request is in the child's log: it is read from the
/// child's own snapshot, a grandchild's from the grandchild's.
async fn pending_of(snapshot: &Snapshot, endpoint: &Endpoint) -> Vec<Pending> {
    let mut ids: Vec<&String> = snapshot.status.pending_approvals.iter().collect();
    for agent in &snapshot.status.agents {
        for id in &agent.pending_approvals {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    let mut children = Children::default();
    let mut pending = Vec::new();
    for id in ids {
        pending.push(children.find(snapshot, endpoint, id).await);
    }
    pending
}

/// The child pods' snapshots read so far, each once.
#[derive(Default)]
struct Children {
    read: Vec<(String, Endpoint, Option<Snapshot>)>,
}

impl Children {
    /// Walks down from the pod to the child whose log holds `call_id`'s
    /// request (at most a few generations: a pod's `--max-agent-depth`).
    async fn find(&mut self, top: &Snapshot, endpoint: &Endpoint, call_id: &str) -> Pending {
        let mut at: Option<usize> = None;
        for _ in 0..8 {
            let (snapshot, here, pod) = match at {
                None => (Some(top), endpoint, None),
                Some(i) => {
                    let (name, endpoint, snapshot) = &self.read[i];
                    (snapshot.as_ref(), endpoint, Some(name.as_str()))
                }
            };
            let Some(snapshot) = snapshot else { break };
            if let Some(found) = request_in(snapshot, call_id, pod) {
                return found;
            }
            let Some(child) = snapshot
                .status
                .agents
                .iter()
                .find(|a| a.pending_approvals.iter().any(|id| id == call_id))
            else {
                break;
            };
            let name = child.name.clone();
            let Some(child_endpoint) = here.child(&name) else {
                return unknown(call_id, Some(&name));
            };
            at = Some(match self.read.iter().position(|(n, ..)| *n == name) {
                Some(i) => i,
                None => {
                    let snapshot = read_snapshot(&child_endpoint).await;
                    self.read.push((name, child_endpoint, snapshot));
                    self.read.len() - 1
                }
            });
        }
        let pod = at.map(|i| self.read[i].0.as_str());
        unknown(call_id, pod)
    }
}

/// A pending call whose request could not be read.
fn unknown(call_id: &str, pod: Option<&str>) -> Pending {
    Pending {
        call_id: call_id.to_owned(),
        tool: "?".into(),
        summary: match pod {
            Some(pod) => format!("(its request is in pod {pod}'s log: `pod pending --name {pod}`)"),
            None => "(its request is not in this session)".into(),
        },
        session_rule: None,
        pod: pod.map(str::to_owned),
    }
}

/// A pod's snapshot, or `None` when it does not answer.
async fn read_snapshot(endpoint: &Endpoint) -> Option<Snapshot> {
    let (mut events, _sink) = crate::client::connect(endpoint).await.ok()?;
    snapshot(&mut events, endpoint).await.ok()
}

/// Which pending approval `wanted` (a call id or a unique prefix; `None`:
/// the only one) means, or why none can be chosen.
fn choose(pending: &[Pending], wanted: Option<&str>) -> Result<Pending, String> {
    let list = |items: &[&Pending]| {
        items
            .iter()
            .map(|p| format!("\n  {}", p.line()))
            .collect::<String>()
    };
    let all: Vec<&Pending> = pending.iter().collect();
    if all.is_empty() {
        return Err("nothing is pending".into());
    }
    // A full call id always names its call, even when it is also the
    // prefix of another (`c1` and `c10`).
    let exact = wanted.and_then(|id| all.iter().find(|p| p.call_id == id));
    let candidates: Vec<&Pending> = match (wanted, exact) {
        (_, Some(exact)) => vec![*exact],
        (None, None) => all.clone(),
        (Some(id), None) => all
            .iter()
            .copied()
            .filter(|p| p.call_id.starts_with(id))
            .collect(),
    };
    match (candidates.as_slice(), wanted) {
        ([one], _) => Ok((*one).clone()),
        ([], Some(id)) => Err(format!(
            "no pending approval has the call id {id:?}; pending:{}",
            list(&all)
        )),
        (_, None) => Err(format!(
            "{} approvals are pending; name one (a unique prefix of its call id will do):{}",
            candidates.len(),
            list(&candidates)
        )),
        (_, Some(id)) => Err(format!(
            "{id:?} matches {} pending approvals; give more of the call id:{}",
            candidates.len(),
            list(&candidates)
        )),
    }
}

pub fn pending(paths: &Paths) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(async {
        let (mut events, _sink) = match connect(&paths.endpoint).await? {
            Ok(connection) => connection,
            Err(code) => return Ok(code),
        };
        let pending = pending_of(
            &snapshot(&mut events, &paths.endpoint).await?,
            &paths.endpoint,
        )
        .await;
        if pending.is_empty() {
            println!("nothing pending");
        }
        for p in pending {
            println!("{}", p.line());
            if let Some(rule) = &p.session_rule {
                println!("    --session adds {}", crate::safe_text::line(rule));
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}

pub fn approve(paths: &Paths, args: ApproveArgs) -> anyhow::Result<ExitCode> {
    let answer = Answer {
        decision: Decision::Allow,
        scope: if args.always {
            Some(Scope::Always)
        } else {
            args.session.then_some(Scope::Session)
        },
        message: args.message,
    };
    super::runtime()?.block_on(decide(paths, args.call_id.as_deref(), answer))
}

pub fn deny(paths: &Paths, args: DenyArgs) -> anyhow::Result<ExitCode> {
    let answer = Answer {
        decision: Decision::Deny,
        scope: None,
        message: args.message,
    };
    super::runtime()?.block_on(decide(paths, args.call_id.as_deref(), answer))
}

struct Answer {
    decision: Decision,
    scope: Option<Scope>,
    message: Option<String>,
}

async fn decide(paths: &Paths, wanted: Option<&str>, answer: Answer) -> anyhow::Result<ExitCode> {
    let (mut events, mut sink) = match connect(&paths.endpoint).await? {
        Ok(connection) => connection,
        Err(code) => return Ok(code),
    };
    let pending = pending_of(
        &snapshot(&mut events, &paths.endpoint).await?,
        &paths.endpoint,
    )
    .await;
    let chosen = match choose(&pending, wanted) {
        Ok(chosen) => chosen,
        Err(why) => {
            eprintln!("pod: {}", crate::safe_text::lines(&why));
            return Ok(ExitCode::from(exit::FAILED));
        }
    };
    let verb = match answer.decision {
        Decision::Deny => "denied",
        _ => "approved",
    };
    let scope = match answer.scope {
        Some(Scope::Session) => " for the rest of the session",
        Some(Scope::Always) => " always (its rule is kept in the config file)",
        _ => "",
    };
    match send_decision(&mut events, &mut sink, &chosen.call_id, answer).await? {
        Ok(()) => {
            println!("{verb}{scope}: {}", chosen.line());
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!(
                "pod: the pod did not take the answer for {}: {}",
                crate::safe_text::line(&chosen.call_id),
                crate::safe_text::line(&why)
            );
            Ok(ExitCode::from(exit::FAILED))
        }
    }
}

/// Sends `approve` and waits for the pod's answer to it: `Ok(Ok(()))` when
/// the decision was committed, `Ok(Err(why))` when the pod refused it.
async fn send_decision(
    events: &mut EventStream,
    sink: &mut RequestSink,
    call_id: &str,
    answer: Answer,
) -> anyhow::Result<Result<(), String>> {
    // The label of the connection (`approval_decision.client`): the
    // command that answered.
    let client = match answer.decision {
        Decision::Deny => "pod deny",
        _ => "pod approve",
    };
    sink.send(&Request::new(Method::Hello {
        client: client.into(),
    }))
    .await?;
    let method = Method::Approve {
        call_id: call_id.to_owned(),
        decision: answer.decision,
        scope: answer.scope,
        message: answer.message,
    };
    Ok(ask::<Ack>(events, sink, method)
        .await?
        .map(|Ack| ())
        .map_err(|refusal| refusal.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(ids: &[&str]) -> Vec<Pending> {
        ids.iter()
            .map(|id| Pending {
                call_id: (*id).into(),
                tool: "bash".into(),
                summary: format!("run {id}"),
                session_rule: None,
                pod: None,
            })
            .collect()
    }

    #[test]
    fn the_only_one_or_a_unique_prefix_is_chosen() {
        let one = pending(&["call_abc"]);
        assert_eq!(choose(&one, None).unwrap().call_id, "call_abc");
        let two = pending(&["call_abc", "call_abd"]);
        assert_eq!(choose(&two, Some("call_abd")).unwrap().call_id, "call_abd");
        assert_eq!(choose(&two, Some("call_abc")).unwrap().call_id, "call_abc");
        let nested = pending(&["c10", "c1", "c11"]);
        assert_eq!(choose(&nested, Some("c1")).unwrap().call_id, "c1");
        assert_eq!(choose(&nested, Some("c10")).unwrap().call_id, "c10");
        assert!(choose(&nested, Some("c")).is_err());
    }

    #[test]
    fn nothing_ambiguous_or_unknown_is_refused_listing_the_candidates() {
        assert_eq!(choose(&[], None).unwrap_err(), "nothing is pending");
        let two = pending(&["call_abc", "call_abd", "call_x"]);
        let none_named = choose(&two, None).unwrap_err();
        assert!(
            none_named.starts_with("3 approvals are pending"),
            "{none_named}"
        );
        let ambiguous = choose(&two, Some("call_ab")).unwrap_err();
        assert!(ambiguous.contains("matches 2"), "{ambiguous}");
        assert!(
            ambiguous.contains("call_abc  bash: run call_abc"),
            "{ambiguous}"
        );
        assert!(!ambiguous.contains("call_x"), "{ambiguous}");
        let unknown = choose(&two, Some("zzz")).unwrap_err();
        assert!(unknown.contains("call_x"), "{unknown}");
    }
}
