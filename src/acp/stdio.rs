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

use std::io::{BufRead, BufWriter, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;

use agent_client_protocol::Lines;
use futures::channel::mpsc as async_mpsc;
use futures::{Sink, Stream};

/// The buffer the writer fills before it writes: big enough that a burst
/// of updates is a few syscalls.
const BUFFER: usize = 256 << 10;

/// The writer thread: joined once the connection is over, so every line
/// the SDK accepted is written before `pod acp` exits.
pub struct Flusher(JoinHandle<()>);

impl Flusher {
    /// Waits until every line is written (or stdout failed).
    pub fn finish(self) {
        if self.0.join().is_err() {
            eprintln!("pod acp: the stdout writer panicked; the editor may miss the last messages");
        }
    }
}

type Outgoing = std::pin::Pin<Box<dyn Sink<String, Error = std::io::Error> + Send>>;
type Incoming = std::pin::Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>;

/// The transport for `connect_with`, and its writer to finish after it.
pub fn stdio() -> (Lines<Outgoing, Incoming>, Flusher) {
    let (lines, waiting) = mpsc::channel::<String>();
    let writer = std::thread::spawn(move || write_lines(&waiting));
    let outgoing = futures::sink::unfold(lines, |lines, line: String| async move {
        lines.send(line).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "stdout is closed: the editor stopped reading",
            )
        })?;
        Ok::<_, std::io::Error>(lines)
    });
    let (incoming, read) = async_mpsc::unbounded();
    // Detached: a read of stdin cannot be interrupted, and `pod acp` may end
    // (its pod gone) while the editor still holds stdin open.
    std::thread::spawn(move || read_lines(&incoming));
    (
        Lines::new(Box::pin(outgoing), Box::pin(read)),
        Flusher(writer),
    )
}

/// Writes each line as it comes, flushing whenever none is waiting.
fn write_lines(waiting: &mpsc::Receiver<String>) {
    let mut out = BufWriter::with_capacity(BUFFER, std::io::stdout().lock());
    while let Ok(first) = waiting.recv() {
        let mut line = Some(first);
        while let Some(next) = line {
            if write_line(&mut out, &next).is_err() {
                return;
            }
            line = waiting.try_recv().ok();
        }
        if out.flush().is_err() {
            return;
        }
    }
}

fn write_line(out: &mut impl Write, line: &str) -> std::io::Result<()> {
    out.write_all(line.as_bytes())?;
    out.write_all(b"\n")
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
