//! The status bar: who we talk to, what it is doing, and whether we are
//! connected at all.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use std::time::Duration;

use super::blocks::short_duration;
use crate::protocol::{ApprovalMode, PodState};
use crate::tui::app::App;
use crate::tui::connection::ConnectionState;
use crate::tui::conversation::short_id;

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const BAR: Style = Style::new().bg(Color::DarkGray).fg(Color::White);
const SEP: &str = " │ ";

/// Parts in order of importance, since a narrow terminal cuts the end off:
/// a hint the user needs now, what the pod is doing (and for how long),
/// whether we are connected, the approval mode, how full the context is,
/// then the session, the model and token usage.
pub fn status_line(app: &App) -> Line<'static> {
    let mut spans = vec![Span::styled(
        format!(
            " {}",
            app.greeting.as_ref().map_or(&app.pod_name, |g| &g.pod)
        ),
        BAR.add_modifier(Modifier::BOLD),
    )];
    let mut part = |text: String, style: Style| {
        spans.push(Span::styled(SEP, BAR));
        spans.push(Span::styled(text, style));
    };
    if let Some(parent) = app.viewing.last() {
        part(
            format!("child of {parent} · /agents goes back"),
            BAR.fg(Color::LightMagenta),
        );
    }
    if let Some(flash) = &app.flash {
        part(flash.clone(), BAR.fg(Color::LightYellow));
    }
    if let Some(status) = &app.status {
        let spin = SPINNER[app.spinner % SPINNER.len()];
        let mut state = match status.state {
            PodState::Idle => "idle".to_owned(),
            PodState::Running => format!("{spin} running"),
            PodState::Paused => "paused".to_owned(),
            PodState::Compacting => format!("{spin} compacting"),
            PodState::Waiting => "waiting for approval".to_owned(),
            PodState::Unknown => "…".to_owned(),
        };
        let started = app.conversation.turn_started();
        if let (false, Some(started)) = (status.state == PodState::Idle, started) {
            let secs = app.now.saturating_duration_since(started).as_secs();
            state.push_str(&format!(" {}", elapsed(secs)));
        }
        if status.queued > 0 {
            state.push_str(&format!(" ({} queued)", status.queued));
        }
        if status.state == PodState::Paused {
            state.push_str(" · Ctrl+P or /resume goes on");
        }
        let style = match status.state {
            PodState::Idle => BAR,
            _ => BAR.fg(Color::Yellow),
        };
        part(state, style);
        // Background jobs keep running after their turn: say so (`/jobs` lists them).
        match status.jobs {
            0 => {}
            1 => part("1 job running".into(), BAR.fg(Color::Cyan)),
            n => part(format!("{n} jobs running"), BAR.fg(Color::Cyan)),
        }
    }
    let (text, color) = match app.connection {
        ConnectionState::Connecting => ("connecting…".to_owned(), Color::Yellow),
        ConnectionState::WaitingForSnapshot => ("waiting for the pod…".to_owned(), Color::Yellow),
        ConnectionState::Connected => ("● connected".to_owned(), Color::Green),
        ConnectionState::Retrying { at, was_connected } => {
            let secs = at.saturating_duration_since(app.now).as_secs_f64().ceil();
            let text = if was_connected {
                format!("reconnecting in {secs:.0}s")
            } else {
                format!("no pod · retry in {secs:.0}s")
            };
            (text, Color::LightRed)
        }
    };
    part(text, BAR.fg(color));
    if app.connection == ConnectionState::Connected {
        let mode = app.approval_mode();
        let style = match mode {
            ApprovalMode::Auto => BAR.fg(Color::LightYellow),
            _ => BAR,
        };
        part(format!("approval: {}", mode.as_str()), style);
    }
    if let Some(status) = app.status.as_ref().filter(|s| s.context_window > 0) {
        let (text, level) = gauge(status.context_tokens, status.context_window);
        let style = match level {
            Fill::Fine => BAR,
            Fill::Near => BAR.fg(Color::Yellow),
            Fill::Full => BAR.fg(Color::LightRed).add_modifier(Modifier::BOLD),
        };
        part(text, style);
    }
    if let Some(id) = app.conversation.session_id() {
        part(format!("session {}", short_id(&id)), BAR);
    }
    if app.greeting.is_some() {
        part(app.current_model(), BAR);
    }
    if let Some(u) = &app.usage {
        part(crate::protocol::tokens::usage_line(u), BAR);
    }
    Line::from(spans).style(BAR)
}

/// Running time in whole seconds: `12s`, `2m 05s`.
fn elapsed(secs: u64) -> String {
    if secs < 60 {
        format!("{secs}s")
    } else {
        short_duration(Duration::from_secs(secs))
    }
}

/// How close the context is to the model's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    Fine,
    /// Past 70%: compaction is near (`--compact-at` defaults near there).
    Near,
    /// Past 80%.
    Full,
}

/// `43% of 128k`, and how worrying that is.
fn gauge(used: u64, window: u64) -> (String, Fill) {
    let percent = used.saturating_mul(100) / window.max(1);
    let level = match percent {
        0..70 => Fill::Fine,
        70..80 => Fill::Near,
        _ => Fill::Full,
    };
    (format!("{percent}% of {}", window_size(window)), level)
}

/// A context window as people name it: `128k`, `1M`, `8192`.
fn window_size(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..1_000_000 => format!("{}k", n / 1000),
        _ if n.is_multiple_of(1_000_000) => format!("{}M", n / 1_000_000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_warns_as_the_context_fills() {
        assert_eq!(gauge(55_040, 128_000), ("43% of 128k".into(), Fill::Fine));
        assert_eq!(gauge(92_000, 128_000).1, Fill::Near);
        assert_eq!(gauge(110_000, 128_000).1, Fill::Full);
        assert_eq!(gauge(1, 1_000_000).0, "0% of 1M");
        assert_eq!(gauge(1, 8192).0, "0% of 8192");
    }

    #[test]
    fn token_counts_are_short() {
        assert_eq!(crate::protocol::tokens::short(950), "950");
        assert_eq!(crate::protocol::tokens::short(12_345), "12.3k");
        assert_eq!(crate::protocol::tokens::short(1_200_000), "1.2M");
    }
}
