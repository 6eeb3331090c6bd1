//! Scenario 5b, later turns: the pod's overhead on a turn when the
//! conversation it sends is already 100 KB, 500 KB or 2 MB, against the same
//! overhead on an empty session, all in one run. Every model call sends the
//! whole conversation, so what grows here is the pod's work of building and
//! serialising the request (the bytes on the wire are the model server's
//! time, and the baseline sends the same bytes).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::sse::{Plan, SseServer};
use crate::turn::direct_ttfb;
use crate::util::{median, ms, realistic_entry, PodProcess, Row};
use crate::Config;

/// A short answer, so the conversation barely grows from turn to turn.
const PLAN: Plan = Plan {
    think: Duration::from_millis(10),
    tokens: 20,
    interval: None,
};

/// Context sizes measured, in bytes of log; 0 is the reference.
const SIZES: [usize; 4] = [0, 100 << 10, 500 << 10, 2 << 20];

pub fn run(config: &Config) -> anyhow::Result<Vec<Row>> {
    let reps = if config.quick { 7 } else { 21 };
    let sse = SseServer::start(PLAN)?;
    let address = sse.address().to_owned();
    // Every size's pod is up at once and each repetition takes a turn on
    // each in turn, so that whatever else the machine does at a moment
    // weighs on every size alike; the growth is taken per repetition.
    let mut pods = Vec::new();
    for size in SIZES {
        let dir = tempfile::tempdir_in(&config.tmp)?;
        // With 400-byte bodies, an entry adds ~320 bytes to the request.
        let entries = size / 320;
        crate::util::write_session(
            &dir.path().join("data"),
            (0..entries.next_multiple_of(5)).map(|i| realistic_entry(i, 400)),
        )?;
        let args = sse.pod_args();
        let mut pod = PodProcess::spawn(dir.path(), &args)?;
        pod.wait_listening(Instant::now())?;
        let mut client = Client::connect(&pod)?;
        // The first turn flattens the session's inputs once; later turns
        // reuse that, as a long-running pod does.
        client.turn()?;
        pods.push((dir, pod, client));
    }
    let mut overheads = vec![Vec::new(); SIZES.len()];
    let mut bodies = vec![0; SIZES.len()];
    for _ in 0..reps {
        for (i, (_, _, client)) in pods.iter_mut().enumerate() {
            let via_pod = ms(client.turn()?);
            let body = sse.last_body();
            bodies[i] = body.len();
            overheads[i].push(via_pod - ms(direct_ttfb(&address, &body)?));
        }
    }
    let empty = median(&overheads[0]);
    let growths: Vec<f64> = overheads
        .iter()
        .map(|o| {
            let per_rep: Vec<f64> = o.iter().zip(&overheads[0]).map(|(a, b)| a - b).collect();
            median(&per_rep)
        })
        .collect();
    let row = |i: usize, scenario: &'static str, bar: &'static str, max: f64| {
        let (body, overhead, growth) = (bodies[i], median(&overheads[i]), growths[i]);
        Row::at_most(
            scenario,
            format!("{empty:.2} ms overhead on an empty session"),
            format!(
                "{overhead:.2} ms with a {:.0} KB request: +{growth:.2} ms",
                body as f64 / 1024.0
            ),
            growth / max,
            bar,
            1.0,
        )
    };
    Ok(vec![
        row(
            1,
            "5b. later turn at 100 KB of context: overhead growth",
            "≤ 1× (0.5 ms)",
            0.5,
        ),
        row(
            2,
            "5b. later turn at 500 KB of context: overhead growth",
            "≤ 1× (0.5 ms)",
            0.5,
        ),
        row(
            3,
            "5b. later turn at 2 MB of context: overhead growth",
            "≤ 1× (2 ms)",
            2.0,
        ),
    ])
}

/// One attached client that runs turns.
pub struct Client {
    writer: UnixStream,
    reader: BufReader<UnixStream>,
    line: Vec<u8>,
}

impl Client {
    pub fn connect(pod: &PodProcess) -> anyhow::Result<Client> {
        let stream = UnixStream::connect(&pod.socket)?;
        let writer = stream.try_clone()?;
        let mut reader = BufReader::with_capacity(1 << 20, stream);
        let mut line = Vec::new();
        reader.read_until(b'\n', &mut line)?;
        Ok(Client {
            writer,
            reader,
            line,
        })
    }

    /// Time from writing `run` to reading the turn's first `text_delta`;
    /// returns once the turn has ended.
    fn turn(&mut self) -> anyhow::Result<Duration> {
        self.say("go")
    }

    /// [`Client::turn`] with `text` as the message.
    pub fn say(&mut self, text: &str) -> anyhow::Result<Duration> {
        let t = Instant::now();
        let mut run =
            serde_json::json!({"type":"run","segments":[{"type":"text","text":text}]}).to_string();
        run.push('\n');
        self.writer.write_all(run.as_bytes())?;
        let mut first = None;
        loop {
            self.line.clear();
            if self.reader.read_until(b'\n', &mut self.line)? == 0 {
                bail!("the pod closed the connection mid-turn");
            }
            if first.is_none() && self.line.starts_with(b"{\"type\":\"text_delta\"") {
                first = Some(t.elapsed());
            }
            if self.line.starts_with(b"{\"type\":\"entry\"")
                && crate::sse::find(&self.line, b"\"kind\":\"turn_end\"").is_some()
            {
                break;
            }
        }
        first.ok_or_else(|| anyhow::anyhow!("a turn without a text_delta"))
    }
}
