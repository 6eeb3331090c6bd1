//! `pod attach`: the terminal UI.
//!
//! A protocol client like any other: its whole view is built from the
//! `snapshot` and `entry` frames of its connection; streaming hints only draw
//! progress. The parts, one job each:
//!
//! - [`conversation`]: the view model, from frames to blocks;
//! - [`composer`]: the input buffer, history and the `/`, `@`, `#` menus;
//! - [`commands`]: the built-in `/` commands;
//! - [`overlay`]: the screens drawn over the conversation (help, sessions);
//! - [`approval`]: the approval panel's state and keys;
//! - [`plan`]: the model's latest `update_plan` checklist;
//! - [`agents`]: the child pods' band and the `/agents` picker;
//! - [`app`]: keys, pod events and connection changes applied to them;
//! - [`connection`]: the socket, with reconnect and backoff;
//! - [`layout_cache`] and [`viewport`]: wrapped rows per block, and which
//!   of them are on screen;
//! - [`render`]: how it all looks.
//!
//! This module runs them: a terminal reader task, the connection task and
//! a loop that applies what they send and draws ([`render::draw`]) at most
//! once per frame.

pub mod agents;
pub mod app;
pub mod approval;
pub mod checkpoints;
pub mod clipboard;
pub mod commands;
pub mod composer;
pub mod connection;
pub mod conversation;
pub mod images;
pub mod layout_cache;
pub mod notify;
pub mod overlay;
pub mod plan;
pub mod render;
pub mod viewport;

use std::io::{stdout, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use anyhow::Context;
use crossterm::cursor::{MoveTo, Show};
use crossterm::event::{
    DisableBracketedPaste, DisableFocusChange, DisableMouseCapture, EnableBracketedPaste,
    EnableFocusChange, EnableMouseCapture, Event as TermEvent, EventStream,
};
use crossterm::execute;
use crossterm::style::Print;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use futures::StreamExt;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

pub use app::App;
use connection::{ConnEvent, Outgoing};

/// At most one frame per this long, however fast events arrive.
const FRAME: Duration = Duration::from_millis(16);

/// What `pod attach` needs to know.
#[derive(Debug, Clone)]
pub struct AttachOptions {
    /// The pod's socket, or its WebSocket (`--url`).
    pub endpoint: crate::client::Endpoint,
    /// Shown until the pod's greeting names it.
    pub pod_name: String,
    /// The command that reaches this pod from its project: `pod`, or
    /// `pod --name NAME` when a name was given.
    pub pod_command: String,
    /// `--notify`: how to tell a person who looked away.
    pub notify: notify::NotifyMode,
    /// `--inline`: draw on the terminal's own screen, not the alternate
    /// one, so that what was shown stays in its scrollback.
    pub inline: bool,
}

/// Runs the TUI until the user quits. Quitting detaches: the pod keeps
/// running. The terminal is restored on every exit path, panics included.
pub async fn run(options: AttachOptions) -> anyhow::Result<()> {
    render::preload_highlighting();
    let guard = TerminalGuard::enter(options.inline).context("cannot set up the terminal")?;
    let mut terminal =
        Terminal::new(CrosstermBackend::new(stdout())).context("cannot set up the terminal")?;
    terminal.clear().context("cannot clear the terminal")?;

    let (term_tx, term_rx) = mpsc::channel(256);
    let input = tokio::spawn(read_terminal(term_tx));
    let (conn_tx, conn_rx) = mpsc::channel(1024);
    let (out_tx, out_rx) = mpsc::channel(256);
    let remote = matches!(options.endpoint, crate::client::Endpoint::Remote(_));
    let conn = tokio::spawn(connection::run(options.endpoint, conn_tx, out_rx));

    let mut app = App::new(options.pod_name, Instant::now());
    app.set_notify(options.notify);
    app.set_remote(remote);
    app.pod_command = options.pod_command;
    app.offline_hint = true;
    let result = event_loop(&mut app, &mut terminal, term_rx, conn_rx, out_tx).await;
    input.abort();
    conn.abort();
    drop(terminal);
    drop(guard);
    result
}

async fn event_loop(
    app: &mut App,
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    mut term_rx: mpsc::Receiver<std::io::Result<TermEvent>>,
    mut conn_rx: mpsc::Receiver<ConnEvent>,
    out_tx: mpsc::Sender<Outgoing>,
) -> anyhow::Result<()> {
    let mut frame = tokio::time::interval(FRAME);
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Clipboard images, read on the blocking pool (the clipboard's owner
    // may take its time to answer).
    let (clip_tx, mut clip_rx) = mpsc::channel(1);
    loop {
        tokio::select! {
            Some(image) = clip_rx.recv() => app.on_clipboard_image(image),
            event = term_rx.recv() => match event {
                Some(Ok(event)) => app.on_terminal(event),
                Some(Err(e)) => return Err(e).context("reading the terminal failed"),
                None => return Ok(()),
            },
            event = conn_rx.recv() => match event {
                Some(event) => app.on_connection(event),
                None => anyhow::bail!("the connection task stopped"),
            },
            _ = frame.tick() => {
                app.on_tick(Instant::now());
                if app.take_dirty() {
                    terminal.draw(|f| render::draw(f, app)).context("drawing failed")?;
                }
                let alerts = app.take_alerts();
                if !alerts.is_empty() {
                    // Beside the frame, not in it: escapes a terminal acts on.
                    let mut out = stdout();
                    for alert in alerts {
                        out.write_all(alert.as_bytes()).context("writing to the terminal failed")?;
                    }
                    out.flush().context("writing to the terminal failed")?;
                }
            }
        }
        for out in app.take_outgoing() {
            if let Err(TrySendError::Full(out) | TrySendError::Closed(out)) = out_tx.try_send(out) {
                if let Outgoing::Request(request) = out {
                    app.on_connection(ConnEvent::NotSent(request));
                }
            }
        }
        if app.take_clipboard_request() {
            let tx = clip_tx.clone();
            tokio::task::spawn_blocking(move || {
                let _ = tx.blocking_send(clipboard::read_image());
            });
        }
        if app.should_quit() {
            return Ok(());
        }
    }
}

/// Reads the terminal in a task of its own, so that no `select!` can ever
/// cancel a half-read event: keys typed while deltas stream in are kept.
async fn read_terminal(tx: mpsc::Sender<std::io::Result<TermEvent>>) {
    let mut events = EventStream::new();
    while let Some(event) = events.next().await {
        let failed = event.is_err();
        if tx.send(event).await.is_err() || failed {
            break;
        }
    }
}

/// Whether the terminal is in TUI mode, so that restoring happens once
/// whichever of the guard and the panic hook gets there first.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// `--inline`: there is no alternate screen to leave.
static INLINE: AtomicBool = AtomicBool::new(false);
static PANIC_HOOK: Once = Once::new();

/// Raw mode, alternate screen, bracketed paste and mouse capture, undone on
/// drop and on panic.
struct TerminalGuard;

impl TerminalGuard {
    fn enter(inline: bool) -> std::io::Result<Self> {
        PANIC_HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        INLINE.store(inline, Ordering::SeqCst);
        let guard = TerminalGuard;
        if !inline {
            execute!(stdout(), EnterAlternateScreen)?;
        }
        execute!(
            stdout(),
            EnableBracketedPaste,
            EnableMouseCapture,
            EnableFocusChange
        )?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = execute!(
            stdout(),
            DisableFocusChange,
            DisableMouseCapture,
            DisableBracketedPaste,
            Show
        );
        if INLINE.load(Ordering::SeqCst) {
            // The last frame stays in the scrollback; the shell's prompt
            // goes below all of it, not over the middle of the screen
            // where the cursor was left.
            if let Ok((_, rows)) = crossterm::terminal::size() {
                let _ = execute!(stdout(), MoveTo(0, rows.saturating_sub(1)), Print("\r\n"));
            }
        } else {
            let _ = execute!(stdout(), LeaveAlternateScreen);
        }
        let _ = disable_raw_mode();
    }
}
