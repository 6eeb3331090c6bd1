//! Images attached in the input box: a pasted or dropped path to an image
//! file, or the clipboard's image (Ctrl+V, `clipboard.rs`), becomes a chip,
//! `[Image #1 | shot.png 1280×720 · 214 KB]`, and is uploaded with
//! `put_blob` when the message is sent.
//!
//! The TUI may run on another machine than the pod (over `--url`), so the
//! file is read here and sent as a blob, never named as a path for the pod
//! to open. Its id is the SHA-256 of its bytes, known before the pod
//! answers, so the `put_blob` and the `run` naming it go out together; the
//! pod handles a connection's frames in order.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::protocol::Method;

/// An image file attached to the message being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// Its number among the images of this message (`Image #1`).
    pub number: u64,
    pub source: Source,
    pub name: String,
    pub media_type: &'static str,
    pub size: u64,
    pub dims: Option<(u32, u32)>,
    /// `sha256:<hex>` of the bytes as they were when attached.
    pub blob: String,
}

/// Where an attached image's bytes are when the message is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file, read again then (and refused if it changed meanwhile).
    File(PathBuf),
    /// Bytes taken from the clipboard, which may hold something else by
    /// the time the message is sent.
    Held(Arc<[u8]>),
}

impl Attachment {
    /// The attachment a pasted or dropped text names, when it is the path
    /// of one image file (terminals send a drop as its path: quoted,
    /// with escaped spaces, or as a `file://` URI).
    pub fn from_pasted(text: &str, number: u64) -> Option<Self> {
        let path = pasted_path(text)?;
        let bytes = std::fs::read(&path).ok()?;
        let name = path
            .file_name()
            .map_or_else(|| "image".to_owned(), |n| n.to_string_lossy().into_owned());
        Self::new(number, Source::File(path), name, &bytes)
    }

    /// The attachment of an image taken from the clipboard (PNG bytes).
    pub fn from_clipboard(png: Vec<u8>, number: u64) -> Option<Self> {
        let name = "clipboard.png".to_owned();
        let bytes: Arc<[u8]> = png.into();
        Self::new(number, Source::Held(bytes.clone()), name, &bytes)
    }

    /// `None` when the bytes are not an image the pod takes.
    fn new(number: u64, source: Source, name: String, bytes: &[u8]) -> Option<Self> {
        Some(Self {
            number,
            name,
            media_type: crate::protocol::blob::sniff(bytes)?,
            size: bytes.len() as u64,
            dims: crate::protocol::blob::dimensions(bytes),
            blob: crate::protocol::blob::id_of(bytes),
            source,
        })
    }

    /// `[Image #1 | shot.png 1280×720 · 214 KB]`, the name made safe for
    /// the terminal.
    pub fn chip(&self) -> String {
        let name = crate::safe_text::line(&self.name);
        let size = human_size(self.size);
        match self.dims {
            Some((w, h)) => format!("[Image #{} | {name} {w}×{h} · {size}]", self.number),
            None => format!("[Image #{} | {name} · {size}]", self.number),
        }
    }

    /// The `put_blob` that stores the image, read again now; an error when
    /// the file changed or went since it was attached (its id would no
    /// longer match).
    pub fn upload(&self) -> Result<Method, String> {
        let data = match &self.source {
            Source::File(path) => {
                let bytes = std::fs::read(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if crate::protocol::blob::id_of(&bytes) != self.blob {
                    return Err(format!(
                        "{} changed since it was attached: attach it again",
                        path.display()
                    ));
                }
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)
            }
            Source::Held(bytes) => {
                base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)
            }
        };
        Ok(Method::PutBlob {
            media_type: self.media_type.into(),
            data,
        })
    }
}

/// The one path a paste holds, if it is one: a single line, unquoted, with
/// a `file://` prefix and shell escapes removed, naming an existing file.
fn pasted_path(text: &str) -> Option<PathBuf> {
    let text = text.trim();
    if text.is_empty() || text.contains('\n') {
        return None;
    }
    let unquoted = text
        .strip_prefix('\'')
        .and_then(|t| t.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|t| t.strip_suffix('"')))
        .unwrap_or(text);
    let path = match unquoted.strip_prefix("file://") {
        // A URI escapes spaces as %20 (the only escape drops commonly carry).
        Some(uri) => uri.replace("%20", " "),
        None => {
            let mut path = String::with_capacity(unquoted.len());
            let mut chars = unquoted.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => path.extend(chars.next()),
                    c => path.push(c),
                }
            }
            path
        }
    };
    let path = Path::new(&path).to_path_buf();
    path.is_file().then_some(path)
}

/// `214 KB`, `1.3 MB`, `512 B` (decimal units, as file managers show).
fn human_size(bytes: u64) -> String {
    match bytes {
        0..1000 => format!("{bytes} B"),
        1000..1_000_000 => format!("{} KB", (bytes + 500) / 1000),
        _ => format!("{:.1} MB", bytes as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        bytes
    }

    #[test]
    fn a_pasted_or_dropped_image_path_is_a_chip() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("my shot.png");
        let mut bytes = png(1280, 720);
        bytes.resize(214_000, 0);
        std::fs::write(&file, &bytes).unwrap();
        let plain = file.display().to_string();
        for pasted in [
            plain.clone(),
            format!("'{plain}'"),
            format!("\"{plain}\"\n"),
            plain.replace(' ', "\\ "),
            format!("file://{plain}"),
        ] {
            let attached = Attachment::from_pasted(&pasted, 1)
                .unwrap_or_else(|| panic!("{pasted:?} is not attached"));
            assert_eq!(
                attached.chip(),
                "[Image #1 | my shot.png 1280×720 · 214 KB]"
            );
        }
        std::fs::write(dir.path().join("notes.txt"), "hi").unwrap();
        for not_an_image in [
            dir.path().join("notes.txt").display().to_string(),
            dir.path().join("gone.png").display().to_string(),
            format!("{plain}\n{plain}"),
            "just some text".into(),
        ] {
            assert!(Attachment::from_pasted(&not_an_image, 1).is_none());
        }
    }

    #[test]
    fn an_image_changed_after_attaching_is_not_sent_under_the_old_id() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.png");
        std::fs::write(&file, png(1, 1)).unwrap();
        let attached = Attachment::from_pasted(&file.display().to_string(), 1).unwrap();
        assert!(matches!(attached.upload(), Ok(Method::PutBlob { .. })));
        std::fs::write(&file, png(2, 2)).unwrap();
        assert!(attached.upload().unwrap_err().contains("attach it again"));
    }

    #[test]
    fn names_cannot_reach_the_terminal_raw() {
        let attached = Attachment {
            number: 2,
            source: Source::File(PathBuf::new()),
            name: "evil\u{1b}]0;x\u{7}.png".into(),
            media_type: "image/png",
            size: 999,
            dims: None,
            blob: String::new(),
        };
        assert!(!attached.chip().contains('\u{1b}'), "{}", attached.chip());
    }
}
