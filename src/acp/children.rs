//! Child pods as ACP child sessions, for an editor that declared
//! `clientCapabilities.subagents` at `initialize`.
//!
//! ACP v1's stable schema has no child sessions; its *unstable* subagents
//! extension (the `unstable_subagents` feature of the SDK, `subagents` in
//! the TypeScript SDK's `unstable` entry) does: the agent announces a child
//! on its parent's session with a `subagent_update` (its session id, a
//! title, a description and its state), then sends the child's own
//! `session/update`s under the child's session id, on the same connection.
//! An editor that did not declare the capability is never sent either.
//!
//! Each child is a whole pod with a socket of its own beside its parent's:
//! `pod acp` connects to it as it connects to the parent, replays what its
//! log holds so far and streams the rest — the same [`Updates`] mapping,
//! its approval requests asked on the child's session and answered on the
//! child's connection. A child's own children are announced on the child's
//! session in turn.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    IdleStateUpdate, IdleStopReason, RequiresActionStateUpdate, RunningStateUpdate, SessionUpdate,
    StateUpdate, SubagentUpdate, UnknownStateUpdate,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;

use super::link::{Link, Place};
use super::updates::Updates;
use super::{notify, Bridge, Notifier};
use crate::client::{ClientError, Endpoint, EventStream};
use crate::protocol::{AgentStatus, Event, LogEntry, PodState, Snapshot, TurnEndReason};

/// How long a child's socket may take to appear after its `agent_started`
/// (the entry is committed before the child's actors start).
const SOCKET_WAIT: Duration = Duration::from_secs(10);

/// What the editor was last told of a child's work, so each state is said
/// once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shown {
    Announced,
    Running,
    Waiting,
    Idle,
    Unknown,
}

impl Bridge {
    /// A child the session `parent` started (its `agent_started` entry, live
    /// or replayed): announced once (through `out`), then watched on its
    /// own socket. `near` is the parent's place: the child's socket is
    /// beside it.
    pub(super) fn adopt(
        self: &Arc<Self>,
        near: &Place,
        parent: &str,
        entry: &LogEntry,
        cx: &ConnectionTo<Client>,
        out: &impl Notifier,
    ) {
        let LogEntry::AgentStarted {
            name,
            session_id,
            task,
            ..
        } = entry
        else {
            return;
        };
        {
            let mut state = self.state();
            if !state.subagents || state.children.contains_key(name) {
                return;
            }
            state.children.insert(name.clone(), Shown::Announced);
        }
        let session = session_id.to_string();
        out.update(
            parent,
            SessionUpdate::SubagentUpdate(
                SubagentUpdate::new(session.clone())
                    .title(name.clone())
                    .description(task.clone()),
            ),
        );
        let place = Place {
            endpoint: beside(&near.endpoint, name),
            name: name.clone(),
        };
        tokio::spawn(self.clone().watch(place, session, cx.clone()));
    }

    /// The children's states from their parent's `status.agents`: each
    /// change is a `subagent_update` on the parent's session.
    pub(super) fn agent_states(
        &self,
        parent: &str,
        agents: &[AgentStatus],
        cx: &ConnectionTo<Client>,
    ) {
        for agent in agents {
            let (shown, state) = match agent.state {
                PodState::Running | PodState::Compacting => (
                    Shown::Running,
                    StateUpdate::Running(RunningStateUpdate::new()),
                ),
                PodState::Waiting => (
                    Shown::Waiting,
                    StateUpdate::RequiresAction(RequiresActionStateUpdate::new()),
                ),
                PodState::Idle => (Shown::Idle, StateUpdate::Idle(IdleStateUpdate::new())),
                PodState::Paused | PodState::Unknown => (
                    Shown::Unknown,
                    StateUpdate::Unknown(UnknownStateUpdate::new()),
                ),
            };
            self.show_state(
                parent,
                &agent.name,
                &agent.session_id.to_string(),
                shown,
                state,
                cx,
            );
        }
    }

    /// A child's turn ended (`agent_turn_end` in its parent's log): idle,
    /// with why.
    pub(super) fn agent_turn_end(&self, parent: &str, entry: &LogEntry, out: &impl Notifier) {
        let LogEntry::AgentTurnEnd {
            name,
            session_id,
            reason,
            ..
        } = entry
        else {
            return;
        };
        let stop = match reason {
            TurnEndReason::Completed => Some(IdleStopReason::EndTurn),
            TurnEndReason::Cancelled => Some(IdleStopReason::Cancelled),
            TurnEndReason::MaxSteps => Some(IdleStopReason::MaxTurnRequests),
            _ => None,
        };
        let idle = IdleStateUpdate::new().stop_reason(stop);
        // Said whatever was shown before: the reason is news.
        if let Some(last) = self.state().children.get_mut(name) {
            *last = Shown::Announced;
        }
        self.show_state(
            parent,
            name,
            &session_id.to_string(),
            Shown::Idle,
            StateUpdate::Idle(idle),
            out,
        );
    }

    fn show_state(
        &self,
        parent: &str,
        name: &str,
        session: &str,
        shown: Shown,
        state: StateUpdate,
        out: &impl Notifier,
    ) {
        {
            let mut children = self.state();
            // Only children this editor was told of, and only changes.
            match children.children.get_mut(name) {
                Some(last) if *last != shown => *last = shown,
                _ => return,
            }
        }
        out.update(
            parent,
            SessionUpdate::SubagentUpdate(SubagentUpdate::new(session.to_owned()).state(state)),
        );
    }

    /// Streams one child's session to the editor until its pod goes away.
    async fn watch(self: Arc<Self>, place: Place, session: String, cx: ConnectionTo<Client>) {
        let (link, mut events, snapshot) = match connect(place).await {
            Ok(connected) => connected,
            Err(e) => {
                eprintln!("pod acp: the child session {session} is not shown: {e:#}");
                return;
            }
        };
        let link = Arc::new(link);
        let mut updates = Updates::default();
        let pending: HashSet<&String> = snapshot.status.pending_approvals.iter().collect();
        for line in &snapshot.entries {
            let asks = matches!(&line.entry,
                LogEntry::ApprovalRequest { call_id, .. } if pending.contains(call_id));
            self.child_entry(&link, &session, &line.entry, false, asks, &mut updates, &cx);
        }
        self.agent_states(&session, &snapshot.status.agents, &cx);
        loop {
            let event = match events.next().await {
                Some(Ok(event)) => event,
                Some(Err(ClientError::BadEvent(_))) => continue,
                Some(Err(_)) | None => break,
            };
            let Some(event) = link.resolve(event) else {
                continue;
            };
            match event {
                Event::Entry { entry, .. } => {
                    self.child_entry(&link, &session, &entry, true, true, &mut updates, &cx);
                }
                Event::Status(status) => self.agent_states(&session, &status.agents, &cx),
                hint => {
                    if let Some(update) = updates.hint(&hint) {
                        notify(&cx, &session, update);
                    }
                }
            }
        }
        link.fail_all("the child pod's connection ended");
    }

    /// One entry of a child's log: its updates, an approval request asked
    /// (when `asks`), a decision withdrawing one, its own children.
    #[allow(clippy::too_many_arguments)]
    fn child_entry(
        self: &Arc<Self>,
        link: &Arc<Link>,
        session: &str,
        entry: &LogEntry,
        live: bool,
        asks: bool,
        updates: &mut Updates,
        cx: &ConnectionTo<Client>,
    ) {
        for update in updates.entry(entry, live, &HashSet::new()) {
            notify(cx, session, update);
        }
        match entry {
            LogEntry::ApprovalRequest { .. } if asks => self.ask_about(link, session, entry, cx),
            LogEntry::ApprovalDecision { call_id, .. } => self.withdraw(session, call_id),
            LogEntry::AgentStarted { .. } => self.adopt(&link.place, session, entry, cx, cx),
            LogEntry::AgentTurnEnd { .. } => self.agent_turn_end(session, entry, cx),
            _ => {}
        }
    }
}

/// The endpoint of the pod `name` beside the pod at `near`: its socket in
/// the same directory, or the same server's `?agent=`.
fn beside(near: &Endpoint, name: &str) -> Endpoint {
    match near {
        Endpoint::Socket(path) => Endpoint::Socket(path.with_file_name(format!("{name}.sock"))),
        Endpoint::Remote(remote) => {
            let mut remote = remote.clone();
            let join = if remote.url.contains('?') { '&' } else { '?' };
            remote.url = format!("{}{join}agent={name}", remote.url);
            Endpoint::Remote(remote)
        }
    }
}

/// Connects to a child, waiting a little for its socket: `agent_started`
/// is committed before the child listens.
async fn connect(place: Place) -> anyhow::Result<(Link, EventStream, Box<Snapshot>)> {
    let deadline = tokio::time::Instant::now() + SOCKET_WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        match Link::connect(place.clone()).await {
            Ok(connected) => return Ok(connected),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(200));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_socket_is_beside_its_parents() {
        let near = Endpoint::Socket("/run/pod/calc-3f.sock".into());
        match beside(&near, "calc-3f.helper") {
            Endpoint::Socket(path) => {
                assert_eq!(path, std::path::Path::new("/run/pod/calc-3f.helper.sock"));
            }
            Endpoint::Remote(_) => panic!("a socket's neighbour is a socket"),
        }
    }
}
