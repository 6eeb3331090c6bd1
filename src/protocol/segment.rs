//! User input segments.
//!
//! A segment is stored as the JSON object the client sent, field for field.
//! Typed access goes through [`Segment::view`]. Keeping the raw object (rather
//! than a closed enum) is what makes forward compatibility hold: a segment of a
//! type this pod does not know, or a known one with extra fields, travels from
//! the `run` frame into the log and out to every client unchanged.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One piece of user input, exactly as received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Map<String, Value>", into = "Map<String, Value>")]
pub struct Segment {
    raw: Map<String, Value>,
}

/// A typed, borrowed view of a [`Segment`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentView<'a> {
    Text {
        text: &'a str,
    },
    Paste {
        id: u64,
        text: &'a str,
    },
    FileRef {
        path: &'a str,
    },
    KnowledgeRef {
        slug: &'a str,
    },
    WorkflowInvoke {
        slug: &'a str,
        args: &'a str,
    },
    /// A segment type this pod does not know; kept verbatim, flattened for the
    /// model as a placeholder.
    Unknown {
        kind: &'a str,
    },
}

impl Segment {
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_pairs("text", [("text", Value::String(text.into()))])
    }

    pub fn paste(id: u64, text: impl Into<String>) -> Self {
        Self::from_pairs(
            "paste",
            [
                ("id", Value::from(id)),
                ("text", Value::String(text.into())),
            ],
        )
    }

    pub fn file_ref(path: impl Into<String>) -> Self {
        Self::from_pairs("file_ref", [("path", Value::String(path.into()))])
    }

    pub fn knowledge_ref(slug: impl Into<String>) -> Self {
        Self::from_pairs("knowledge_ref", [("slug", Value::String(slug.into()))])
    }

    pub fn workflow_invoke(slug: impl Into<String>, args: impl Into<String>) -> Self {
        Self::from_pairs(
            "workflow_invoke",
            [
                ("slug", Value::String(slug.into())),
                ("args", Value::String(args.into())),
            ],
        )
    }

    fn from_pairs<const N: usize>(kind: &str, pairs: [(&str, Value); N]) -> Self {
        let mut raw = Map::new();
        raw.insert("type".into(), Value::String(kind.into()));
        for (k, v) in pairs {
            raw.insert(k.into(), v);
        }
        Self { raw }
    }

    /// The segment's `type` field.
    pub fn kind(&self) -> &str {
        self.raw.get("type").and_then(Value::as_str).unwrap_or("")
    }

    /// The raw JSON object, as received.
    pub fn raw(&self) -> &Map<String, Value> {
        &self.raw
    }

    /// Typed view. Validation at construction guarantees that known types
    /// have their fields, so this never fails.
    pub fn view(&self) -> SegmentView<'_> {
        let s = |k: &str| self.raw.get(k).and_then(Value::as_str).unwrap_or("");
        match self.kind() {
            "text" => SegmentView::Text { text: s("text") },
            "paste" => SegmentView::Paste {
                id: self.raw.get("id").and_then(Value::as_u64).unwrap_or(0),
                text: s("text"),
            },
            "file_ref" => SegmentView::FileRef { path: s("path") },
            "knowledge_ref" => SegmentView::KnowledgeRef { slug: s("slug") },
            "workflow_invoke" => SegmentView::WorkflowInvoke {
                slug: s("slug"),
                args: s("args"),
            },
            kind => SegmentView::Unknown { kind },
        }
    }
}

/// A required field and the check its value must pass.
type FieldCheck = fn(&Value) -> bool;

impl TryFrom<Map<String, Value>> for Segment {
    type Error = String;

    fn try_from(raw: Map<String, Value>) -> Result<Self, String> {
        let kind = match raw.get("type") {
            Some(Value::String(k)) => k.as_str(),
            Some(_) => return Err("segment field `type` must be a string".into()),
            None => return Err("segment is missing its `type` field".into()),
        };
        let required: &[(&str, FieldCheck)] = match kind {
            "text" => &[("text", Value::is_string)],
            "paste" => &[("id", Value::is_u64), ("text", Value::is_string)],
            "file_ref" => &[("path", Value::is_string)],
            "knowledge_ref" => &[("slug", Value::is_string)],
            "workflow_invoke" => &[("slug", Value::is_string)],
            _ => &[],
        };
        for (field, ok) in required {
            match raw.get(*field) {
                Some(v) if ok(v) => {}
                Some(_) => return Err(format!("`{kind}` segment has a mistyped `{field}`")),
                None => return Err(format!("`{kind}` segment is missing `{field}`")),
            }
        }
        if kind == "workflow_invoke" && raw.get("args").is_some_and(|a| !a.is_string()) {
            return Err("`workflow_invoke` segment has a mistyped `args`".into());
        }
        Ok(Self { raw })
    }
}

impl From<Segment> for Map<String, Value> {
    fn from(s: Segment) -> Self {
        s.raw
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_segments_round_trip() {
        for v in [
            json!({"type":"text","text":"hi"}),
            json!({"type":"paste","id":1,"text":"a\nb"}),
            json!({"type":"file_ref","path":"src/main.rs"}),
            json!({"type":"knowledge_ref","slug":"style"}),
            json!({"type":"workflow_invoke","slug":"review","args":"src/"}),
        ] {
            let s: Segment = serde_json::from_value(v.clone()).unwrap();
            assert!(!matches!(s.view(), SegmentView::Unknown { .. }));
            assert_eq!(serde_json::to_value(&s).unwrap(), v);
        }
    }

    #[test]
    fn unknown_segment_and_extra_fields_survive() {
        let v = json!({"type":"image","url":"x.png","alt":{"nested":[1,2]}});
        let s: Segment = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.view(), SegmentView::Unknown { kind: "image" });
        assert_eq!(serde_json::to_value(&s).unwrap(), v);

        let v = json!({"type":"text","text":"hi","lang":"en"});
        let s: Segment = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.view(), SegmentView::Text { text: "hi" });
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
    }

    #[test]
    fn malformed_known_segments_are_rejected() {
        for v in [
            json!({"text":"no type"}),
            json!({"type":3}),
            json!({"type":"text"}),
            json!({"type":"text","text":5}),
            json!({"type":"paste","id":"one","text":""}),
            json!({"type":"workflow_invoke","slug":"x","args":7}),
        ] {
            assert!(serde_json::from_value::<Segment>(v).is_err());
        }
    }
}
