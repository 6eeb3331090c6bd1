//! Telling a person who looked away: a bell, and a desktop notification
//! escape (OSC 9, which iTerm2, WezTerm, kitty and foot show; OSC 777,
//! which urxvt-derived terminals, foot and kitty show), when an approval
//! request arrives or a turn ends while the terminal is not focused.
//!
//! Focus comes from the terminal's focus reports (`CSI I` / `CSI O`,
//! crossterm's focus events). A terminal that never reports focus is taken
//! as focused, so nothing rings at someone watching it.

/// `--notify off|bell|desktop` (`POD_NOTIFY`, config `notify`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum NotifyMode {
    Off,
    /// BEL only.
    Bell,
    /// BEL and a desktop notification escape.
    #[default]
    Desktop,
}

/// Whether to notify, and the escapes that do it.
#[derive(Debug, Clone)]
pub struct Notifier {
    mode: NotifyMode,
    focused: bool,
}

impl Notifier {
    pub fn new(mode: NotifyMode) -> Self {
        Self {
            mode,
            focused: true,
        }
    }

    pub fn set_focused(&mut self, focused: bool) {
        self.focused = focused;
    }

    /// The bytes that tell a person `body`, or `None` when the terminal is
    /// focused or notifications are off. `body` may be a model's words:
    /// control characters are dropped so it cannot end the escape early.
    pub fn alert(&self, title: &str, body: &str) -> Option<String> {
        if self.focused || self.mode == NotifyMode::Off {
            return None;
        }
        let mut out = String::from("\x07");
        if self.mode == NotifyMode::Desktop {
            let clean = |text: &str, extra: char| -> String {
                text.chars()
                    .filter(|c| !c.is_control() && *c != extra)
                    .take(200)
                    .collect()
            };
            let (title, body) = (clean(title, ';'), clean(body, '\u{0}'));
            out.push_str(&format!("\x1b]9;{title}: {body}\x1b\\"));
            out.push_str(&format!("\x1b]777;notify;{title};{body}\x1b\\"));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unfocused_terminal_is_alerted_as_configured() {
        let mut desktop = Notifier::new(NotifyMode::Desktop);
        assert_eq!(desktop.alert("pod", "waits"), None, "focused");
        desktop.set_focused(false);
        assert_eq!(
            desktop.alert("pod", "waits").as_deref(),
            Some("\x07\x1b]9;pod: waits\x1b\\\x1b]777;notify;pod;waits\x1b\\")
        );
        let mut bell = Notifier::new(NotifyMode::Bell);
        bell.set_focused(false);
        assert_eq!(bell.alert("pod", "waits").as_deref(), Some("\x07"));
        let mut off = Notifier::new(NotifyMode::Off);
        off.set_focused(false);
        assert_eq!(off.alert("pod", "waits"), None);
    }

    #[test]
    fn hostile_text_cannot_end_the_escape() {
        let mut n = Notifier::new(NotifyMode::Desktop);
        n.set_focused(false);
        let out = n.alert("a;b", "rm -rf /\x1b\\\x1b]0;pwned\x07").unwrap();
        assert_eq!(out.matches('\x1b').count(), 4, "{out:?}");
        assert!(out.contains("777;notify;ab;"), "{out:?}");
    }
}
