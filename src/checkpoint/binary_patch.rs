//! Git's binary patch format, so that a diff `git apply` takes can carry a
//! changed image or archive, not only text (`pod exec --emit-patch`).
//!
//! `git apply` needs two things a text hunk does not: an `index` line with
//! both blobs' full object ids (it checks the file it patches is the one
//! the patch was made from, and the result is the one intended), and the
//! new content itself, zlib-deflated and written in git's base85 in lines
//! of at most 52 bytes. Each hunk is a `literal` (the whole content), never
//! a `delta`: larger, but simple and always right. The reverse hunk follows,
//! as git writes it, so `git apply -R` works too.

use std::fmt::Write as _;
use std::io::Write as _;

use sha1::{Digest as _, Sha1};

/// Git's base85 alphabet (not Ascii85's).
const ALPHABET: &[u8; 85] =
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

/// The most bytes one line of a hunk encodes.
const LINE_BYTES: usize = 52;

/// The object id git gives a blob of these bytes.
pub fn blob_id(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    hasher
        .finalize()
        .iter()
        .fold(String::with_capacity(40), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

/// Appends the `index` line and the binary hunks turning `old` into `new`
/// (`None`: the file does not exist on that side). `mode` is the file's
/// mode when it is the same on both sides: git puts it on the index line.
pub fn write(out: &mut String, old: Option<&[u8]>, new: Option<&[u8]>, mode: Option<&str>) {
    const NONE: &str = "0000000000000000000000000000000000000000";
    let id = |side: Option<&[u8]>| side.map_or_else(|| NONE.to_owned(), blob_id);
    let _ = write!(out, "index {}..{}", id(old), id(new));
    match mode {
        Some(mode) => {
            let _ = writeln!(out, " {mode}");
        }
        None => out.push('\n'),
    }
    out.push_str("GIT binary patch\n");
    literal(out, new.unwrap_or_default());
    literal(out, old.unwrap_or_default());
}

/// One `literal` hunk: the size, the deflated bytes in base85 lines, and
/// the blank line that ends it.
fn literal(out: &mut String, content: &[u8]) {
    let _ = writeln!(out, "literal {}", content.len());
    for line in deflate(content).chunks(LINE_BYTES) {
        // The line's length first: A–Z for 1–26 bytes, a–z for 27–52.
        out.push(match line.len() {
            n @ 1..=26 => char::from(b'A' + n as u8 - 1),
            n => char::from(b'a' + n as u8 - 27),
        });
        encode85(out, line);
        out.push('\n');
    }
    out.push('\n');
}

fn deflate(content: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(content);
    encoder.finish().unwrap_or_default()
}

/// Git's base85: each 4 bytes (the last group padded with zeros) as 5
/// characters, the most significant first.
fn encode85(out: &mut String, bytes: &[u8]) {
    for group in bytes.chunks(4) {
        let mut word = [0u8; 4];
        word[..group.len()].copy_from_slice(group);
        let mut value = u32::from_be_bytes(word);
        let mut chars = [0u8; 5];
        for c in chars.iter_mut().rev() {
            *c = ALPHABET[(value % 85) as usize];
            value /= 85;
        }
        out.extend(chars.iter().map(|&c| char::from(c)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids_are_gits() {
        // `printf '' | git hash-object --stdin`, and of "hello\n".
        assert_eq!(blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(
            blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
    }

    #[test]
    fn base85_is_gits_alphabet_big_endian() {
        let mut out = String::new();
        encode85(&mut out, &[0, 0, 0, 0]);
        assert_eq!(out, "00000");
        out.clear();
        encode85(&mut out, &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(out, "|NsC0");
    }
}
