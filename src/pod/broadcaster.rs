//! The `Broadcaster` actor: fans every event out to every connection, in one
//! order, and remembers what a newly attached client must be told.
//!
//! All frames for all connections pass through this actor's mailbox, so every
//! connection sees the same order: the pod's. Two facts make snapshot +
//! suffix gapless:
//! - `SessionLog` sends [`Register`] from inside its own mailbox order, after
//!   publishing every entry its snapshot holds and before publishing any it
//!   does not; actix delivers one sender's messages in order, so the
//!   registration lands between exactly those entries here as well.
//! - The worker sends a block's hints before asking `SessionLog` to commit
//!   the block, and waits for that commit before streaming the next block, so
//!   here a block's hints always precede its [`Published::Entry`]. The
//!   `in_flight` of a snapshot is therefore exactly what the hints before it
//!   built, and any entry clears it.
//!
//! Streaming deltas are coalesced: the first one after a quiet spell goes out
//! at once, those that follow within [`HINT_WINDOW`] (1 ms, which tokio's
//! timer rounds up to its 1 ms tick) are joined and sent together when the
//! window closes. At a model's pace (hundreds of deltas a
//! second) that turns one `write` per delta per client into one per window,
//! which is what lets 256 clients follow at 1,000 deltas/s (see
//! `docs/performance.md`). Anything else flushes the held deltas first, so
//! no frame ever overtakes a delta sent before it.

use std::collections::HashMap;
use std::time::Duration;

use actix::prelude::*;
use bytes::{Bytes, BytesMut};
use uuid::Uuid;

use super::frames;
use super::outbox::Outbox;
use crate::mcp::McpChange;
use crate::protocol::{Event, Greeting, InFlight, Status, SwitchReason, Usage};

pub type ConnId = u64;

/// How long a delta may wait to share a write with the ones after it.
pub const HINT_WINDOW: Duration = Duration::from_millis(1);

pub struct Broadcaster {
    connections: HashMap<ConnId, Outbox>,
    greeting: Greeting,
    status: Status,
    in_flight: Option<InFlight>,
    /// Delta frames held back until the window closes.
    held: BytesMut,
    /// A window is open: deltas arriving now are held.
    window_open: bool,
}

impl Broadcaster {
    pub fn new(greeting: Greeting) -> Self {
        Self {
            connections: HashMap::new(),
            greeting,
            status: Status::default(),
            in_flight: None,
            held: BytesMut::new(),
            window_open: false,
        }
    }

    /// Sends a delta at once if no window is open (and opens one), else
    /// holds it for the window's end.
    fn fan_out_delta(&mut self, frame: Bytes, ctx: &mut Context<Self>) {
        if self.window_open {
            self.held.extend_from_slice(&frame);
            return;
        }
        self.fan_out(frame);
        self.open_window(ctx);
    }

    fn open_window(&mut self, ctx: &mut Context<Self>) {
        self.window_open = true;
        ctx.run_later(HINT_WINDOW, |this, ctx| {
            // Deltas kept coming: send them and keep coalescing; a window
            // that caught nothing closes, so the next delta goes out at once.
            if this.flush_held() {
                this.open_window(ctx);
            } else {
                this.window_open = false;
            }
        });
    }

    /// Sends the held deltas, if any; says whether there were some.
    fn flush_held(&mut self) -> bool {
        if self.held.is_empty() {
            return false;
        }
        let frames = self.held.split().freeze();
        self.fan_out(frames);
        true
    }

    fn fan_out(&mut self, frame: Bytes) {
        self.connections
            .retain(|_, outbox| outbox.push(frame.clone()));
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
        let parts =
            frames::snapshot_parts(&self.greeting, &self.status, new_session_id, entries, None);
        self.connections.retain(|_, outbox| {
            outbox.push(announce.clone()) && outbox.push_snapshot(parts.clone())
        });
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
    pub outbox: Outbox,
    pub session_id: Uuid,
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
            &self.greeting,
            &self.status,
            msg.session_id,
            &msg.entries,
            self.in_flight.as_ref(),
        );
        if msg.outbox.push_snapshot(parts) {
            self.connections.insert(msg.id, msg.outbox);
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
        if let Some(outbox) = self.connections.remove(&msg.0) {
            outbox.close();
        }
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
    /// A frame for one client, in the pod's order: the answer to a session
    /// switch goes this way so it follows the `session_switched` and
    /// snapshot its switch published (`SessionLog` sent those before it
    /// answered, so they are ahead of this in the mailbox).
    Reply(Outbox, Bytes),
}

impl Handler<Published> for Broadcaster {
    type Result = ();

    fn handle(&mut self, msg: Published, ctx: &mut Context<Self>) {
        if let Published::Event(event) = &msg {
            if matches!(
                **event,
                Event::TextDelta { .. }
                    | Event::ReasoningDelta { .. }
                    | Event::ToolCallArgsDelta { .. }
            ) {
                InFlight::apply(&mut self.in_flight, event);
                let frame = event.to_frame();
                self.fan_out_delta(frame, ctx);
                return;
            }
        }
        self.flush_held();
        if let Published::Reply(outbox, frame) = msg {
            outbox.push(frame);
            return;
        }
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
                let frame = Event::Status(status.clone()).to_frame();
                self.status = status;
                frame
            }
            Published::Usage(usage) => Event::Usage(usage).to_frame(),
            Published::Reply(..) => return,
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
        let outboxes: Vec<Outbox> = self.connections.drain().map(|(_, o)| o).collect();
        for outbox in &outboxes {
            outbox.close();
        }
        // One deadline for all: clients that stopped reading are given up on
        // together, not one grace period after another.
        Box::pin(async move {
            let flushed = futures::future::join_all(outboxes.iter().map(Outbox::flushed));
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, flushed).await;
        })
    }
}
