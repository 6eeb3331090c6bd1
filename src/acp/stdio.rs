//! The editor's stdin and stdout as the SDK's line transport, stdout
//! buffered.
//!
//! The SDK's own `Stdio` writes each message with a `write` and a flush of
//! its own, through a blocking thread it waits on for every line: a
//! `session/load` replaying 10,000 entries was 10,000 such round trips.
//! Here the SDK hands each line to a writer thread and goes on; the thread
//! gathers every line waiting into one buffer and flushes it when no more
//! wait — a burst leaves in a few large writes, a lone message at once.
//! The JSON-RPC itself (framing, parsing, errors) stays the SDK's.
//!
//! The same queue takes [`Output::lines`]: lines `pod acp` serialised
//! itself (a `session/load`'s replay, see [`super::replay`]), written in
//! the order they were handed over, between the SDK's own lines.

use std::io::{BufRead, BufWriter, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;

use agent_client_protocol::Lines;
use futures::channel::mpsc as async_mpsc;
use futures::{Sink, Stream};

/// The buffer the writer fills before it writes: big enough that a burst
/// of updates is a few syscalls.
const BUFFER: usize = 256 << 10;

/// What the writer is handed: one of the SDK's lines (without its `\n`),
/// a run of whole lines `pod acp` serialised itself, or the end.
enum Out {
    Line(String),
    Lines(Vec<u8>),
    /// Written after everything before it; the writer stops there (tasks
    /// that still hold an [`Output`] may outlive the connection).
    End,
}

/// The ordered output, for lines the SDK does not write.
#[derive(Clone)]
pub struct Output(mpsc::Sender<Out>);

impl Output {
    /// Queues `lines` — whole JSON-RPC messages, each ending in `\n` —
    /// after every line queued so far.
    pub fn lines(&self, lines: Vec<u8>) -> std::io::Result<()> {
        self.0.send(Out::Lines(lines)).map_err(|_| closed())
    }
}

fn closed() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "stdout is closed: the editor stopped reading",
    )
}

/// The writer thread: joined once the connection is over, so every line
/// the SDK accepted is written before `pod acp` exits.
pub struct Flusher {
    writer: JoinHandle<()>,
    end: mpsc::Sender<Out>,
}

impl Flusher {
    /// Waits until every line queued so far is written (or stdout failed).
    pub fn finish(self) {
        // A writer already gone (stdout failed) has nothing left to write.
        let _ = self.end.send(Out::End);
        if self.writer.join().is_err() {
            eprintln!("pod acp: the stdout writer panicked; the editor may miss the last messages");
        }
    }
}

type Outgoing = std::pin::Pin<Box<dyn Sink<String, Error = std::io::Error> + Send>>;
type Incoming = std::pin::Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>;

/// The transport for `connect_with`, the ordered output beside it, and
/// the writer to finish after both.
pub fn stdio() -> (Lines<Outgoing, Incoming>, Output, Flusher) {
    let (lines, waiting) = mpsc::channel::<Out>();
    let output = Output(lines.clone());
    let end = lines.clone();
    let writer = std::thread::spawn(move || write_lines(&waiting));
    let outgoing = futures::sink::unfold(lines, |lines, line: String| async move {
        lines.send(Out::Line(line)).map_err(|_| closed())?;
        Ok::<_, std::io::Error>(lines)
    });
    let (incoming, read) = async_mpsc::unbounded();
    // Detached: a read of stdin cannot be interrupted, and `pod acp` may end
    // (its pod gone) while the editor still holds stdin open.
    std::thread::spawn(move || read_lines(&incoming));
    (
        Lines::new(Box::pin(outgoing), Box::pin(read)),
        output,
        Flusher { writer, end },
    )
}

/// Writes each line as it comes, flushing whenever none is waiting, up to
/// [`Out::End`].
fn write_lines(waiting: &mpsc::Receiver<Out>) {
    let mut out = BufWriter::with_capacity(BUFFER, std::io::stdout().lock());
    while let Ok(first) = waiting.recv() {
        let mut line = Some(first);
        while let Some(next) = line {
            let ended = matches!(next, Out::End);
            if write_line(&mut out, &next).is_err() || ended {
                let _ = out.flush();
                return;
            }
            line = waiting.try_recv().ok();
        }
        if out.flush().is_err() {
            return;
        }
    }
}

fn write_line(out: &mut impl Write, line: &Out) -> std::io::Result<()> {
    match line {
        Out::Line(line) => {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")
        }
        Out::Lines(lines) => out.write_all(lines),
        Out::End => Ok(()),
    }
}

/// Reads stdin a line at a time (without its `\n` or `\r\n`) until it
/// closes or fails.
fn read_lines(incoming: &async_mpsc::UnboundedSender<std::io::Result<String>>) {
    let mut stdin = std::io::stdin().lock();
    loop {
        let mut line = String::new();
        match stdin.read_line(&mut line) {
            Ok(0) => return,
            Ok(_) => {
                if line.ends_with('\n') {
                    line.pop();
                    if line.ends_with('\r') {
                        line.pop();
                    }
                }
                if incoming.unbounded_send(Ok(line)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = incoming.unbounded_send(Err(e));
                return;
            }
        }
    }
}

/// An [`Output`] whose lines are kept, for tests: `take` gives every byte
/// queued so far, in order.
#[cfg(test)]
pub(super) fn captured() -> (Output, impl Fn() -> Vec<u8>) {
    let (lines, queued) = mpsc::channel::<Out>();
    let take = move || {
        let mut out = Vec::new();
        while let Ok(line) = queued.try_recv() {
            write_line(&mut out, &line).expect("a Vec takes every write");
        }
        out
    };
    (Output(lines), take)
}
