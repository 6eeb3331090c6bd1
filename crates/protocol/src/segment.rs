//! User input segments.
//!
//! A segment is kept as the exact bytes of the JSON object the client sent
//! (a [`RawValue`]), and parsed once alongside for typed access through
//! [`Segment::view`]. Keeping the bytes, rather than a parsed map or a closed
//! enum, is what makes "exactly as received" hold: a segment of a type this
//! pod does not know, a known one with extra fields, numbers no `f64` can
//! hold, key order and duplicate keys all travel from the `run` frame into
//! the log and out to every client unchanged — the log line is written with
//! the raw bytes spliced in, and frames are the log's own bytes.
//!
//! The bytes enter through [`run_segments`], which reads them straight from
//! the frame's text. A segment deserialised as part of a larger structure
//! (a log entry, a snapshot, whose enums serde buffers first) cannot see the
//! original bytes any more; it is re-serialised from what was parsed. That
//! path only feeds views (the model's context, a client's screen), never a
//! log write, so nothing written differs from what a client sent.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// One piece of user input, exactly as received.
#[derive(Debug, Clone)]
pub struct Segment {
    raw: Box<RawValue>,
    parsed: Parsed,
}

/// What [`Segment::view`] borrows from: the fields of a known type, checked
/// when the segment was made.
#[derive(Debug, Clone)]
enum Parsed {
    Text {
        text: String,
    },
    Paste {
        id: u64,
        text: String,
    },
    FileRef {
        path: String,
    },
    KnowledgeRef {
        slug: String,
    },
    WorkflowInvoke {
        slug: String,
        args: String,
    },
    Image {
        blob: String,
        media_type: String,
        name: Option<String>,
    },
    Unknown {
        kind: String,
    },
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
    /// An image stored as a blob (`sha256:<hex>`), sent to the model as an
    /// image in its place among the text.
    Image {
        blob: &'a str,
        media_type: &'a str,
        name: Option<&'a str>,
    },
    /// A segment type this pod does not know; kept verbatim, flattened for the
    /// model as a placeholder.
    Unknown {
        kind: &'a str,
    },
}

impl Segment {
    pub fn text(text: impl Into<String>) -> Self {
        let text = text.into();
        Self::build(
            "text",
            &[("text", Value::from(text.as_str()))],
            Parsed::Text { text },
        )
    }

    pub fn paste(id: u64, text: impl Into<String>) -> Self {
        let text = text.into();
        Self::build(
            "paste",
            &[
                ("id", Value::from(id)),
                ("text", Value::from(text.as_str())),
            ],
            Parsed::Paste { id, text },
        )
    }

    pub fn file_ref(path: impl Into<String>) -> Self {
        let path = path.into();
        Self::build(
            "file_ref",
            &[("path", Value::from(path.as_str()))],
            Parsed::FileRef { path },
        )
    }

    pub fn knowledge_ref(slug: impl Into<String>) -> Self {
        let slug = slug.into();
        Self::build(
            "knowledge_ref",
            &[("slug", Value::from(slug.as_str()))],
            Parsed::KnowledgeRef { slug },
        )
    }

    pub fn workflow_invoke(slug: impl Into<String>, args: impl Into<String>) -> Self {
        let (slug, args) = (slug.into(), args.into());
        Self::build(
            "workflow_invoke",
            &[
                ("slug", Value::from(slug.as_str())),
                ("args", Value::from(args.as_str())),
            ],
            Parsed::WorkflowInvoke { slug, args },
        )
    }

    pub fn image(
        blob: impl Into<String>,
        media_type: impl Into<String>,
        name: Option<String>,
    ) -> Self {
        let (blob, media_type) = (blob.into(), media_type.into());
        let mut fields = vec![
            ("blob", Value::from(blob.as_str())),
            ("media_type", Value::from(media_type.as_str())),
        ];
        if let Some(name) = &name {
            fields.push(("name", Value::from(name.as_str())));
        }
        Self::build(
            "image",
            &fields,
            Parsed::Image {
                blob,
                media_type,
                name,
            },
        )
    }

    /// A segment this pod makes itself: `type` first, then the fields.
    #[expect(
        clippy::expect_used,
        reason = "serialised JSON strings and values joined as an object are valid JSON"
    )]
    fn build(kind: &str, fields: &[(&str, Value)], parsed: Parsed) -> Self {
        let mut json = format!("{{\"type\":{}", Value::from(kind));
        for (key, value) in fields {
            json.push_str(&format!(",{}:{value}", Value::from(*key)));
        }
        json.push('}');
        let raw = RawValue::from_string(json).expect("serialised JSON values joined as an object");
        Self { raw, parsed }
    }

    /// A segment from the bytes a client sent: they are kept as they are,
    /// and must be an object with a string `type`; a known type must have
    /// its fields, correctly typed, each once.
    pub fn from_raw(raw: Box<RawValue>) -> Result<Self, String> {
        if !raw.get().trim_start().starts_with('{') {
            return Err("a segment must be a JSON object with a \"type\"".into());
        }
        let parsed = parse(raw.get())?;
        Ok(Self { raw, parsed })
    }

    /// The segment's `type` field.
    pub fn kind(&self) -> &str {
        match &self.parsed {
            Parsed::Text { .. } => "text",
            Parsed::Paste { .. } => "paste",
            Parsed::FileRef { .. } => "file_ref",
            Parsed::KnowledgeRef { .. } => "knowledge_ref",
            Parsed::WorkflowInvoke { .. } => "workflow_invoke",
            Parsed::Image { .. } => "image",
            Parsed::Unknown { kind } => kind,
        }
    }

    /// The JSON object, byte for byte as received.
    pub fn raw(&self) -> &RawValue {
        &self.raw
    }

    /// Typed view. Validation at construction guarantees that known types
    /// have their fields, so this never fails.
    pub fn view(&self) -> SegmentView<'_> {
        match &self.parsed {
            Parsed::Text { text } => SegmentView::Text { text },
            Parsed::Paste { id, text } => SegmentView::Paste { id: *id, text },
            Parsed::FileRef { path } => SegmentView::FileRef { path },
            Parsed::KnowledgeRef { slug } => SegmentView::KnowledgeRef { slug },
            Parsed::WorkflowInvoke { slug, args } => SegmentView::WorkflowInvoke { slug, args },
            Parsed::Image {
                blob,
                media_type,
                name,
            } => SegmentView::Image {
                blob,
                media_type,
                name: name.as_deref(),
            },
            Parsed::Unknown { kind } => SegmentView::Unknown { kind },
        }
    }
}

/// The typed fields of a segment's JSON text. A known type's fields are
/// read by a derived struct, so a missing, mistyped or repeated field is an
/// error; fields it does not name are left alone (and kept in the bytes).
fn parse(json: &str) -> Result<Parsed, String> {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<Cow<'a, str>>,
    }
    #[derive(Deserialize)]
    struct Text {
        text: String,
    }
    #[derive(Deserialize)]
    struct Paste {
        id: u64,
        text: String,
    }
    #[derive(Deserialize)]
    struct FileRef {
        path: String,
    }
    #[derive(Deserialize)]
    struct Slug {
        slug: String,
    }
    #[derive(Deserialize)]
    struct Workflow {
        slug: String,
        #[serde(default)]
        args: String,
    }
    #[derive(Deserialize)]
    struct Image {
        blob: String,
        media_type: String,
        #[serde(default)]
        name: Option<String>,
    }
    fn fields<'a, T: Deserialize<'a>>(kind: &str, json: &'a str) -> Result<T, String> {
        serde_json::from_str(json).map_err(|e| format!("`{kind}` segment: {e}"))
    }
    let kind = match serde_json::from_str::<Kind>(json) {
        Ok(Kind { kind: Some(kind) }) => kind,
        Ok(Kind { kind: None }) => return Err("segment is missing its `type` field".into()),
        Err(e) => return Err(format!("segment field `type` must be one string: {e}")),
    };
    Ok(match kind.as_ref() {
        "text" => Parsed::Text {
            text: fields::<Text>("text", json)?.text,
        },
        "paste" => {
            let Paste { id, text } = fields("paste", json)?;
            Parsed::Paste { id, text }
        }
        "file_ref" => Parsed::FileRef {
            path: fields::<FileRef>("file_ref", json)?.path,
        },
        "knowledge_ref" => Parsed::KnowledgeRef {
            slug: fields::<Slug>("knowledge_ref", json)?.slug,
        },
        "workflow_invoke" => {
            let Workflow { slug, args } = fields("workflow_invoke", json)?;
            Parsed::WorkflowInvoke { slug, args }
        }
        "image" => {
            let Image {
                blob,
                media_type,
                name,
            } = fields("image", json)?;
            Parsed::Image {
                blob,
                media_type,
                name,
            }
        }
        kind => Parsed::Unknown {
            kind: kind.to_owned(),
        },
    })
}

/// The `segments` of a `run` frame, each kept as the bytes the client sent.
/// The frame is read again for them because the generic parse of a frame
/// (into a map, then a `Method`) keeps values, not bytes.
pub(crate) fn run_segments(frame: &str) -> Result<Vec<Segment>, String> {
    #[derive(Deserialize)]
    struct RunFrame<'a> {
        #[serde(borrow)]
        segments: Vec<&'a RawValue>,
    }
    let run: RunFrame = serde_json::from_str(frame).map_err(|e| e.to_string())?;
    run.segments
        .into_iter()
        .map(|raw| Segment::from_raw(raw.to_owned()))
        .collect()
}

impl PartialEq for Segment {
    fn eq(&self, other: &Self) -> bool {
        self.raw.get() == other.raw.get()
    }
}

impl Serialize for Segment {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Segment {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let object = Map::<String, Value>::deserialize(deserializer)?;
        let raw = serde_json::value::to_raw_value(&object).map_err(serde::de::Error::custom)?;
        Segment::from_raw(raw).map_err(serde::de::Error::custom)
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
            json!({"type":"image","blob":"sha256:ab","media_type":"image/png","name":"a.png"}),
            json!({"type":"image","blob":"sha256:ab","media_type":"image/png"}),
        ] {
            let s: Segment = serde_json::from_value(v.clone()).unwrap();
            assert!(!matches!(s.view(), SegmentView::Unknown { .. }));
            assert_eq!(serde_json::to_value(&s).unwrap(), v);
        }
    }

    #[test]
    fn unknown_segment_and_extra_fields_survive() {
        let v = json!({"type":"sticker","url":"x.png","alt":{"nested":[1,2]}});
        let s: Segment = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.view(), SegmentView::Unknown { kind: "sticker" });
        assert_eq!(serde_json::to_value(&s).unwrap(), v);

        let v = json!({"type":"text","text":"hi","lang":"en"});
        let s: Segment = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.view(), SegmentView::Text { text: "hi" });
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
    }

    #[test]
    fn run_segments_keep_the_bytes_sent() {
        let segments = [
            r#"{"type":"x","n":123456789012345678901234567890,"b":1e2,"a":1}"#,
            r#"{"type":"x","d":1,"d":[2, 3],"\u00e9":"\u00e9"}"#,
            r#"{ "text" : "hi" , "type":"text","extra":{"k":1,"k":2} }"#,
        ];
        let frame = format!(r#"{{"type":"run","segments":[{}]}}"#, segments.join(" , "));
        let parsed = run_segments(&frame).unwrap();
        for (segment, sent) in parsed.iter().zip(segments) {
            assert_eq!(segment.raw().get(), sent);
            assert_eq!(serde_json::to_string(segment).unwrap(), sent);
        }
        assert_eq!(parsed[0].view(), SegmentView::Unknown { kind: "x" });
        assert_eq!(parsed[2].view(), SegmentView::Text { text: "hi" });
        let list = serde_json::to_string(&parsed).unwrap();
        assert_eq!(list, format!("[{}]", segments.join(",")));
    }

    #[test]
    fn a_known_field_given_twice_is_ambiguous_and_rejected() {
        let frame =
            r#"{"type":"run","segments":[{"type":"file_ref","path":"a","path":"/etc/passwd"}]}"#;
        let err = run_segments(frame).unwrap_err();
        assert!(err.contains("duplicate field `path`"), "{err}");
        let frame = r#"{"type":"run","segments":[{"type":"text","type":"file_ref","text":"a"}]}"#;
        assert!(run_segments(frame).is_err());
    }

    #[test]
    fn made_segments_put_type_first() {
        assert_eq!(
            serde_json::to_string(&Segment::paste(3, "a\"b")).unwrap(),
            r#"{"type":"paste","id":3,"text":"a\"b"}"#
        );
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
            json!({"type":"paste","id":-1,"text":""}),
            json!({"type":"image","media_type":"image/png"}),
            json!({"type":"image","blob":"sha256:ab","media_type":7}),
        ] {
            assert!(serde_json::from_value::<Segment>(v.clone()).is_err(), "{v}");
            let frame = json!({"type":"run","segments":[v]}).to_string();
            assert!(run_segments(&frame).is_err(), "{frame}");
        }
        for frame in [
            r#"{"type":"run","segments":[["text","hi"]]}"#,
            r#"{"type":"run","segments":["hi"]}"#,
            r#"{"type":"run","segments":{"type":"text","text":"hi"}}"#,
            r#"{"type":"run"}"#,
        ] {
            assert!(run_segments(frame).is_err(), "{frame}");
        }
    }
}
