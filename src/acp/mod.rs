//! `pod acp`: the Agent Client Protocol on stdin/stdout, as a client of
//! the workspace's pod.
//!
//! There is no agent loop here. The editor's methods become the pod's
//! (`session/prompt` a `run`, `session/cancel` a `cancel`, …) and
//! everything the editor is shown comes from the pod's log and hints,
//! through one connection to the pod ([`link`]) whose frames one task reads
//! ([`Bridge::pump`]). So the conversation an editor drives is the one the
//! TUI, `pod send` and a phone see, and closing the editor loses nothing:
//! the turn runs in the pod.
//!
//! The protocol itself — JSON-RPC framing, request ids, malformed input,
//! `$/cancel_request` — is the `agent-client-protocol` crate's.

mod children;
mod link;
mod permission;
mod prompt;
mod replay;
mod stdio;
mod updates;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agent_client_protocol::v1::schema::{
    CancelNotification, CurrentModeUpdate, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, RequestPermissionRequest, SessionNotification, SessionUpdate,
    SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::Client;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::sync::{oneshot, watch, Notify};
use uuid::Uuid;

use crate::client::EventStream;
use crate::protocol::{ApprovalMode, Event, LogEntry, LogLine, Method, Snapshot, Status};
pub use link::Place;
use link::{Link, PodError};
use updates::Updates;

/// Finds the pod for a session's `cwd`, starting it when none runs (the
/// front end's job: it knows the flags and the paths). Blocking.
pub type Locate = Box<dyn Fn(&Path) -> anyhow::Result<Place> + Send + Sync>;

/// The approval modes, offered as the session's ACP modes.
const MODES: [(ApprovalMode, &str, &str); 4] = [
    (
        ApprovalMode::Ask,
        "Ask",
        "Read-only tools run; every other call is asked",
    ),
    (
        ApprovalMode::Edits,
        "Edits",
        "File edits inside the workspace run unasked too",
    ),
    (
        ApprovalMode::Auto,
        "Auto",
        "Everything runs unasked (deny rules still apply)",
    ),
    (
        ApprovalMode::ReadOnly,
        "Read-only",
        "Only read-only tools run; everything else is denied",
    ),
];

/// How long `pod acp` waits, once the pod is gone, for its last words to
/// reach the editor before it exits.
const GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Serves ACP on stdin/stdout until the editor closes stdin or the pod
/// goes away.
pub async fn serve(locate: Locate) -> anyhow::Result<()> {
    let (transport, output, flusher) = stdio::stdio();
    let bridge = Arc::new(Bridge {
        locate: Arc::new(locate),
        output,
        link: tokio::sync::Mutex::new(None),
        state: Mutex::new(State::default()),
        gone: Notify::new(),
        switched: watch::channel(None).0,
    });
    let (b1, b2, b3, b4, b5, b6) = (
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
        bridge.clone(),
    );
    let served = agent_client_protocol::Agent
        .v1()
        .name("pod")
        .on_receive_request(
            async move |request: InitializeRequest, responder, _cx| {
                b1.initialize(request, responder)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                let answer = b2.new_session(request, cx).await;
                responder.respond_with_result(answer)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let answer = b3.load_session(request, cx).await;
                responder.respond_with_result(answer)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, _cx| b4.prompt(request, responder).await,
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, _cx| {
                let answer = b5.set_mode(request).await;
                responder.respond_with_result(answer)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |_cancel: CancelNotification, _cx| {
                b6.cancel().await;
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, async |cx: ConnectionTo<Client>| {
            // Closing stdin ends this process only: the pod and its turn go on.
            tokio::select! {
                () = cx.incoming_closed() => {}
                () = bridge.gone.notified() => {
                    // The errors that say so are queued, not yet written:
                    // ending now would drop them. The editor usually hangs
                    // up at once; if not, half a second is plenty.
                    let _ = tokio::time::timeout(GRACE, cx.incoming_closed()).await;
                }
            }
            Ok(())
        })
        .await;
    // Whatever the SDK accepted reaches the editor before this process ends.
    let _ = tokio::task::spawn_blocking(move || flusher.finish()).await;
    served.map_err(|e| anyhow::anyhow!("the editor's connection failed: {e}"))
}

struct Bridge {
    locate: Arc<Locate>,
    /// stdout in order, for what `pod acp` serialises itself (a replay).
    output: stdio::Output,
    /// The connection to the pod, made by the first `session/new` or
    /// `session/load` (they carry the `cwd` that names the pod).
    link: tokio::sync::Mutex<Option<Arc<Link>>>,
    state: Mutex<State>,
    /// The pod's connection ended: `pod acp` ends.
    gone: Notify,
    /// The pod's current session, each time it switches.
    switched: watch::Sender<Option<Uuid>>,
}

#[derive(Default)]
struct State {
    /// The pod's current session: the ACP session id.
    session: Option<Uuid>,
    status: Status,
    workspace: PathBuf,
    /// The editor's prompts, by their run's `request_id`, until `turn_end`.
    prompts: HashMap<String, Responder<PromptResponse>>,
    /// Every run this editor sent: their input is not echoed back.
    ours: HashSet<String>,
    /// Permission requests the editor has open, by session and call id
    /// (a child's calls are asked on its own session): sending on one
    /// withdraws it.
    asking: HashMap<(String, String), oneshot::Sender<()>>,
    updates: Updates,
    /// The editor's name (`clientInfo`), for the pod's `hello`.
    editor: String,
    /// The editor declared `clientCapabilities.subagents`: child pods are
    /// shown as child sessions ([`children`]).
    subagents: bool,
    /// The child pods announced to the editor, by name, and what it was
    /// last told of each one's work.
    children: HashMap<String, children::Shown>,
}

impl Bridge {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn initialize(
        &self,
        request: InitializeRequest,
        responder: Responder<InitializeResponse>,
    ) -> agent_client_protocol::Result<()> {
        let asked = serde_json::to_value(&request).unwrap_or_default();
        let editor = asked
            .pointer("/clientInfo/name")
            .and_then(Value::as_str)
            .unwrap_or("editor")
            .to_owned();
        // `{}` declares it; absent or `null` does not.
        let subagents = asked
            .pointer("/clientCapabilities/subagents")
            .is_some_and(Value::is_object);
        {
            let mut state = self.state();
            state.editor = editor;
            state.subagents = subagents;
        }
        responder.respond_with_result(typed(json!({
            // Version 1 is the one this agent speaks, whatever was asked.
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "embeddedContext": true, "audio": false},
            },
            "agentInfo": {"name": "pod", "title": "pod", "version": env!("CARGO_PKG_VERSION")},
            "authMethods": [],
        })))
    }

    /// The pod of `cwd`, connected to (and started) on first use; with
    /// the connection's snapshot when it was made just now, so a first
    /// `session/load` of the current session replays it instead of asking
    /// for the same entries again.
    async fn link(
        self: &Arc<Self>,
        cwd: &Path,
        cx: &ConnectionTo<Client>,
    ) -> Result<(Arc<Link>, Option<Box<Snapshot>>), agent_client_protocol::Error> {
        let mut slot = self.link.lock().await;
        if let Some(link) = &*slot {
            return Ok((link.clone(), None));
        }
        let locate = self.locate.clone();
        let cwd = cwd.to_owned();
        let place = tokio::task::spawn_blocking(move || locate(&cwd))
            .await
            .map_err(|e| internal(format!("finding the pod failed: {e}")))?
            .map_err(|e| internal(format!("{e:#}")))?;
        let (link, events, snapshot) = Link::connect(place)
            .await
            .map_err(|e| internal(format!("{e:#}")))?;
        let link = Arc::new(link);
        {
            let mut state = self.state();
            state.session = Some(snapshot.session_id);
            state.status = snapshot.status.clone();
            state.workspace = PathBuf::from(&snapshot.greeting.workspace);
        }
        self.switched.send_replace(Some(snapshot.session_id));
        tokio::spawn(self.clone().pump(link.clone(), events, cx.clone()));
        let client = format!("acp ({})", self.state().editor);
        // Only a name for the log's `client`; a pod that refuses it still works.
        let _ = link.call(Method::Hello { client }).await;
        *slot = Some(link.clone());
        Ok((link, Some(snapshot)))
    }

    async fn current_link(&self) -> Result<Arc<Link>, agent_client_protocol::Error> {
        self.link.lock().await.clone().ok_or_else(|| {
            agent_client_protocol::Error::invalid_request().data(json!(
                "no session yet: call session/new or session/load first"
            ))
        })
    }

    async fn new_session(
        self: &Arc<Self>,
        request: NewSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<NewSessionResponse> {
        let (link, _) = self.link(&request.cwd, &cx).await?;
        let mut switched = self.switched.subscribe();
        switched.borrow_and_update();
        // The pod says whether it is idle: `busy` while a turn runs or is
        // queued (a status frame this end has not read yet could be stale).
        let fresh = match link.call(Method::NewSession).await {
            Ok(_) => true,
            Err(e) if e.code == "busy" => false,
            Err(e) => return Err(pod_error(e)),
        };
        if fresh {
            // The pod answers, then says which session it switched to.
            let _ = switched.changed().await;
        }
        let (session, mode) = {
            let state = self.state();
            (state.session, state.status.approval)
        };
        let session = session.ok_or_else(|| internal("the pod named no session".to_owned()))?;
        let meta = if fresh {
            json!({"pod": {"newSession": true, "pod": link.place.name}})
        } else {
            json!({"pod": {"newSession": false, "pod": link.place.name, "reason":
                "the pod is busy with a turn: this is its current session, which the \
                 editor now shares with the pod's other clients"}})
        };
        typed(json!({"sessionId": session.to_string(), "modes": modes(mode), "_meta": meta}))
    }

    async fn load_session(
        self: &Arc<Self>,
        request: LoadSessionRequest,
        cx: ConnectionTo<Client>,
    ) -> agent_client_protocol::Result<LoadSessionResponse> {
        let (link, snapshot) = self.link(&request.cwd, &cx).await?;
        let wanted = request.session_id.0.to_string();
        let current = self.state().session.map(|s| s.to_string());
        let entries = match snapshot {
            // A whole snapshot of the wanted session, read just now.
            Some(snapshot)
                if snapshot.first_seq.is_none() && current.as_deref() == Some(wanted.as_str()) =>
            {
                Some(snapshot.entries)
            }
            _ => None,
        };
        let entries = match entries {
            Some(entries) => entries,
            None => {
                self.session_entries(&link, &wanted, current.as_deref())
                    .await?
            }
        };
        let id = wanted;
        // Every update is queued before the response below, which the SDK
        // sends once this returns.
        let replay = replay::Replay::new(self.output.clone());
        let mut updates = Updates::default();
        let none = HashSet::new();
        for line in &entries {
            for update in updates.entry(&line.entry, false, &none) {
                replay.update(&id, update);
            }
            match &line.entry {
                LogEntry::AgentStarted { .. } => {
                    self.adopt(&link.place, &id, &line.entry, &cx, &replay);
                }
                LogEntry::AgentTurnEnd { .. } => self.agent_turn_end(&id, &line.entry, &replay),
                _ => {}
            }
        }
        replay.finish();
        let mode = self.state().status.approval;
        typed(json!({"modes": modes(mode)}))
    }

    /// The entries of session `wanted`, made the pod's current one first
    /// (`resume_session`) unless it is already.
    async fn session_entries(
        &self,
        link: &Link,
        wanted: &str,
        current: Option<&str>,
    ) -> Result<Vec<LogLine>, agent_client_protocol::Error> {
        if current != Some(wanted) {
            let mut switched = self.switched.subscribe();
            switched.borrow_and_update();
            link.call(Method::ResumeSession {
                session_id: wanted.to_owned(),
            })
            .await
            .map_err(pod_error)?;
            let _ = switched.changed().await;
        }
        let session = link
            .call(Method::GetSession {
                session_id: wanted.to_owned(),
            })
            .await
            .map_err(pod_error)?;
        Ok(session.entries.unwrap_or_default())
    }

    async fn prompt(
        &self,
        request: PromptRequest,
        responder: Responder<PromptResponse>,
    ) -> agent_client_protocol::Result<()> {
        let link = match self.current_link().await {
            Ok(link) => link,
            Err(e) => return responder.respond_with_error(e),
        };
        let blocks: Vec<Value> = request
            .prompt
            .iter()
            .filter_map(|block| serde_json::to_value(block).ok())
            .collect();
        let workspace = self.state().workspace.clone();
        let segments = match prompt::segments(&blocks, &link, &workspace).await {
            Ok(segments) => segments,
            Err(e) => return responder.respond_with_error(pod_error(e)),
        };
        let run = link.fresh_id();
        {
            let mut state = self.state();
            state.ours.insert(run.clone());
            state.prompts.insert(run.clone(), responder);
        }
        // Busy or not, the pod queues a run; the answer comes at its turn_end.
        if let Err(e) = link.send(Method::Run { segments }, &run).await {
            if let Some(responder) = self.state().prompts.remove(&run) {
                return responder.respond_with_error(pod_error(e));
            }
        }
        Ok(())
    }

    async fn set_mode(
        &self,
        request: SetSessionModeRequest,
    ) -> agent_client_protocol::Result<SetSessionModeResponse> {
        let link = self.current_link().await?;
        let asked = request.mode_id.0.to_string();
        let mode = MODES
            .iter()
            .map(|(mode, ..)| *mode)
            .find(|mode| mode.as_str() == asked)
            .ok_or_else(|| {
                agent_client_protocol::Error::invalid_params().data(json!(format!(
                    "no mode {asked:?}; the modes are ask, edits, auto and read-only"
                )))
            })?;
        link.call(Method::SetApproval { mode })
            .await
            .map_err(pod_error)?;
        typed(json!({}))
    }

    /// Cancels the editor's runs: the running one stops, queued ones are
    /// dropped. With none, the session's running turn stops (another
    /// client's, which the editor shows in its session) — `cancel`, as the
    /// TUI's Esc.
    async fn cancel(&self) {
        let Ok(link) = self.current_link().await else {
            return;
        };
        let runs: Vec<String> = self.state().prompts.keys().cloned().collect();
        if runs.is_empty() {
            let id = link.fresh_id();
            let _ = link.send(Method::Cancel { run: None }, &id).await;
        }
        for run in runs {
            // Its answer (`removed`, or the turn's end) settles the prompt.
            let id = link.fresh_id();
            let _ = link.send(Method::Cancel { run: Some(run) }, &id).await;
        }
    }

    /// Reads the pod's frames until it goes away.
    async fn pump(
        self: Arc<Self>,
        link: Arc<Link>,
        mut events: EventStream,
        cx: ConnectionTo<Client>,
    ) {
        let why = loop {
            match events.next().await {
                Some(Ok(event)) => self.on_event(&link, event, &cx),
                Some(Err(crate::client::ClientError::BadEvent(e))) => {
                    eprintln!("pod acp: skipped a frame of the pod's it cannot read: {e}");
                }
                Some(Err(e)) => break e.to_string(),
                None => break "it closed the connection".to_owned(),
            }
        };
        let message = link.gone_message(&why);
        eprintln!("pod acp: {message}");
        link.fail_all(&message);
        let prompts: Vec<_> = self.state().prompts.drain().collect();
        for (_, responder) in prompts {
            let _ = responder.respond_with_error(internal(message.clone()));
        }
        self.gone.notify_one();
    }

    fn on_event(self: &Arc<Self>, link: &Arc<Link>, event: Event, cx: &ConnectionTo<Client>) {
        let Some(event) = link.resolve(event) else {
            return;
        };
        let session = self
            .state()
            .session
            .map(|s| s.to_string())
            .unwrap_or_default();
        match event {
            Event::Error {
                code,
                message,
                request_id: Some(run),
            } => {
                // A run the pod refused (an unreadable file_ref, a hook, …).
                if let Some(responder) = self.state().prompts.remove(&run) {
                    let _ = responder.respond_with_error(pod_error(PodError::new(code, message)));
                }
            }
            Event::Snapshot(snapshot) => {
                let mut state = self.state();
                state.session = Some(snapshot.session_id);
                state.status = snapshot.status;
            }
            Event::SessionSwitched { new_session_id, .. } => {
                self.state().session = Some(new_session_id);
                self.switched.send_replace(Some(new_session_id));
            }
            Event::Status(status) => {
                self.agent_states(&session, &status.agents, cx);
                let changed = {
                    let mut state = self.state();
                    let changed = state.status.approval != status.approval;
                    state.status = status;
                    changed.then_some(state.status.approval)
                };
                if let Some(mode) = changed {
                    notify(
                        cx,
                        &session,
                        SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(mode.as_str())),
                    );
                }
            }
            Event::Entry {
                session_id, entry, ..
            } => self.on_entry(link, &session_id.to_string(), &entry, cx),
            hint => {
                let update = self.state().updates.hint(&hint);
                if let Some(update) = update {
                    notify(cx, &session, update);
                }
            }
        }
    }

    fn on_entry(
        self: &Arc<Self>,
        link: &Arc<Link>,
        session: &str,
        entry: &LogEntry,
        cx: &ConnectionTo<Client>,
    ) {
        let updates = {
            let mut state = self.state();
            let State { updates, ours, .. } = &mut *state;
            updates.entry(entry, true, ours)
        };
        for update in updates {
            notify(cx, session, update);
        }
        match entry {
            LogEntry::ApprovalRequest { .. } => self.ask_about(link, session, entry, cx),
            LogEntry::ApprovalDecision { call_id, .. } => self.withdraw(session, call_id),
            LogEntry::AgentStarted { .. } => self.adopt(&link.place, session, entry, cx, cx),
            LogEntry::AgentTurnEnd { .. } => self.agent_turn_end(session, entry, cx),
            LogEntry::TurnEnd {
                request_id: Some(run),
                ..
            } => {
                let responder = {
                    let mut state = self.state();
                    state.ours.remove(run);
                    state.prompts.remove(run)
                };
                if let (Some(responder), Some(stop)) = (responder, prompt::stop_reason(entry)) {
                    let _ = match stop {
                        Ok(reason) => {
                            responder.respond_with_result(typed(json!({"stopReason": reason})))
                        }
                        Err(e) => responder.respond_with_error(pod_error(e)),
                    };
                }
            }
            _ => {}
        }
    }

    /// An `approval_request` of `session` (the pod of `link`) asked of the
    /// editor.
    fn ask_about(
        self: &Arc<Self>,
        link: &Arc<Link>,
        session: &str,
        entry: &LogEntry,
        cx: &ConnectionTo<Client>,
    ) {
        let LogEntry::ApprovalRequest {
            call_id,
            tool,
            summary,
            preview,
            ..
        } = entry
        else {
            return;
        };
        let params = permission::request(session, call_id, tool, summary, preview);
        let key = (session.to_owned(), call_id.clone());
        self.ask(link.clone(), key, params, cx.clone());
    }

    /// Another client answered `call_id`: the editor's request is withdrawn.
    fn withdraw(&self, session: &str, call_id: &str) {
        let key = (session.to_owned(), call_id.to_owned());
        if let Some(withdraw) = self.state().asking.remove(&key) {
            let _ = withdraw.send(());
        }
    }

    /// Asks the editor about one call; its choice is sent as an `approve`
    /// unless another client answered first (then the request is dropped,
    /// which withdraws it, and a late reply is ignored).
    fn ask(
        self: &Arc<Self>,
        link: Arc<Link>,
        key: (String, String),
        params: Value,
        cx: ConnectionTo<Client>,
    ) {
        let call_id = key.1.clone();
        let request: RequestPermissionRequest = match serde_json::from_value(params) {
            Ok(request) => request,
            Err(e) => {
                eprintln!("pod acp: cannot ask the editor about {call_id}: {e}");
                return;
            }
        };
        let (withdraw, withdrawn) = oneshot::channel();
        self.state().asking.insert(key.clone(), withdraw);
        let bridge = self.clone();
        tokio::spawn(async move {
            let asked = cx.send_request(request).block_task();
            let reply = tokio::select! {
                reply = asked => reply,
                _ = withdrawn => return,
            };
            bridge.state().asking.remove(&key);
            let outcome = match reply {
                Ok(reply) => serde_json::to_value(&reply.outcome).unwrap_or_default(),
                Err(e) => {
                    eprintln!("pod acp: the editor did not answer about {call_id}: {e}");
                    return;
                }
            };
            if let Some(approve) = permission::answer(&call_id, &outcome) {
                match link.call(approve).await {
                    Ok(_) => {}
                    // Another client was quicker: its answer stands.
                    Err(e) if e.code == "not_pending" => {}
                    Err(e) => eprintln!(
                        "pod acp: the pod refused the editor's answer: {}",
                        e.message
                    ),
                }
            }
        });
    }
}

/// The modes offered, with the pod's current one.
fn modes(current: ApprovalMode) -> Value {
    let available: Vec<Value> = MODES
        .iter()
        .map(|(mode, name, description)| {
            json!({"id": mode.as_str(), "name": name, "description": description})
        })
        .collect();
    json!({"currentModeId": current.as_str(), "availableModes": available})
}

/// Where a `session/update` goes: to the SDK, which sends it at once
/// (live), or into a replay's lines ([`replay::Replay`]), so that what a
/// replayed entry causes stays in the entry's place.
trait Notifier {
    fn update(&self, session: &str, update: SessionUpdate);
}

impl Notifier for ConnectionTo<Client> {
    fn update(&self, session: &str, update: SessionUpdate) {
        notify(self, session, update);
    }
}

/// Sends one `session/update` through the SDK.
fn notify(cx: &ConnectionTo<Client>, session: &str, update: SessionUpdate) {
    if let Err(e) = cx.send_notification(SessionNotification::new(session.to_owned(), update)) {
        eprintln!("pod acp: could not send an update to the editor: {e}");
    }
}

/// An ACP message written as the JSON the protocol documents, checked by
/// the SDK's own types.
fn typed<T: DeserializeOwned>(value: Value) -> agent_client_protocol::Result<T> {
    serde_json::from_value(value).map_err(|e| internal(format!("pod acp built a bad message: {e}")))
}

fn internal(message: String) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(-32603, message)
}

/// The pod's error as a JSON-RPC error: its message, and its code in `data`.
fn pod_error(e: PodError) -> agent_client_protocol::Error {
    let code = if e.code == "invalid_params" {
        -32602
    } else {
        -32603
    };
    agent_client_protocol::Error::new(code, e.message).data(json!({"code": e.code}))
}
