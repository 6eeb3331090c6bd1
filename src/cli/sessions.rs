//! `pod sessions`: the sessions of the data directory, newest activity
//! first. Reads the files (through the listing index, as `list_sessions`
//! does), so it works whether or not a pod is running.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use super::Paths;
use crate::protocol::SessionInfo;
use crate::store::{index, pointer};

pub fn run(name: &str, paths: &Paths, json: bool) -> anyhow::Result<ExitCode> {
    let current =
        pointer::read(&pointer::path(&paths.data_dir.join("pods"), name))?.map(|p| p.session_id);
    let sessions_dir = paths.data_dir.join("sessions");
    let sessions = index::list(&sessions_dir, current).map_err(|e| {
        anyhow::anyhow!(
            "cannot list the sessions in {}: {e}",
            sessions_dir.display()
        )
    })?;
    if json {
        println!("{}", serde_json::to_string(&sessions)?);
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        eprintln!("no sessions in {}", sessions_dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", table(&sessions, SystemTime::now()));
    Ok(ExitCode::SUCCESS)
}

/// One line per session under a header; `*` marks the pod's current one.
fn table(sessions: &[SessionInfo], now: SystemTime) -> String {
    let mut out = format!(
        "  {:<8}  {:<16}  {:<13}  {:>7}  {:<20}  TITLE\n",
        "ID", "CREATED (UTC)", "LAST ACTIVITY", "ENTRIES", "FROM"
    );
    for s in sessions {
        let from = match (&s.forked_from, s.compacted_from) {
            (Some(fork), _) => match fork.seq {
                Some(seq) => format!("fork of {}@{seq}", short(&fork.session_id)),
                None => format!("fork of {}", short(&fork.session_id)),
            },
            (None, Some(from)) => format!("compacted {}", short(&from)),
            (None, None) => String::new(),
        };
        out.push_str(&format!(
            "{} {:<8}  {:<16}  {:<13}  {:>7}  {:<20}  {}\n",
            if s.current { '*' } else { ' ' },
            short(&s.session_id),
            minutes(&s.created_at),
            ago(&s.updated_at, now),
            s.entries,
            from,
            crate::safe_text::line(
                s.shown_title(sessions)
                    .as_deref()
                    .unwrap_or("(no input yet)")
            ),
        ));
    }
    out
}

/// The 8-character short id every client shows.
fn short(id: &uuid::Uuid) -> String {
    id.to_string()[..8].to_owned()
}

/// `2026-11-30T12:42:07.123Z` → `2026-11-30 12:42`.
fn minutes(rfc3339: &str) -> String {
    match humantime::parse_rfc3339_weak(rfc3339) {
        Ok(t) => humantime::format_rfc3339_seconds(t).to_string()[..16].replace('T', " "),
        Err(_) => rfc3339.to_owned(),
    }
}

/// How long ago, in the largest whole unit: `42s ago`, `5m ago`, `3h ago`,
/// `2d ago`; a date beyond a month.
fn ago(rfc3339: &str, now: SystemTime) -> String {
    let Ok(then) = humantime::parse_rfc3339_weak(rfc3339) else {
        return rfc3339.to_owned();
    };
    let secs = now.duration_since(then).unwrap_or(Duration::ZERO).as_secs();
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3_600 => format!("{}m ago", secs / 60),
        3_600..86_400 => format!("{}h ago", secs / 3_600),
        86_400..2_592_000 => format!("{}d ago", secs / 86_400),
        _ => minutes(rfc3339)[..10].to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ForkPoint;

    #[test]
    fn table_marks_the_current_session_and_the_history() {
        let now = humantime::parse_rfc3339("2026-11-30T15:00:00Z").unwrap();
        let id = |s: &str| uuid::Uuid::parse_str(s).unwrap();
        let sessions = [
            SessionInfo {
                session_id: id("8bd5aaaa-0000-4000-8000-000000000000"),
                created_at: "2026-11-30T12:42:07.123Z".into(),
                updated_at: "2026-11-30T12:00:00.000Z".into(),
                entries: 12,
                title: Some("fix the parser".into()),
                compacted_from: None,
                forked_from: Some(ForkPoint {
                    session_id: id("1a2b3c4d-0000-4000-8000-000000000000"),
                    seq: Some(7),
                }),
                current: true,
            },
            SessionInfo {
                session_id: id("1a2b3c4d-0000-4000-8000-000000000000"),
                created_at: "2026-10-01T09:00:00.000Z".into(),
                updated_at: "2026-10-02T09:00:00.000Z".into(),
                entries: 40,
                title: None,
                compacted_from: Some(id("0f0f0f0f-0000-4000-8000-000000000000")),
                forked_from: None,
                current: false,
            },
        ];
        let table = table(&sessions, now);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("  ID"), "{table}");
        assert!(
            lines[1].starts_with("* 8bd5aaaa  2026-11-30 12:42  3h ago"),
            "{table}"
        );
        assert!(lines[1].contains("fork of 1a2b3c4d@7"), "{table}");
        assert!(lines[1].ends_with("fix the parser"), "{table}");
        assert!(
            lines[2].starts_with("  1a2b3c4d  2026-10-01 09:00  2026-10-02"),
            "{table}"
        );
        assert!(lines[2].contains("compacted 0f0f0f0f"), "{table}");
        assert_eq!(ago("2026-11-30T14:59:58Z", now), "2s ago");
        assert_eq!(ago("2026-11-30T14:55:00Z", now), "5m ago");
        assert_eq!(ago("2026-11-28T15:00:00Z", now), "2d ago");
    }
}
