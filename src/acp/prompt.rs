//! A `session/prompt`'s content as a `run`'s segments, and a `turn_end` as
//! the prompt's answer.
//!
//! Text stays text; a `resource_link` to a file becomes a `file_ref` (the
//! pod reads it, and refuses one outside the workspace); an embedded
//! resource is text headed by its URI; an image is stored with `put_blob`
//! first and sent as an `image` segment.

use std::path::Path;

use serde_json::Value;

use super::link::{Link, PodError};
use crate::protocol::{LogEntry, Method, Segment, TurnEndReason};

/// A prompt block the pod cannot take, said as the editor's mistake.
fn refused(message: String) -> PodError {
    PodError {
        code: "invalid_params".to_owned(),
        message,
    }
}

/// The segments for `blocks` (ACP content blocks, as JSON), storing images
/// through `link`. `workspace` makes file URIs inside it relative.
pub async fn segments(
    blocks: &[Value],
    link: &Link,
    workspace: &Path,
) -> Result<Vec<Segment>, PodError> {
    let mut segments = Vec::new();
    for block in blocks {
        let field = |name: &str| block.get(name).and_then(Value::as_str);
        match field("type").unwrap_or_default() {
            "text" => segments.push(Segment::text(field("text").unwrap_or_default())),
            "resource_link" => {
                let uri = field("uri").unwrap_or_default();
                segments.push(Segment::file_ref(file_path(uri, workspace)?));
            }
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or_default();
                let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
                match resource.get("text").and_then(Value::as_str) {
                    Some(text) => segments.push(Segment::text(format!("{uri}:\n{text}"))),
                    None => {
                        return Err(refused(format!(
                            "the embedded resource {uri} is binary; pod takes text resources, \
                             images as image blocks, and files as resource links"
                        )))
                    }
                }
            }
            "image" => {
                let media_type = field("mimeType").unwrap_or_default().to_owned();
                let data = field("data").unwrap_or_default().to_owned();
                let stored = link
                    .call(Method::PutBlob {
                        media_type: media_type.clone(),
                        data,
                    })
                    .await?;
                let blob = stored.blob.ok_or_else(|| {
                    refused("the pod stored the image but named no blob".to_owned())
                })?;
                let media_type = stored.media_type.unwrap_or(media_type);
                let name = field("uri").map(|uri| uri.rsplit('/').next().unwrap_or(uri).to_owned());
                segments.push(Segment::image(blob, media_type, name));
            }
            other => {
                return Err(refused(format!(
                    "pod takes text, image, resource_link and resource blocks, not {other:?}"
                )))
            }
        }
    }
    if segments.is_empty() {
        return Err(refused(
            "the prompt is empty; send at least one block".to_owned(),
        ));
    }
    Ok(segments)
}

/// A `file://` URI (or a plain path) as a `file_ref` path: relative to the
/// workspace when inside it, so the pod shows it as the user knows it.
fn file_path(uri: &str, workspace: &Path) -> Result<String, PodError> {
    let path = match uri.strip_prefix("file://") {
        Some(_) => reqwest::Url::parse(uri)
            .ok()
            .and_then(|url| url.to_file_path().ok())
            .ok_or_else(|| refused(format!("{uri} is not a file URI pod can read")))?,
        None if uri.contains("://") => {
            return Err(refused(format!(
                "{uri}: pod reads files of the workspace (file:// links) only"
            )))
        }
        None => Path::new(uri).to_owned(),
    };
    Ok(match path.strip_prefix(workspace) {
        Ok(inside) => inside.display().to_string(),
        Err(_) => path.display().to_string(),
    })
}

/// How a turn ended, as the prompt's answer: a stop reason, or the pod's
/// error.
pub fn stop_reason(turn_end: &LogEntry) -> Option<Result<&'static str, PodError>> {
    let LogEntry::TurnEnd { reason, error, .. } = turn_end else {
        return None;
    };
    Some(match reason {
        TurnEndReason::Completed => Ok("end_turn"),
        TurnEndReason::Cancelled => Ok("cancelled"),
        TurnEndReason::MaxSteps => Ok("max_turn_requests"),
        TurnEndReason::Error | TurnEndReason::Interrupted => Err(match error {
            Some(error) => PodError {
                code: serde_json::to_value(error.code)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "error".to_owned()),
                message: error.message.clone(),
            },
            None => PodError {
                code: if *reason == TurnEndReason::Error {
                    "error"
                } else {
                    "interrupted"
                }
                .to_owned(),
                message: "the turn ended without an answer".to_owned(),
            },
        }),
        // A reason newer than this build (`output_limit`): the turn is over.
        TurnEndReason::Unknown => Ok("max_tokens"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_inside_the_workspace_become_relative_paths() {
        let workspace = Path::new("/home/u/calc");
        assert_eq!(
            file_path("file:///home/u/calc/src/main.rs", workspace).unwrap(),
            "src/main.rs"
        );
        assert_eq!(
            file_path("file:///etc/hosts", workspace).unwrap(),
            "/etc/hosts"
        );
        assert!(file_path("https://example.com/x", workspace).is_err());
    }
}
