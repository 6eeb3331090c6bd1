//! `pod sessions`: the sessions of this workspace (`--all`: of the data
//! directory), newest activity first. Reads the files (through the listing
//! index, as `list_sessions` does), so it works whether or not a pod is
//! running.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use super::Paths;
use crate::protocol::{branch_kind, repeats_title, session_tree, SessionInfo};
use crate::store::{index, pointer};

pub fn run(paths: &Paths, json: bool, all: bool) -> anyhow::Result<ExitCode> {
    let current = pointer::read(&pointer::path(&paths.data_dir.join("pods"), &paths.name))?
        .map(|p| p.session_id);
    let sessions_dir = paths.data_dir.join("sessions");
    let sessions = index::list(&sessions_dir, current).map_err(|e| {
        anyhow::anyhow!(
            "cannot list the sessions in {}: {e}",
            sessions_dir.display()
        )
    })?;
    let total = sessions.len();
    let sessions: Vec<SessionInfo> = if all {
        sessions
    } else {
        let here = paths.workspace.display().to_string();
        // The pod's current session is this workspace's even when its log
        // is older than the workspace field.
        sessions
            .into_iter()
            .filter(|s| s.current || s.workspace.as_deref() == Some(here.as_str()))
            .collect()
    };
    if json {
        println!("{}", serde_json::to_string(&sessions)?);
        return Ok(ExitCode::SUCCESS);
    }
    if sessions.is_empty() {
        match total {
            0 => eprintln!("no sessions in {}", sessions_dir.display()),
            n => eprintln!(
                "no sessions of the workspace {} ({n} of other workspaces: `pod sessions --all` \
                 lists them)",
                paths.workspace.display()
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", table(&sessions, all, SystemTime::now()));
    Ok(ExitCode::SUCCESS)
}

/// One line per session under a header; `*` marks the pod's current one.
/// A rewind or fork sits under the session it came from (the tree every
/// client draws), marked as such, its title shown only when it differs.
/// `workspaces` adds the column `--all` needs.
fn table(sessions: &[SessionInfo], workspaces: bool, now: SystemTime) -> String {
    let place = |s: &SessionInfo| {
        crate::safe_text::line(s.workspace.as_deref().unwrap_or("(unknown)")).into_owned()
    };
    let from = |s: &SessionInfo| match (&s.forked_from, s.compacted_from) {
        (Some(fork), _) => {
            let kind = branch_kind(s).unwrap_or("fork");
            match fork.seq {
                Some(seq) => format!("{kind} of {}@{seq}", short(&fork.session_id)),
                None => format!("{kind} of {}", short(&fork.session_id)),
            }
        }
        (None, Some(from)) => format!("compacted {}", short(&from)),
        (None, None) => String::new(),
    };
    let widest = |text: &dyn Fn(&SessionInfo) -> String, header: &str| {
        sessions
            .iter()
            .map(|s| text(s).chars().count())
            .max()
            .unwrap_or(0)
            .max(header.len())
    };
    let from_width = widest(&from, "FROM");
    let width = widest(&place, "WORKSPACE");
    let mut out = format!(
        "  {:<8}  {:<16}  {:<13}  {:>7}  {:<from_width$}  ",
        "ID", "CREATED (UTC)", "LAST ACTIVITY", "ENTRIES", "FROM"
    );
    if workspaces {
        out.push_str(&format!("{:<width$}  ", "WORKSPACE"));
    }
    out.push_str("TITLE\n");
    for row in session_tree(sessions) {
        let s = &sessions[row.index];
        out.push_str(&format!(
            "{} {:<8}  {:<16}  {:<13}  {:>7}  {:<from_width$}  ",
            if s.current { '*' } else { ' ' },
            short(&s.session_id),
            minutes(&s.created_at),
            ago(&s.updated_at, now),
            s.entries,
            from(s),
        ));
        if workspaces {
            out.push_str(&format!("{:<width$}  ", place(s)));
        }
        let title = s
            .shown_title(sessions)
            .unwrap_or_else(|| "(no input yet)".into());
        let title = match row.parent.and(branch_kind(s)) {
            Some(kind) if repeats_title(sessions, &row) => format!("({kind})"),
            Some(kind) => format!("({kind}) {title}"),
            None => title,
        };
        out.push_str(&format!(
            "{}{}\n",
            row.guide,
            crate::safe_text::line(&title)
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

    fn id(s: &str) -> uuid::Uuid {
        uuid::Uuid::parse_str(s).unwrap()
    }

    fn fork_of(session: &str, seq: u64) -> Option<ForkPoint> {
        Some(ForkPoint {
            session_id: id(session),
            seq: Some(seq),
        })
    }

    #[test]
    fn table_marks_the_current_session_and_the_history() {
        let now = humantime::parse_rfc3339("2026-11-30T15:00:00Z").unwrap();
        let sessions = [
            SessionInfo {
                session_id: id("8bd5aaaa-0000-4000-8000-000000000000"),
                created_at: "2026-11-30T12:42:07.123Z".into(),
                updated_at: "2026-11-30T12:00:00.000Z".into(),
                entries: 12,
                title: Some("fix the parser".into()),
                compacted_from: None,
                forked_from: fork_of("1a2b3c4d-0000-4000-8000-000000000000", 7),
                current: true,
                workspace: Some("/home/me/calc".into()),
                rewound: false,
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
                workspace: None,
                rewound: false,
            },
        ];
        let wide = table(&sessions, true, now);
        assert!(
            wide.lines()
                .next()
                .unwrap()
                .contains("WORKSPACE      TITLE"),
            "{wide}"
        );
        assert!(
            wide.contains("/home/me/calc  └ (fork) fix the parser"),
            "{wide}"
        );
        assert!(wide.contains("(unknown)      (no input yet)"), "{wide}");
        let table = table(&sessions, false, now);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("  ID"), "{table}");
        assert!(
            lines[1].starts_with("  1a2b3c4d  2026-10-01 09:00  2026-10-02"),
            "{table}"
        );
        assert!(lines[1].contains("compacted 0f0f0f0f"), "{table}");
        assert!(
            lines[2].starts_with("* 8bd5aaaa  2026-11-30 12:42  3h ago"),
            "{table}"
        );
        assert!(lines[2].contains("fork of 1a2b3c4d@7"), "{table}");
        assert!(lines[2].ends_with("└ (fork) fix the parser"), "{table}");
        assert_eq!(ago("2026-11-30T14:59:58Z", now), "2s ago");
        assert_eq!(ago("2026-11-30T14:55:00Z", now), "5m ago");
        assert_eq!(ago("2026-11-28T15:00:00Z", now), "2d ago");
    }

    /// Three undos of one conversation read as one conversation and its
    /// branches: each rewind under the session it rewound, marked, its
    /// title (the same first message) not repeated.
    #[test]
    fn rewinds_sit_under_the_session_they_came_from() {
        let now = humantime::parse_rfc3339("2026-11-30T15:00:00Z").unwrap();
        let ids = [
            "a0000000-0000-4000-8000-000000000000",
            "b0000000-0000-4000-8000-000000000000",
            "c0000000-0000-4000-8000-000000000000",
            "d0000000-0000-4000-8000-000000000000",
        ];
        let session = |n: usize, from: Option<(usize, u64)>, rewound: bool| SessionInfo {
            session_id: id(ids[n]),
            created_at: format!("2026-11-30T1{n}:00:00.000Z"),
            updated_at: format!("2026-11-30T1{n}:30:00.000Z"),
            entries: 9,
            title: Some("fix the parser".into()),
            compacted_from: None,
            forked_from: from.and_then(|(f, seq)| fork_of(ids[f], seq)),
            current: n == 3,
            workspace: None,
            rewound,
        };
        // Newest first: d (a rewind of c), c (a fork of a), b (a rewind
        // of a), a.
        let mut forked = session(2, Some((0, 20)), false);
        forked.title = Some("try another way".into());
        let mut rewound = session(3, Some((2, 5)), true);
        rewound.title = forked.title.clone();
        let sessions = [
            rewound,
            forked,
            session(1, Some((0, 7)), true),
            session(0, None, false),
        ];
        let table = table(&sessions, false, now);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(
            lines[0].ends_with("  FROM                  TITLE"),
            "{table}"
        );
        assert!(lines[1].starts_with("  a0000000"), "{table}");
        assert!(lines[1].ends_with("  fix the parser"), "{table}");
        assert!(lines[2].starts_with("  c0000000"), "{table}");
        assert!(lines[2].contains("  fork of a0000000@20  "), "{table}");
        assert!(lines[2].ends_with("  ├ (fork) try another way"), "{table}");
        assert!(lines[3].starts_with("* d0000000"), "{table}");
        assert!(lines[3].contains("  rewind of c0000000@5  "), "{table}");
        assert!(lines[3].ends_with("  │ └ (rewind)"), "{table}");
        assert!(lines[4].starts_with("  b0000000"), "{table}");
        assert!(lines[4].contains("  rewind of a0000000@7  "), "{table}");
        assert!(lines[4].ends_with("  └ (rewind)"), "{table}");
    }
}
