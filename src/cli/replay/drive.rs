//! Driving the replay's pod: each recorded input sent again, approvals
//! answered as recorded, each tool result compared — and the report.

use std::collections::{HashMap, VecDeque};
use std::io::Write as _;

use uuid::Uuid;

use super::recording::{Recorded, Recording};
use super::CLIENT;
use crate::client::{EventStream, RequestSink};
use crate::protocol::{AssistantItem, Event, LogEntry, Method, Request, TurnEndReason};
use crate::safe_text;

/// A tool result that differs from the recorded one.
pub(super) struct Drift {
    /// The recorded result's seq (null: the replay made a call the
    /// recording did not have).
    seq: Option<u64>,
    replayed_seq: Option<u64>,
    call_id: String,
    tool: String,
    recorded: String,
    replayed: String,
}

pub(super) struct Report {
    pub(super) session_id: Uuid,
    pub(super) turns: usize,
    pub(super) compared: usize,
    pub(super) drifts: Vec<Drift>,
}

impl Report {
    pub(super) fn print(&self, recorded_id: Uuid, recording: &Recording) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        let upto = recording
            .cut_at
            .map(|n| format!(" up to seq {n}"))
            .unwrap_or_default();
        writeln!(
            out,
            "replayed session {recorded_id}{upto} as {}: {} turn(s), {} tool result(s) compared",
            self.session_id, self.turns, self.compared
        )?;
        for drift in &self.drifts {
            let at = match (drift.seq, drift.replayed_seq) {
                (Some(seq), Some(replayed)) => format!("seq {seq} (replayed as seq {replayed})"),
                (Some(seq), None) => format!("seq {seq} (not replayed)"),
                (None, Some(replayed)) => format!("replayed seq {replayed} (not recorded)"),
                (None, None) => "?".into(),
            };
            writeln!(
                out,
                "drift at {at}: {} (call {})",
                safe_text::line(&drift.tool),
                safe_text::line(&drift.call_id)
            )?;
            writeln!(out, "  recorded: {}", safe_text::line(&drift.recorded))?;
            writeln!(out, "  replayed: {}", safe_text::line(&drift.replayed))?;
        }
        match self.drifts.len() {
            0 => writeln!(out, "no drift"),
            1 => writeln!(out, "1 drift"),
            n => writeln!(out, "{n} drifts"),
        }
    }
}

/// The first line where two outputs differ, from each (`(end)` past the
/// last line of the shorter one).
pub(super) fn first_difference(recorded: &str, replayed: &str) -> (String, String) {
    let (mut a, mut b) = (recorded.split('\n'), replayed.split('\n'));
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (None, None) => return ("(same text)".into(), "(same text)".into()),
            (x, y) => {
                return (
                    x.unwrap_or("(end)").to_owned(),
                    y.unwrap_or("(end)").to_owned(),
                )
            }
        }
    }
}

/// Sends each recorded input, answers approvals as recorded, compares
/// every tool result; `None` when the pod closed before its snapshot.
pub(super) async fn drive(
    pod: &crate::pod::embedded::EmbeddedPod,
    recording: &Recording,
) -> anyhow::Result<Option<Report>> {
    let (mut events, mut sink) = crate::client::over(pod.connect()?)?;
    let session_id = match events.next().await {
        Some(Ok(Event::Snapshot(snapshot))) => snapshot.session_id,
        Some(Ok(_)) => anyhow::bail!("the replay's pod did not start with a snapshot"),
        Some(Err(e)) => return Err(e.into()),
        None => return Ok(None),
    };
    sink.send(&Request::new(Method::Hello {
        client: CLIENT.into(),
    }))
    .await?;
    let mut answers = Recording {
        decisions: recording.decisions.clone(),
        results: recording.results.clone(),
        ..Recording::default()
    };
    let mut expected = recording.results.clone();
    let mut report = Report {
        session_id,
        turns: 0,
        compared: 0,
        drifts: Vec::new(),
    };
    for (i, segments) in recording.turns.iter().enumerate() {
        let request_id = format!("replay-{i}");
        sink.send(&Request::with_id(
            Method::Run {
                segments: segments.clone(),
            },
            request_id.clone(),
        ))
        .await?;
        let ended = turn(
            &mut events,
            &mut sink,
            &request_id,
            &mut answers,
            &mut expected,
            &mut report,
        )
        .await?;
        report.turns += 1;
        if !ended {
            break;
        }
    }
    // Recorded results the replay never produced.
    let mut missing: Vec<(String, Recorded)> = expected
        .into_iter()
        .flat_map(|(call_id, left)| left.into_iter().map(move |r| (call_id.clone(), r)))
        .collect();
    missing.sort_by_key(|(_, r)| r.seq);
    for (call_id, recorded) in missing {
        report.drifts.push(Drift {
            seq: Some(recorded.seq),
            replayed_seq: None,
            call_id,
            tool: recorded.tool,
            recorded: first_difference(&recorded.output, "").0,
            replayed: "(no result: the replay did not make this call)".into(),
        });
    }
    report.drifts.sort_by_key(|d| d.seq.unwrap_or(u64::MAX));
    Ok(Some(report))
}

/// Follows one replayed turn to its `turn_end`; false when the pod went
/// away or refused the input first.
async fn turn(
    events: &mut EventStream,
    sink: &mut RequestSink,
    request_id: &str,
    answers: &mut Recording,
    expected: &mut HashMap<String, VecDeque<Recorded>>,
    report: &mut Report,
) -> anyhow::Result<bool> {
    let mut ours = false;
    let mut tools: HashMap<String, String> = HashMap::new();
    loop {
        let event = match events.next().await {
            Some(Ok(event)) => event,
            Some(Err(e)) => {
                eprintln!("pod: the connection to the replay's pod failed: {e}");
                return Ok(false);
            }
            None => {
                eprintln!("pod: the replay's pod closed the connection mid-turn");
                return Ok(false);
            }
        };
        match event {
            Event::Error {
                request_id: Some(id),
                message,
                ..
            } if id == request_id => {
                eprintln!(
                    "pod: the replay's pod refused a recorded input: {}",
                    safe_text::line(&message)
                );
                return Ok(false);
            }
            Event::TurnStart {
                request_id: Some(id),
                ..
            } if id == request_id => ours = true,
            Event::Entry { seq, entry, .. } if ours => match entry {
                LogEntry::AssistantItems { items } => {
                    for item in items {
                        if let AssistantItem::ToolCall { call_id, name, .. } = item {
                            tools.insert(call_id, name);
                        }
                    }
                }
                LogEntry::ApprovalRequest { call_id, .. } => {
                    let (decision, message) = answers.answer(&call_id);
                    sink.send(&Request::new(Method::Approve {
                        call_id,
                        decision,
                        scope: None,
                        message,
                    }))
                    .await?;
                }
                LogEntry::ToolResults { results } => {
                    for result in results {
                        report.compared += 1;
                        let recorded = expected
                            .get_mut(&result.call_id)
                            .and_then(VecDeque::pop_front);
                        let tool = tools.get(&result.call_id).cloned().unwrap_or_default();
                        match recorded {
                            Some(r)
                                if r.output == result.output && r.is_error == result.is_error => {}
                            Some(r) => {
                                let (recorded_line, replayed_line) =
                                    first_difference(&r.output, &result.output);
                                report.drifts.push(Drift {
                                    seq: Some(r.seq),
                                    replayed_seq: Some(seq),
                                    call_id: result.call_id,
                                    tool: r.tool,
                                    recorded: recorded_line,
                                    replayed: replayed_line,
                                });
                            }
                            None => report.drifts.push(Drift {
                                seq: None,
                                replayed_seq: Some(seq),
                                call_id: result.call_id,
                                tool,
                                recorded: "(no result: the recording did not make this call)"
                                    .into(),
                                replayed: first_difference("", &result.output).1,
                            }),
                        }
                    }
                }
                LogEntry::TurnEnd { reason, .. } => {
                    if reason == TurnEndReason::Interrupted {
                        return Ok(false);
                    }
                    return Ok(true);
                }
                _ => {}
            },
            Event::Shutdown { .. } => return Ok(false),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_differing_line_of_each_is_shown() {
        assert_eq!(
            first_difference("a\nb\nc", "a\nB\nc"),
            ("b".into(), "B".into())
        );
        assert_eq!(first_difference("a\nb", "a"), ("b".into(), "(end)".into()));
    }
}
