//! An MCP tool result, as text for the model.
//!
//! Tool results in the session log are text. Text content is kept as is;
//! everything else is described by a short placeholder, so the model knows
//! what it got without the log carrying base64 it could not read anyway.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

use crate::tools::ToolOutcome;

/// Text content joined by newlines, other content as placeholders; the
/// server's `isError` becomes `is_error`. A result with no content but
/// structured content gives that JSON.
pub(super) fn flatten(result: &CallToolResult) -> ToolOutcome {
    let mut parts: Vec<String> = result.content.iter().map(describe).collect();
    if parts.is_empty() {
        if let Some(value) = &result.structured_content {
            parts.push(value.to_string());
        }
    }
    let output = if parts.is_empty() {
        "[no content]".to_owned()
    } else {
        parts.join("\n")
    };
    ToolOutcome {
        output,
        is_error: result.is_error.unwrap_or(false),
    }
}

fn describe(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => {
            format!(
                "[image: {}, {} bytes]",
                image.mime_type,
                base64_len(&image.data)
            )
        }
        ContentBlock::Audio(audio) => {
            format!(
                "[audio: {}, {} bytes]",
                audio.mime_type,
                base64_len(&audio.data)
            )
        }
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource: {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource: {uri}, {}, {} bytes]",
                mime_type.as_deref().unwrap_or("binary"),
                base64_len(blob)
            ),
            _ => "[resource of an unknown kind]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => {
            format!("[resource link: {} ({})]", link.uri, link.name)
        }
        _ => "[content of an unknown kind]".to_owned(),
    }
}

/// The decoded size of base64 text, without decoding it.
fn base64_len(data: &str) -> usize {
    let chars = data.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    (chars / 4 * 3 + (chars % 4).saturating_sub(1)).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use rmcp::model::{Resource, ResourceContents};
    use serde_json::json;

    use super::*;

    #[test]
    fn text_is_joined_and_other_content_described() {
        let result = CallToolResult::success(vec![
            ContentBlock::text("first"),
            ContentBlock::image("aGVsbG8=", "image/png"),
            ContentBlock::audio("AAAA", "audio/wav"),
            ContentBlock::embedded_text("file:///a.txt", "inside"),
            ContentBlock::resource(ResourceContents::BlobResourceContents {
                uri: "file:///b.bin".into(),
                mime_type: Some("application/zip".into()),
                blob: "AAECAw==".into(),
                meta: None,
            }),
            ContentBlock::text("last"),
        ]);
        let outcome = flatten(&result);
        assert!(!outcome.is_error);
        assert_eq!(
            outcome.output,
            "first\n[image: image/png, 5 bytes]\n[audio: audio/wav, 3 bytes]\n\
             [resource: file:///a.txt]\ninside\n\
             [resource: file:///b.bin, application/zip, 4 bytes]\nlast"
        );
    }

    #[test]
    fn resource_links_name_their_uri() {
        let link = serde_json::from_value::<Resource>(json!({"uri":"file:///x","name":"x"}));
        let result = CallToolResult::success(vec![ContentBlock::resource_link(link.unwrap())]);
        assert_eq!(flatten(&result).output, "[resource link: file:///x (x)]");
    }

    #[test]
    fn errors_stay_errors() {
        let result = CallToolResult::error(vec![ContentBlock::text("no such table")]);
        assert_eq!(
            flatten(&result),
            ToolOutcome::error("no such table".to_owned())
        );
    }

    #[test]
    fn structured_content_stands_in_for_missing_content() {
        let mut result = CallToolResult::structured(json!({"rows": 3}));
        result.content.clear();
        let outcome = flatten(&result);
        assert!(outcome.output.contains("\"rows\":3"), "{}", outcome.output);
        let mut empty = CallToolResult::success(vec![]);
        empty.structured_content = None;
        assert_eq!(flatten(&empty).output, "[no content]");
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len(""), 0);
        assert_eq!(base64_len("aGVsbG8="), 5);
        assert_eq!(base64_len("aGVsbG8h"), 6);
        assert_eq!(base64_len("aGVsbA=="), 4);
        assert_eq!(base64_len("aGVs\nbA=="), 4);
    }
}
