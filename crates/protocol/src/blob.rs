//! What a client knows of an image before it sends it: whether the pod
//! takes its type (by the bytes' signature), its size from the header, and
//! the blob id `put_blob` will answer with. The pod's blob store
//! (`blobs.rs`) judges the bytes it is sent by the same functions, so a
//! client never offers what the pod refuses.

use std::fmt::Write;

use sha2::{Digest, Sha256};

/// The media type the bytes' signature says, among the accepted ones.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Width and height from the header (no pixels decoded).
pub fn dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let size = imagesize::blob_size(bytes).ok()?;
    Some((
        u32::try_from(size.width).ok()?,
        u32::try_from(size.height).ok()?,
    ))
}

/// The id of a blob of these bytes, `sha256:<hex>`: what `put_blob`
/// answers and an `image` segment names.
pub fn id_of(bytes: &[u8]) -> String {
    let mut id = String::with_capacity(7 + 64);
    id.push_str("sha256:");
    for byte in Sha256::digest(bytes) {
        // Writing to a String cannot fail.
        let _ = write!(id, "{byte:02x}");
    }
    id
}
