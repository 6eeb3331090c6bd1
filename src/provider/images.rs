//! Images in a request body: written as markers, filled from the blob store.
//!
//! A request's messages are kept serialised between calls (see
//! [`super::WireCache`]), but an image's bytes must not be: a session of
//! fifty screenshots would hold them all in memory for its whole life. So a
//! wire format writes each image part as a marker — the byte `0x01`, the
//! image's slot number, `0x01` — and once the body is complete,
//! [`splice`] replaces every marker with the part itself, its bytes read
//! from the store and base64-encoded straight into the body, or with a text
//! placeholder for an image that is not sent (older than the last
//! `--max-context-images`, or its blob gone). `0x01` can never appear in
//! serde_json's output otherwise (it escapes every control character), so a
//! marker cannot be forged by text from the model or a client.
//!
//! A slot number is the image's position among the conversation's images,
//! which only grow at the end, so a kept message's markers stay right.

use std::path::PathBuf;

use base64::Engine as _;

use crate::store::content::Digest;

const MARK: u8 = 0x01;

/// One image of a request, in conversation order.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSlot {
    pub blob: Digest,
    pub media_type: &'static str,
    /// The segment's `name`, or the file a `file_ref` named.
    pub name: String,
    pub size: u64,
    pub dims: Option<(u32, u32)>,
    /// The blob's file; `None` when the blob was gone when the input was
    /// read.
    pub path: Option<PathBuf>,
    /// Whether the image itself is sent (one of the last
    /// `--max-context-images` that are there); else a placeholder is.
    pub send: bool,
}

impl ImageSlot {
    /// What the model reads instead of the image.
    pub fn placeholder(&self) -> String {
        if self.path.is_none() {
            return format!("[image unavailable: {}]", self.blob);
        }
        match self.dims {
            Some((w, h)) => format!("[image: {} {w}×{h} {}]", self.name, self.blob),
            None => format!("[image: {} {}]", self.name, self.blob),
        }
    }
}

/// Marks `slot` where its part goes.
pub(super) fn mark(slot: usize, out: &mut Vec<u8>) {
    out.push(MARK);
    out.extend_from_slice(slot.to_string().as_bytes());
    out.push(MARK);
}

/// How a wire format writes an image part, and a text part in its place.
pub(super) trait ImagePart {
    /// The bytes before and after the base64 data of `slot`.
    fn around(slot: &ImageSlot) -> (Vec<u8>, &'static [u8]);
    /// A text part holding `text`.
    fn text(text: &str, out: &mut Vec<u8>) -> serde_json::Result<()>;
}

/// Replaces every marker in `body` with its part. A body without images is
/// left as it is, unscanned.
pub(super) fn splice<P: ImagePart>(
    body: Vec<u8>,
    images: &[ImageSlot],
) -> serde_json::Result<Vec<u8>> {
    if images.is_empty() {
        return Ok(body);
    }
    let sent: usize = images
        .iter()
        .filter(|s| s.send)
        .map(|s| s.size)
        .sum::<u64>() as usize;
    let mut out = Vec::with_capacity(body.len() + sent / 3 * 4 + 4096);
    let mut rest = &body[..];
    while let Some(start) = rest.iter().position(|b| *b == MARK) {
        out.extend_from_slice(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.iter().position(|b| *b == MARK) else {
            rest = after;
            continue;
        };
        let slot = std::str::from_utf8(&after[..end])
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
            .and_then(|n| images.get(n));
        if let Some(slot) = slot {
            write_part::<P>(slot, &mut out)?;
        }
        rest = &after[end + 1..];
    }
    out.extend_from_slice(rest);
    Ok(out)
}

/// The image itself when it is sent and readable, else its placeholder.
fn write_part<P: ImagePart>(slot: &ImageSlot, out: &mut Vec<u8>) -> serde_json::Result<()> {
    if slot.send {
        if let Some(bytes) = slot.path.as_ref().and_then(|p| std::fs::read(p).ok()) {
            let (before, after) = P::around(slot);
            out.extend_from_slice(&before);
            let at = out.len();
            out.resize(at + base64::encoded_len(bytes.len(), true).unwrap_or(0), 0);
            let written = base64::engine::general_purpose::STANDARD
                .encode_slice(&bytes, &mut out[at..])
                .unwrap_or(0);
            out.truncate(at + written);
            out.extend_from_slice(after);
            return Ok(());
        }
        let gone = ImageSlot {
            path: None,
            ..slot.clone()
        };
        return P::text(&gone.placeholder(), out);
    }
    P::text(&slot.placeholder(), out)
}

/// The tokens an image counts for toward the context, by the contract's
/// fixed estimates: Anthropic ⌈w·h/750⌉, OpenAI 85 + 170 per 512-px tile,
/// 1,000 when the size is unknown (and for the other providers).
pub fn estimate_tokens(provider: &str, dims: Option<(u32, u32)>) -> u64 {
    let Some((w, h)) = dims else {
        return 1000;
    };
    let (w, h) = (u64::from(w), u64::from(h));
    match provider {
        "anthropic" => (w * h).div_ceil(750),
        "openai" => 85 + 170 * w.div_ceil(512) * h.div_ceil(512),
        _ => 1000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Test;
    impl ImagePart for Test {
        fn around(slot: &ImageSlot) -> (Vec<u8>, &'static [u8]) {
            (format!("<{}:", slot.media_type).into_bytes(), b">")
        }
        fn text(text: &str, out: &mut Vec<u8>) -> serde_json::Result<()> {
            serde_json::to_writer(out, text)
        }
    }

    fn slot(path: Option<PathBuf>, send: bool) -> ImageSlot {
        ImageSlot {
            blob: Digest::of(b"img"),
            media_type: "image/png",
            name: "a.png".into(),
            size: 3,
            dims: Some((2, 1)),
            path,
            send,
        }
    }

    #[test]
    fn markers_become_the_bytes_or_a_placeholder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("img");
        std::fs::write(&file, b"img").unwrap();
        let images = vec![
            slot(Some(file.clone()), true),
            slot(Some(file), false),
            slot(None, true),
            slot(Some(dir.path().join("deleted")), true),
        ];
        let mut body = b"[".to_vec();
        for i in 0..4 {
            mark(i, &mut body);
            body.push(b',');
        }
        mark(9, &mut body);
        body.push(b']');
        let out = String::from_utf8(splice::<Test>(body, &images).unwrap()).unwrap();
        let id = Digest::of(b"img");
        assert_eq!(
            out,
            format!(
                "[<image/png:aW1n>,\"[image: a.png 2×1 {id}]\",\"[image unavailable: {id}]\",\
                 \"[image unavailable: {id}]\",]"
            )
        );
    }

    #[test]
    fn estimates_follow_the_contract() {
        assert_eq!(estimate_tokens("anthropic", Some((1000, 1000))), 1334);
        assert_eq!(estimate_tokens("openai", Some((1024, 1024))), 85 + 170 * 4);
        assert_eq!(estimate_tokens("openai", None), 1000);
        assert_eq!(estimate_tokens("offline", Some((1, 1))), 1000);
    }
}
