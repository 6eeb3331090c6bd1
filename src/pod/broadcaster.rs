//! The `Broadcaster` actor: fans every event out to every connection, in one
//! order, and remembers what a newly attached client must be told.
//!
//! It runs on the main arbiter, beside the worker: the turn never waits for
//! a client (a push never blocks, see `outbox.rs`), and on the two-core
//! machine the benchmarks run on, a thread of its own measured worse — the
//! wake-ups between threads cost more than they saved (see
//! `docs/performance.md`, fan-out). Every queue is opened on the
//! broadcaster's thread, so moving it to one of its own is one line.
//!
//! All frames for all connections pass through this actor's mailbox — the
//! broadcasts, and each client's own responses ([`Deliver`]) — and each
//! connection's queue lives here (see `outbox.rs`), so every connection sees
//! its frames in one order: the order of this mailbox. Two facts make
//! snapshot + suffix gapless:
//! - `SessionLog` sends [`Register`] from inside its own mailbox order, after
//!   publishing every entry its snapshot holds and before publishing any it
//!   does not; messages of one sender reach a mailbox in the order they were
//!   sent, so the registration lands between exactly those entries here as
//!   well.
//! - The worker sends a block's hints before asking `SessionLog` to commit
//!   the block, and waits for that commit before streaming the next block.
//!   A mailbox is one queue, and a hint is in it before the worker even asks
//!   for the commit whose entry follows, so here a block's hints always
//!   precede its [`Published::Entry`]. The `in_flight` of a snapshot is
//!   therefore exactly what the hints before it built, and any entry clears
//!   it.
//!
//! Streaming deltas are coalesced without a timer: a delta is held, and the
//! held deltas are sent together once the mailbox is empty (actix runs what
//! a handler schedules with `notify` only after draining the mailbox),
//! merged into one frame per run of deltas a client appends to the same
//! thing ([`Event::absorb`]). A delta that arrives while the actor is idle
//! goes out at once, alone; deltas that arrive while the turn or the
//! fan-out keeps the thread busy share one frame and one `write` per
//! client. So the batch grows with the load and no delta waits for a timer.
//! Any other frame flushes the held deltas first, so no frame ever
//! overtakes a delta sent before it.

use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;
use bytes::{Bytes, BytesMut};
use uuid::Uuid;

use super::frames;
use super::outbox::{ClientSocket, Deliver, Queue};
use crate::mcp::McpChange;
use crate::protocol::{
    AccessLevel, AccessReason, Event, Greeting, InFlight, Status, SwitchReason, Usage,
};

pub use super::outbox::ConnId;

/// A connection's `access` and `access_reason`, as its greeting says them.
pub type GreetingAccess = (AccessLevel, Option<AccessReason>);

/// What makes two connections' snapshots of a session differ: their
/// access and the tail they asked for.
type SnapshotKind = (GreetingAccess, Option<usize>);

pub struct Broadcaster {
    connections: HashMap<ConnId, Queue>,
    /// Each connection's access, for the greetings of its snapshots.
    access: HashMap<ConnId, GreetingAccess>,
    /// The tail each tail-snapshot connection asked for: a session switch
    /// sends it a tail of the new session too.
    tails: HashMap<ConnId, usize>,
    /// The greeting, with the access of a full connection.
    greeting: Greeting,
    status: Status,
    in_flight: Option<InFlight>,
    /// Deltas held until the mailbox is empty.
    held: Vec<Event>,
    /// A [`FlushHeld`] is scheduled.
    flush_scheduled: bool,
    /// Where held deltas are written: each flush splits its frames off, and
    /// once every client has written them the next flush reuses the memory,
    /// so a streamed reply allocates no buffer per frame.
    out: BytesMut,
}

impl Broadcaster {
    pub fn new(greeting: Greeting) -> Self {
        Self {
            connections: HashMap::new(),
            access: HashMap::new(),
            tails: HashMap::new(),
            greeting,
            status: Status::default(),
            in_flight: None,
            held: Vec::new(),
            flush_scheduled: false,
            out: BytesMut::new(),
        }
    }

    /// Holds a delta until the mailbox is empty, merged into the one held
    /// before it when a client would append both to the same thing.
    fn hold_delta(&mut self, event: Event, ctx: &mut Context<Self>) {
        InFlight::apply(&mut self.in_flight, &event);
        let event = match self.held.last_mut() {
            Some(last) => last.absorb(event),
            None => Some(event),
        };
        self.held.extend(event);
        if !self.flush_scheduled {
            self.flush_scheduled = true;
            ctx.notify(FlushHeld);
        }
    }

    /// Sends the held deltas, if any, as one write per client.
    fn flush_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        for event in self.held.drain(..) {
            // Only deltas are held, and `put_delta` writes every delta.
            if !frames::put_delta(&mut self.out, &event) {
                self.out.extend_from_slice(&event.to_frame());
            }
        }
        let frames = self.out.split().freeze();
        self.fan_out(frames);
    }

    fn fan_out(&mut self, frame: Bytes) {
        self.connections
            .retain(|_, queue| queue.push(frame.clone()));
    }

    /// Tells every connection the current session changed and sends it the
    /// new session's snapshot. Nothing is in flight across a switch (the
    /// pod switches only when idle), so the snapshot's `in_flight` is null.
    fn switch_to(&mut self, new_session_id: Uuid, reason: SwitchReason, entries: &[Bytes]) {
        self.in_flight = None;
        self.greeting.session_id = new_session_id;
        let announce = Event::SessionSwitched {
            new_session_id,
            reason,
        }
        .to_frame();
        // One snapshot per kind of access (there are three at most) and
        // tail asked for.
        let mut parts: Vec<(SnapshotKind, Vec<Bytes>)> = Vec::new();
        let (greeting, status, access, tails) =
            (&self.greeting, &self.status, &self.access, &self.tails);
        self.connections.retain(|id, queue| {
            let of = (
                access.get(id).copied().unwrap_or_default(),
                tails.get(id).copied(),
            );
            let at = match parts.iter().position(|(a, _)| *a == of) {
                Some(at) => at,
                None => {
                    let greeting = with_access(greeting, of.0);
                    let (first_seq, lines) = frames::tail_of(entries, of.1);
                    let built = frames::snapshot_parts(
                        &greeting,
                        status,
                        new_session_id,
                        first_seq,
                        lines,
                        None,
                    );
                    parts.push((of, built));
                    parts.len() - 1
                }
            };
            queue.push(announce.clone()) && queue.push_snapshot(parts[at].1.clone())
        });
    }
}

/// The greeting as a connection with `access` gets it.
fn with_access(greeting: &Greeting, (level, reason): GreetingAccess) -> Greeting {
    Greeting {
        access: level,
        access_reason: reason,
        ..greeting.clone()
    }
}

impl Actor for Broadcaster {
    type Context = Context<Self>;
}

/// Attach a connection: send it its snapshot and everything after.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Register {
    pub id: ConnId,
    pub access: GreetingAccess,
    /// The connection's write half, which becomes its queue here.
    pub socket: ClientSocket,
    pub session_id: Uuid,
    /// The tail the connection asked for (`None`: the whole session).
    pub tail: Option<usize>,
    /// The seq of `entries[0]`, said in a tail snapshot only.
    pub first_seq: Option<u64>,
    /// The snapshot's log lines (shared with the mirror, not copied).
    pub entries: Vec<Bytes>,
    /// Fired once the snapshot is queued, so the connection may start
    /// reading requests (whose answers must not overtake it).
    pub registered: tokio::sync::oneshot::Sender<()>,
}

impl Handler<Register> for Broadcaster {
    type Result = ();

    fn handle(&mut self, msg: Register, _: &mut Context<Self>) {
        // The snapshot's `in_flight` already holds the held deltas.
        self.flush_held();
        let parts = frames::snapshot_parts(
            &with_access(&self.greeting, msg.access),
            &self.status,
            msg.session_id,
            msg.first_seq,
            &msg.entries,
            self.in_flight.as_ref(),
        );
        // Opened here, so that the queue and its socket belong to this
        // thread (see `outbox.rs`).
        let Ok((queue, drain)) = msg.socket.open() else {
            return;
        };
        if let Some(drain) = drain {
            actix::spawn(drain.run());
        }
        if queue.push_snapshot(parts) {
            self.connections.insert(msg.id, queue);
            self.access.insert(msg.id, msg.access);
            if let Some(tail) = msg.tail {
                self.tails.insert(msg.id, tail);
            }
            let _ = msg.registered.send(());
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Unregister(pub ConnId);

impl Handler<Unregister> for Broadcaster {
    type Result = ();

    fn handle(&mut self, msg: Unregister, _: &mut Context<Self>) {
        self.access.remove(&msg.0);
        self.tails.remove(&msg.0);
        if let Some(queue) = self.connections.remove(&msg.0) {
            queue.close();
        }
    }
}

/// A frame for one client: queued after everything queued for it so far.
impl Handler<Deliver> for Broadcaster {
    type Result = ();

    fn handle(&mut self, msg: Deliver, _: &mut Context<Self>) {
        self.flush_held();
        if let Some(queue) = self.connections.get(&msg.to) {
            if !queue.push(msg.frame) {
                self.connections.remove(&msg.to);
            }
        }
    }
}

/// Sends the deltas held while the mailbox had messages in it.
#[derive(Message)]
#[rtype(result = "()")]
struct FlushHeld;

impl Handler<FlushHeld> for Broadcaster {
    type Result = ();

    fn handle(&mut self, _: FlushHeld, _: &mut Context<Self>) {
        self.flush_scheduled = false;
        self.flush_held();
    }
}

/// Something every connection must see.
#[derive(Message)]
#[rtype(result = "()")]
pub enum Published {
    /// A durable log entry (only `SessionLog` sends these).
    Entry {
        session_id: Uuid,
        line: Bytes,
    },
    /// The pod moved to a new session by compaction; sent by `SessionLog`
    /// immediately before the new session's first entry (`compact_done`).
    Compacted {
        new_session_id: Uuid,
        tokens_before: u64,
        tokens_after: u64,
    },
    /// The pod moved to another session (`new_session`, `fork`,
    /// `resume_session`): every connection gets `session_switched` and then
    /// a snapshot of that session, as if it had just connected. Sent by
    /// `SessionLog` in its mailbox order, like [`Register`], so the snapshot
    /// holds exactly the entries published before the next `Entry`.
    SessionSwitched {
        new_session_id: Uuid,
        reason: SwitchReason,
        /// The new session's log lines (shared with the mirror).
        entries: Vec<Bytes>,
    },
    /// A streaming hint or any other event.
    Event(Box<Event>),
    Status(Status),
    Usage(Usage),
}

impl Handler<Published> for Broadcaster {
    type Result = ();

    fn handle(&mut self, msg: Published, ctx: &mut Context<Self>) {
        let msg = match msg {
            Published::Event(event) if event.is_delta() => {
                self.hold_delta(*event, ctx);
                return;
            }
            msg => msg,
        };
        self.flush_held();
        let frame = match msg {
            Published::Entry { session_id, line } => {
                self.in_flight = None;
                frames::entry_frame(session_id, &line)
            }
            Published::SessionSwitched {
                new_session_id,
                reason,
                entries,
            } => {
                self.switch_to(new_session_id, reason, &entries);
                return;
            }
            Published::Compacted {
                new_session_id,
                tokens_before,
                tokens_after,
            } => {
                self.greeting.session_id = new_session_id;
                Event::CompactDone {
                    new_session_id,
                    tokens_before,
                    tokens_after,
                }
                .to_frame()
            }
            Published::Event(event) => {
                InFlight::apply(&mut self.in_flight, &event);
                event.to_frame()
            }
            Published::Status(status) => {
                if status == self.status {
                    return;
                }
                // The greeting names the pod's mode and model too: a client
                // connecting after `set_approval` or `set_model` must not
                // read the ones the pod started with there.
                self.greeting.approval = status.approval;
                if !status.model.is_empty() {
                    self.greeting.model.clone_from(&status.model);
                }
                let frame = Event::Status(status.clone()).to_frame();
                self.status = status;
                frame
            }
            Published::Usage(usage) => Event::Usage(usage).to_frame(),
        };
        self.fan_out(frame);
    }
}

/// An MCP server's state changed: later snapshots carry its new entry in
/// the greeting's `mcp_servers`, and clients connected now are told by a
/// `notification` (source `mcp`) when there is something to say.
#[derive(Message)]
#[rtype(result = "()")]
pub struct McpServerChanged(pub McpChange);

impl Handler<McpServerChanged> for Broadcaster {
    type Result = ();

    fn handle(&mut self, msg: McpServerChanged, _: &mut Context<Self>) {
        let McpChange {
            server,
            level,
            message,
        } = msg.0;
        let servers = &mut self.greeting.mcp_servers;
        match servers.iter_mut().find(|s| s.name == server.name) {
            Some(entry) => *entry = server,
            None => servers.push(server),
        }
        if let Some(message) = message {
            self.flush_held();
            let event = Event::Notification {
                level,
                source: "mcp".into(),
                message,
            };
            self.fan_out(event.to_frame());
        }
    }
}

/// How long shutdown waits for clients to take their last frames.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Say goodbye to every client and close their connections; resolves when
/// every queued frame has been written (or its client given up on).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown {
    pub reason: String,
}

impl Handler<Shutdown> for Broadcaster {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: Shutdown, _: &mut Context<Self>) -> Self::Result {
        self.flush_held();
        self.fan_out(Event::Shutdown { reason: msg.reason }.to_frame());
        let queues: Vec<Queue> = self.connections.drain().map(|(_, q)| q).collect();
        for queue in &queues {
            queue.close();
        }
        // One deadline for all: clients that stopped reading are given up on
        // together, not one grace period after another.
        Box::pin(async move {
            let flushed = futures::future::join_all(queues.iter().map(Queue::flushed));
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, flushed).await;
        })
    }
}
