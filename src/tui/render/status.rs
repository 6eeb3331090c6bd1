//! The status bar: who we talk to, what it is doing, and whether we are
//! connected at all.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::protocol::PodState;
use crate::tui::app::App;
use crate::tui::connection::ConnectionState;
use crate::tui::conversation::short_id;

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const BAR: Style = Style::new().bg(Color::DarkGray).fg(Color::White);
const SEP: &str = " │ ";

/// Token counts the way people read them: `950`, `12.3k`, `1.2M`.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Parts in order of importance, since a narrow terminal cuts the end off:
/// a hint the user needs now, what the pod is doing, whether we are
/// connected, then the session, the model and token usage.
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
    if let Some(flash) = &app.flash {
        part(flash.clone(), BAR.fg(Color::LightYellow));
    }
    if let Some(status) = &app.status {
        let spin = SPINNER[app.spinner % SPINNER.len()];
        let state = match status.state {
            PodState::Idle => "idle".to_owned(),
            PodState::Running => format!("{spin} running"),
            PodState::Paused => "paused".to_owned(),
            PodState::Compacting => format!("{spin} compacting"),
            PodState::Waiting => "waiting for approval".to_owned(),
            PodState::Unknown => "…".to_owned(),
        };
        let queued = if status.queued > 0 {
            format!(" ({} queued)", status.queued)
        } else {
            String::new()
        };
        let style = match status.state {
            PodState::Idle => BAR,
            _ => BAR.fg(Color::Yellow),
        };
        part(format!("{state}{queued}"), style);
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
                format!("offline · retry in {secs:.0}s")
            };
            (text, Color::LightRed)
        }
    };
    part(text, BAR.fg(color));
    if let Some(id) = app.conversation.session_id() {
        part(format!("session {}", short_id(&id)), BAR);
    }
    if let Some(g) = &app.greeting {
        part(format!("{}/{}", g.provider, g.model), BAR);
    }
    if let Some(u) = app.usage {
        let text = format!(
            "{} in · {} out",
            tokens(u.input_tokens),
            tokens(u.output_tokens)
        );
        part(text, BAR);
    }
    Line::from(spans).style(BAR)
}

#[cfg(test)]
mod tests {
    use super::tokens;

    #[test]
    fn token_counts_are_short() {
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(12_345), "12.3k");
        assert_eq!(tokens(1_200_000), "1.2M");
    }
}
