//! Image blobs: the bytes of images clients attach, stored once by hash.
//!
//! The log holds only an `image` segment naming a blob (`sha256:<hex>`), so
//! an attach costs nothing for the bytes and a request reads them from here
//! when it is built, never keeping them in memory between calls. The bytes
//! live in a [`ContentStore`] of their own (`<data-dir>/blobs/`), apart from
//! the checkpoints' objects, so `get_blob` can never serve a checkpointed
//! file. Every check a client's bytes get is here, so the socket method and
//! `POST /v1/blobs` refuse the same things the same way.

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::protocol::blob::{dimensions, sniff};
use crate::protocol::ErrorCode;
use crate::store::content::{ContentStore, Digest, Stored};

/// `--max-blob-bytes` by default: 5 MiB, what Anthropic takes per image.
pub const DEFAULT_MAX_BLOB_BYTES: u64 = 5 * 1024 * 1024;
/// `--max-blob-store-bytes` by default: 1 GiB.
pub const DEFAULT_MAX_STORE_BYTES: u64 = 1024 * 1024 * 1024;
/// `--max-context-images` by default.
pub const DEFAULT_MAX_CONTEXT_IMAGES: usize = 20;
/// A blob no log names is collected once it is this old: long enough for a
/// client to upload and then send its `run`.
pub const UNNAMED_BLOB_TTL: Duration = Duration::from_secs(3600);

/// The media types the pod takes.
pub const ACCEPTED_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The bounds the store keeps.
#[derive(Debug, Clone, Copy)]
pub struct BlobLimits {
    pub max_blob_bytes: u64,
    pub max_store_bytes: u64,
}

impl Default for BlobLimits {
    fn default() -> Self {
        Self {
            max_blob_bytes: DEFAULT_MAX_BLOB_BYTES,
            max_store_bytes: DEFAULT_MAX_STORE_BYTES,
        }
    }
}

/// What the pod knows of a stored image without decoding its pixels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobInfo {
    pub digest: Digest,
    pub media_type: &'static str,
    pub size: u64,
    /// From the header; `None` when the header does not say (a truncated
    /// but correctly signed file).
    pub dims: Option<(u32, u32)>,
}

/// Why a blob was refused or cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error(
        "media_type {0:?} is not accepted; send image/png, image/jpeg, image/gif or image/webp"
    )]
    UnsupportedType(String),
    #[error("the bytes are not {claimed} ({found}); send the media_type the file really has")]
    Mismatch {
        claimed: String,
        found: &'static str,
    },
    #[error("data is not valid base64: {0}")]
    BadBase64(String),
    #[error("the image is {size} bytes, over the {limit}-byte limit (--max-blob-bytes)")]
    TooLarge { size: u64, limit: u64 },
    #[error(
        "the blob store holds {used} bytes and this image of {size} would pass its {limit}-byte \
         bound (--max-blob-store-bytes); raise it, or wait for unused images to be collected"
    )]
    StoreFull { used: u64, size: u64, limit: u64 },
    #[error("no blob {0} is stored here; upload it with put_blob first")]
    NotFound(String),
    #[error("the blob store failed: {0}")]
    Io(#[from] std::io::Error),
}

impl BlobError {
    /// The protocol's error code for this refusal.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::UnsupportedType(_) | Self::Mismatch { .. } | Self::BadBase64(_) => {
                ErrorCode::InvalidParams
            }
            Self::TooLarge { .. } => ErrorCode::BlobTooLarge,
            Self::StoreFull { .. } => ErrorCode::BlobStoreFull,
            Self::NotFound(_) => ErrorCode::BlobNotFound,
            Self::Io(_) => ErrorCode::StorageError,
        }
    }

    /// The status `POST/GET /v1/blobs` answers it with.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::UnsupportedType(_) => 415,
            Self::Mismatch { .. } | Self::BadBase64(_) => 400,
            Self::TooLarge { .. } => 413,
            Self::StoreFull { .. } => 507,
            Self::NotFound(_) => 404,
            Self::Io(_) => 500,
        }
    }
}

/// The image blobs of one data directory. Plain synchronous file code: call
/// it on the blocking pool.
#[derive(Debug, Clone)]
pub struct Blobs {
    store: ContentStore,
    limits: BlobLimits,
    /// The bytes the store holds, for `--max-blob-store-bytes`: counted by
    /// a listing when first needed (256 directories: milliseconds), then
    /// kept by each `put` and recounted by each collection — so a put does
    /// not list the store, and what another pod sharing the data directory
    /// stored is seen at the next collection.
    used: Arc<Mutex<Option<u64>>>,
}

impl Blobs {
    /// Opens (creating) `<data_dir>/blobs/`, sweeping what a crash left.
    pub fn open(data_dir: &Path, limits: BlobLimits) -> std::io::Result<Self> {
        let store = ContentStore::open(data_dir.join("blobs"))?;
        store.sweep_temporaries()?;
        Ok(Self {
            store,
            limits,
            used: Arc::default(),
        })
    }

    pub fn limits(&self) -> BlobLimits {
        self.limits
    }

    /// Refuses a size over `--max-blob-bytes` before anything is read.
    pub fn check_size(&self, size: u64) -> Result<(), BlobError> {
        if size > self.limits.max_blob_bytes {
            return Err(BlobError::TooLarge {
                size,
                limit: self.limits.max_blob_bytes,
            });
        }
        Ok(())
    }

    /// Checks `bytes` against `media_type` and the limits, then stores them
    /// durably (written, fsynced, renamed, the directory fsynced) before
    /// answering.
    pub fn put(&self, media_type: &str, bytes: &[u8]) -> Result<BlobInfo, BlobError> {
        if !ACCEPTED_TYPES.contains(&media_type) {
            return Err(BlobError::UnsupportedType(media_type.to_owned()));
        }
        let size = bytes.len() as u64;
        self.check_size(size)?;
        let found = sniff(bytes);
        if found != Some(media_type) {
            return Err(BlobError::Mismatch {
                claimed: media_type.to_owned(),
                found: found.unwrap_or("not an image type the pod takes"),
            });
        }
        let digest = self.store.put_admitted(bytes, |size| self.reserve(size))?;
        Ok(BlobInfo {
            digest,
            media_type: found.unwrap_or(media_type_fallback()),
            size,
            dims: dimensions(bytes),
        })
    }

    /// Counts `size` new bytes into the store, or refuses them when they
    /// would pass its bound. A put that fails after this leaves the count
    /// high until the next collection: erring toward refusing, never toward
    /// growing past the bound.
    fn reserve(&self, size: u64) -> Result<(), BlobError> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let now = match *used {
            Some(bytes) => bytes,
            None => self.store.total_bytes()?,
        };
        if now.saturating_add(size) > self.limits.max_store_bytes {
            *used = Some(now);
            return Err(BlobError::StoreFull {
                used: now,
                size,
                limit: self.limits.max_store_bytes,
            });
        }
        *used = Some(now + size);
        Ok(())
    }

    /// [`Blobs::put`] of base64 text, as `put_blob` carries it.
    pub fn put_base64(&self, media_type: &str, data: &str) -> Result<BlobInfo, BlobError> {
        use base64::Engine as _;
        // Cheap bound first: the decoded size is at most ¾ of the text.
        self.check_size((data.len() as u64).saturating_mul(3) / 4)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| BlobError::BadBase64(e.to_string()))?;
        self.put(media_type, &bytes)
    }

    /// Parses a protocol id, `sha256:<hex>`.
    pub fn parse_id(id: &str) -> Result<Digest, BlobError> {
        Digest::from_id(id).ok_or_else(|| BlobError::NotFound(id.to_owned()))
    }

    /// Where the blob's file is (whether or not it exists).
    pub fn path(&self, digest: &Digest) -> PathBuf {
        self.store.path(digest)
    }

    /// The blob's bytes and what they are.
    pub fn get(&self, id: &str) -> Result<(BlobInfo, Vec<u8>), BlobError> {
        let digest = Self::parse_id(id)?;
        let bytes = match self.store.get(&digest) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(BlobError::NotFound(id.to_owned()))
            }
            Err(e) => return Err(e.into()),
        };
        let info = BlobInfo {
            digest,
            media_type: sniff(&bytes).unwrap_or(media_type_fallback()),
            size: bytes.len() as u64,
            dims: dimensions(&bytes),
        };
        Ok((info, bytes))
    }

    /// What the blob is, from its header alone (the first 64 KiB: enough
    /// for every format's dimensions in practice).
    pub fn info(&self, digest: &Digest) -> Result<BlobInfo, BlobError> {
        let path = self.store.path(digest);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(BlobError::NotFound(digest.id()))
            }
            Err(e) => return Err(e.into()),
        };
        let size = file.metadata()?.len();
        let mut head = Vec::with_capacity(64 * 1024);
        file.take(64 * 1024).read_to_end(&mut head)?;
        let dims = dimensions(&head).or_else(|| {
            // A JPEG whose frame header sits past the first 64 KiB (big
            // EXIF blocks): read it whole, still without decoding pixels.
            std::fs::read(&path).ok().and_then(|b| dimensions(&b))
        });
        Ok(BlobInfo {
            digest: *digest,
            media_type: sniff(&head).unwrap_or(media_type_fallback()),
            size,
            dims,
        })
    }

    /// Deletes blobs that no id in `named` keeps and that are older than
    /// `ttl`; answers how many went.
    pub fn collect(&self, named: &HashSet<Digest>, ttl: Duration) -> std::io::Result<usize> {
        self.collect_from(self.store.list()?, named, ttl)
    }

    /// [`Blobs::collect`] over a listing of the store already made.
    fn collect_from(
        &self,
        stored: Vec<Stored>,
        named: &HashSet<Digest>,
        ttl: Duration,
    ) -> std::io::Result<usize> {
        let now = SystemTime::now();
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let (mut removed, mut kept) = (0, 0);
        for stored in stored {
            if older_than(&stored, ttl, now) && !named.contains(&stored.digest) {
                self.store.remove(&stored.digest)?;
                removed += 1;
            } else {
                kept += stored.size;
            }
        }
        *used = Some(kept);
        Ok(removed)
    }

    /// Collects the blobs no session log under `sessions_dir` names. The
    /// logs are read only when some blob is old enough to go: a pod whose
    /// sessions hold no image reads none of them at its start.
    pub fn collect_unnamed(&self, sessions_dir: &Path) -> std::io::Result<usize> {
        let stored = self.store.list()?;
        let now = SystemTime::now();
        let named = match stored.iter().any(|s| older_than(s, UNNAMED_BLOB_TTL, now)) {
            true => named_in_logs(sessions_dir)?,
            false => HashSet::new(),
        };
        self.collect_from(stored, &named, UNNAMED_BLOB_TTL)
    }
}

/// Whether `stored` was last written more than `ttl` before `now`.
fn older_than(stored: &Stored, ttl: Duration, now: SystemTime) -> bool {
    now.duration_since(stored.modified)
        .is_ok_and(|age| age > ttl)
}

/// Every `sha256:<hex>` any session log mentions. Reading ids anywhere in
/// a line, not only in image segments, errs toward keeping a blob.
fn named_in_logs(sessions_dir: &Path) -> std::io::Result<HashSet<Digest>> {
    let mut named = HashSet::new();
    let entries = match std::fs::read_dir(sessions_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(named),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        ids_in(std::fs::File::open(&path)?, &mut named)?;
    }
    Ok(named)
}

/// Adds the ids `source` mentions to `named`, reading it a chunk at a time:
/// a session log can be hundreds of megabytes, and this runs beside the
/// pod's work.
fn ids_in(mut source: impl Read, named: &mut HashSet<Digest>) -> std::io::Result<()> {
    const PREFIX: &[u8] = b"sha256:";
    const ID_LEN: usize = PREFIX.len() + 64;
    const CHUNK: usize = 64 * 1024;
    let finder = memchr::memmem::Finder::new(PREFIX);
    let mut buf = vec![0; CHUNK + ID_LEN];
    // The end of the last read, searched again: an id it cut in two is
    // found whole in the next window.
    let mut carried = 0;
    loop {
        let n = match source.read(&mut buf[carried..]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let window = &buf[..carried + n];
        for at in finder.find_iter(window) {
            let hex = window.get(at + PREFIX.len()..at + ID_LEN);
            if let Some(digest) = hex
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(Digest::from_hex)
            {
                named.insert(digest);
            }
        }
        let end = window.len();
        carried = end.min(ID_LEN - 1);
        buf.copy_within(end - carried..end, 0);
    }
}

/// Never reached for stored blobs (every one passed [`sniff`]); a blob
/// file put there by hand is served as opaque bytes.
fn media_type_fallback() -> &'static str {
    "application/octet-stream"
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 PNG, 3×2 in its header.
    pub(crate) fn png(width: u32, height: u32) -> Vec<u8> {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        bytes.extend_from_slice(&width.to_be_bytes());
        bytes.extend_from_slice(&height.to_be_bytes());
        bytes.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        bytes
    }

    #[test]
    fn ids_are_found_across_the_reads_that_cut_them() {
        let digests: Vec<Digest> = (0..200u32).map(|i| Digest::of(&i.to_be_bytes())).collect();
        let mut log = String::new();
        for (i, digest) in digests.iter().enumerate() {
            // Lines of every length, so that ids fall across every offset
            // of the 64 KiB chunks.
            log.push_str(&"x".repeat(i * 331 % 4000));
            log.push_str(&format!("{{\"blob\":\"{}\"}}\n", digest.id()));
        }
        /// Hands out at most 97 bytes a read: most ids are cut.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = buf.len().min(97).min(self.0.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        for source in [
            &mut log.as_bytes() as &mut dyn Read,
            &mut Trickle(log.as_bytes()),
        ] {
            let mut named = HashSet::new();
            ids_in(source, &mut named).unwrap();
            assert_eq!(named.len(), digests.len());
            assert!(digests.iter().all(|d| named.contains(d)));
        }
    }

    fn blobs(limits: BlobLimits) -> (tempfile::TempDir, Blobs) {
        let dir = tempfile::tempdir().unwrap();
        let blobs = Blobs::open(dir.path(), limits).unwrap();
        (dir, blobs)
    }

    #[test]
    fn a_png_is_stored_once_with_its_size_read_from_the_header() {
        let (_dir, blobs) = blobs(BlobLimits::default());
        let bytes = png(1280, 720);
        let a = blobs.put("image/png", &bytes).unwrap();
        assert_eq!(a.dims, Some((1280, 720)));
        assert_eq!(a.size, bytes.len() as u64);
        assert_eq!(blobs.put("image/png", &bytes).unwrap().digest, a.digest);
        let (info, back) = blobs.get(&a.digest.id()).unwrap();
        assert_eq!(back, bytes);
        assert_eq!(info.media_type, "image/png");
        assert_eq!(blobs.info(&a.digest).unwrap(), a);
    }

    #[test]
    fn every_refusal_has_its_code_and_status() {
        let (_dir, small) = blobs(BlobLimits {
            max_blob_bytes: 64,
            max_store_bytes: 60,
        });
        let cases: Vec<(BlobError, ErrorCode, u16)> = vec![
            (
                small.put("image/bmp", b"BM").unwrap_err(),
                ErrorCode::InvalidParams,
                415,
            ),
            (
                small.put("image/jpeg", &png(1, 1)).unwrap_err(),
                ErrorCode::InvalidParams,
                400,
            ),
            (
                small.put_base64("image/png", "not*base64").unwrap_err(),
                ErrorCode::InvalidParams,
                400,
            ),
            (
                small.put("image/png", &[0x89; 65]).unwrap_err(),
                ErrorCode::BlobTooLarge,
                413,
            ),
            (
                small
                    .put("image/png", &[png(1, 1), vec![0; 30]].concat())
                    .unwrap_err(),
                ErrorCode::BlobStoreFull,
                507,
            ),
            (
                small.get(&Digest::of(b"x").id()).unwrap_err(),
                ErrorCode::BlobNotFound,
                404,
            ),
            (
                small.get("../../etc/passwd").unwrap_err(),
                ErrorCode::BlobNotFound,
                404,
            ),
        ];
        for (error, code, status) in cases {
            assert_eq!(
                (error.code(), error.http_status()),
                (code, status),
                "{error}"
            );
        }
    }

    #[test]
    fn unnamed_blobs_go_after_their_time_and_named_ones_stay() {
        let (dir, blobs) = blobs(BlobLimits::default());
        let kept = blobs.put("image/png", &png(1, 1)).unwrap().digest;
        let dropped = blobs.put("image/png", &png(2, 2)).unwrap().digest;
        let sessions = dir.path().join("sessions");
        std::fs::create_dir(&sessions).unwrap();
        std::fs::write(
            sessions.join("s.jsonl"),
            format!("{{\"blob\":\"{}\"}}\n", kept.id()),
        )
        .unwrap();
        assert_eq!(blobs.collect_unnamed(&sessions).unwrap(), 0, "too young");
        let named = named_in_logs(&sessions).unwrap();
        assert_eq!(blobs.collect(&named, Duration::ZERO).unwrap(), 1);
        assert!(blobs.info(&kept).is_ok());
        assert!(matches!(blobs.info(&dropped), Err(BlobError::NotFound(_))));
    }
}
