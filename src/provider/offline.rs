//! The built-in offline model: deterministic, no network, so that a fresh
//! machine without an API key has a working pod.

use std::borrow::Cow;
use std::time::Duration;

use futures::StreamExt;

use super::{ChatMessage, ImageSlot, ModelEvent, ModelRequest, ModelStream, Provider, UserPart};
use crate::protocol::offline::real_model_hint;
use crate::protocol::Usage;

/// The provider's name, and its model's unless `--model` names another.
pub const NAME: &str = crate::protocol::offline::PROVIDER;

/// Streams a fixed-shape reply describing what it received.
pub struct Offline {
    /// Pause between streamed words; zero in tests that want speed.
    pub word_delay: Duration,
    /// The model name it reports. The reply does not depend on it, but a
    /// pod started with `--model` says that model everywhere, as with any
    /// other provider, so scripts and clients can be tried offline.
    pub model: String,
    /// The pod's `--name`, when it was given one: the commands the reply
    /// suggests must reach this pod, not the workspace's default one.
    pub pod_name: Option<String>,
}

impl Default for Offline {
    fn default() -> Self {
        Self {
            word_delay: Duration::from_millis(4),
            model: NAME.to_owned(),
            pod_name: None,
        }
    }
}

impl Provider for Offline {
    fn name(&self) -> &'static str {
        NAME
    }

    fn may_loop(&self) -> bool {
        false
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn stream(&self, request: &ModelRequest<'_>) -> ModelStream {
        let reply = reply_for(request, self.pod_name.as_deref());
        let input_tokens = super::estimate::estimate_request_for(NAME, request);
        let output_tokens = super::estimate::estimate(&reply);
        let delay = self.word_delay;
        let words: Vec<String> = reply.split_inclusive(' ').map(str::to_owned).collect();
        futures::stream::iter(words)
            .then(move |w| async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                Ok(ModelEvent::TextDelta(w))
            })
            .chain(futures::stream::iter([
                Ok(ModelEvent::BlockEnd),
                Ok(ModelEvent::Usage(Usage {
                    input_tokens,
                    output_tokens,
                    ..Default::default()
                })),
            ]))
            .boxed()
    }
}

/// The reply: honest about what answered, useful about what was received
/// and how to get a real model.
fn reply_for(request: &ModelRequest<'_>, pod_name: Option<&str>) -> String {
    // The user's own last input, past what the pod added after it (the
    // project's instructions follow a session's first input).
    let last = request.messages.iter().rev().find_map(|m| match m {
        ChatMessage::User {
            text,
            injected: false,
        } => Some((Cow::Borrowed(text.as_ref()), Vec::new())),
        ChatMessage::UserParts { parts } => {
            let mut text = String::new();
            let mut slots = Vec::new();
            for part in parts {
                match part {
                    UserPart::Text(t) => text.push_str(t),
                    UserPart::Image(slot) => slots.extend(request.images.get(*slot)),
                }
            }
            Some((Cow::Owned(text), slots))
        }
        _ => None,
    });
    let mut reply = String::from(
        "This is pod's built-in offline model: no real model is configured, so nothing \
         here was written by one.\n\n",
    );
    if let Some(model) = request.model.as_deref().filter(|m| *m != NAME) {
        reply.push_str(&format!(
            "This call asked for model `{model}`, which the offline provider does not have; \
             it answers in its place.\n\n"
        ));
    }
    match last {
        Some((text, images)) => {
            reply.push_str(&describe(&text));
            reply.push_str(&describe_images(&images));
        }
        None => reply.push_str("I received no message from you yet."),
    }
    if !request.tools.is_empty() {
        let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        reply.push_str(&format!(
            " A real model could call {} tools here: {}.",
            names.len(),
            names.join(", ")
        ));
    }
    let pod = match pod_name {
        Some(name) => format!("pod --name {name}"),
        None => "pod".to_owned(),
    };
    reply.push_str("\n\n");
    reply.push_str(&real_model_hint(&pod));
    reply
}

/// What the images of the last message were, as sent: a fresh machine
/// shows the whole path (store, segment, request) working.
fn describe_images(images: &[&ImageSlot]) -> String {
    if images.is_empty() {
        return String::new();
    }
    let list: Vec<String> = images
        .iter()
        .map(|slot| {
            let dims = slot
                .dims
                .map_or("size unknown".to_owned(), |(w, h)| format!("{w}×{h}"));
            let state = if slot.path.is_none() {
                ", unavailable: its blob is gone"
            } else if !slot.send {
                ", not sent: older than the last --max-context-images"
            } else {
                ""
            };
            format!("{} {} bytes {dims}{state}", slot.media_type, slot.size)
        })
        .collect();
    format!(
        " It carried {} image(s): {}.",
        images.len(),
        list.join("; ")
    )
}

/// Size of the message and of the files attached to it. The input flattener
/// inlines each `file_ref` as `<file path="...">\n...\n</file>`; pastes are
/// inlined as plain text and cannot be told apart from typed text.
fn describe(text: &str) -> String {
    let lines = text.lines().count().max(1);
    let chars = text.chars().count();
    let mut out = format!("Your last message had {chars} characters in {lines} line(s)");
    let files = attached_files(text);
    if !files.is_empty() {
        let list: Vec<String> = files
            .iter()
            .map(|(path, lines)| format!("{path} ({lines} lines)"))
            .collect();
        out.push_str(&format!(
            ", including {} attached file(s): {}",
            files.len(),
            list.join(", ")
        ));
    }
    out.push_str(". Pasted text arrives inline, so it is counted in that size.");
    let unresolved = placeholders(text);
    if !unresolved.is_empty() {
        out.push_str(&format!(
            " Parts of it could not be resolved and reached me as placeholders: {}.",
            unresolved.join(", ")
        ));
    }
    out
}

/// The `[unknown …]` placeholders the input flattener puts where a segment
/// could not be resolved, so a first-run user sees they arrived.
fn placeholders(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[unknown ") {
        let Some(len) = rest[start..].find(']') else {
            break;
        };
        found.push(&rest[start..start + len + 1]);
        rest = &rest[start + len + 1..];
    }
    found
}

/// `(path, line count)` of every `<file path="...">` block in `text`.
fn attached_files(text: &str) -> Vec<(&str, usize)> {
    const OPEN: &str = "<file path=\"";
    let mut files = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        rest = &rest[start + OPEN.len()..];
        let Some(end) = rest.find("\">") else { break };
        let path = &rest[..end];
        rest = &rest[end + 2..];
        let body_end = rest.find("</file>").unwrap_or(rest.len());
        files.push((path, rest[..body_end].trim_matches('\n').lines().count()));
        rest = &rest[body_end..];
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ToolSpec;

    #[test]
    fn reply_describes_files_tools_and_configuration() {
        let request = ModelRequest {
            model: None,
            system: "".into(),
            // The project's instructions follow a session's first input:
            // the reply is about the input all the same.
            messages: vec![
                ChatMessage::User {
                    text:
                        "look at\n<file path=\"src/a.rs\">\nfn a() {}\nfn b() {}\n</file>\nplease"
                            .into(),
                    injected: false,
                },
                ChatMessage::User {
                    text: "[project_instructions] AGENTS.md\n# Rules\nBe brief.".into(),
                    injected: true,
                },
            ],
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: String::new(),
                parameters: serde_json::json!({}),
            }]
            .into(),
            cache: None,
            max_output_tokens: None,
            images: Vec::new(),
        };
        let reply = reply_for(&request, None);
        assert!(reply.contains("offline model"), "{reply}");
        assert!(!reply.contains("asked for model"), "{reply}");
        assert!(reply.contains("in 6 line(s)"), "{reply}");
        assert!(
            reply.contains("1 attached file(s): src/a.rs (2 lines)"),
            "{reply}"
        );
        assert!(reply.contains("Pasted text"), "{reply}");
        assert!(reply.contains("1 tools here: read_file"), "{reply}");
        for hint in [
            "ANTHROPIC_API_KEY",
            "OPENAI_API_KEY",
            "--base-url",
            "`pod stop`",
        ] {
            assert!(reply.contains(hint), "{reply}");
        }
        // A `pod send` user has no TUI to quit (issue 36).
        assert!(!reply.contains("Ctrl+D"), "{reply}");
        let other = ModelRequest {
            model: Some("gpt-4.1".into()),
            ..request
        };
        assert!(reply_for(&other, None).contains("asked for model `gpt-4.1`"));
        // A pod with a name is stopped by that name (issue 36).
        let named = reply_for(&other, Some("shared"));
        assert!(named.contains("`pod --name shared stop`"), "{named}");
        assert!(
            named.contains("`ANTHROPIC_API_KEY=... pod --name shared`"),
            "{named}"
        );
    }
}
