//! The built-in offline model: deterministic, no network, so that a fresh
//! machine without an API key has a working pod.

use std::time::Duration;

use futures::StreamExt;

use super::{ChatMessage, ModelEvent, ModelRequest, ModelStream, Provider};
use crate::protocol::Usage;

/// Streams a fixed-shape reply describing what it received.
pub struct Offline {
    /// Pause between streamed words; zero in tests that want speed.
    pub word_delay: Duration,
}

impl Default for Offline {
    fn default() -> Self {
        Self {
            word_delay: Duration::from_millis(4),
        }
    }
}

impl Provider for Offline {
    fn name(&self) -> &'static str {
        "offline"
    }

    fn model(&self) -> &str {
        "offline"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let reply = reply_for(&request);
        let input_tokens = crate::tokens::estimate_request(&request);
        let output_tokens = crate::tokens::estimate(&reply);
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
                })),
            ]))
            .boxed()
    }
}

fn reply_for(request: &ModelRequest) -> String {
    let last = request.messages.iter().rev().find_map(|m| match m {
        ChatMessage::User { text } => Some(text.as_str()),
        _ => None,
    });
    let Some(text) = last else {
        return "This is pod's offline model. Send a message and I will describe it.".into();
    };
    let lines = text.lines().count().max(1);
    let chars = text.chars().count();
    format!(
        "This is pod's built-in offline model: no API key is configured, so no real model \
         answered. I received {chars} characters in {lines} line(s). To talk to a real model, \
         set ANTHROPIC_API_KEY or OPENAI_API_KEY (or pass --base-url for a local server such as \
         Ollama) and restart the pod."
    )
}
