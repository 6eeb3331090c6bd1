//! A content-addressed store: bytes kept once, named by their SHA-256.
//!
//! Two users share this one type, each with a directory of its own: the
//! image blobs clients send (`<data-dir>/blobs/`, served back by `get_blob`)
//! and the file contents checkpoints keep (`<data-dir>/checkpoints/objects/`,
//! which `get_blob` must never serve). Keeping them apart by directory rather
//! than by a flag on each object means no bug in a lookup can hand a client a
//! checkpointed file it never sent.
//!
//! Layout is git's: `ab/cdef…` (the first two hex digits as a fan-out
//! directory), so no directory grows past a few thousand entries. An object
//! is written to a uniquely named temporary file in the root, fsynced,
//! renamed into place, and its directory fsynced — so after
//! [`ContentStore::put`] returns, the object survives a crash, and a crash
//! before that leaves at most a temporary file (removed by
//! [`ContentStore::sweep_temporaries`]), never a torn object under its
//! final name. The same bytes are never kept twice.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use sha2::{Digest as _, Sha256};

use super::log_file::sync_dir;

/// The SHA-256 of some bytes: an object's name.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest([u8; 32]);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The digest's 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A digest from its 32 bytes (as [`Digest::as_bytes`] gave them).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Lowercase hex, 64 digits.
    pub fn hex(&self) -> String {
        let mut out = String::with_capacity(64);
        for byte in self.0 {
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        out
    }

    /// Parses 64 hex digits (either case). Anything else — a path, a prefix,
    /// `..` — is `None`, so a name from a client can never leave the store.
    pub fn from_hex(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks_exact(2).enumerate() {
            out[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        Some(Self(out))
    }

    /// The protocol's spelling, `sha256:<hex>`.
    pub fn id(&self) -> String {
        format!("sha256:{}", self.hex())
    }

    /// Parses the protocol's spelling, `sha256:<hex>`.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::from_hex(id.strip_prefix("sha256:")?)
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// One stored object, as [`ContentStore::list`] reports it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub digest: Digest,
    pub size: u64,
    /// When it was last written (a `put` of bytes already there refreshes
    /// it), so collection can spare what was just stored.
    pub modified: SystemTime,
}

/// A directory of objects named by their digest. Plain synchronous file
/// code: call it on the blocking pool, never on an actor's thread.
#[derive(Debug, Clone)]
pub struct ContentStore {
    root: PathBuf,
    /// Held while a `put` checks for, makes and syncs a fan-out
    /// directory, so that a second `put` into a directory just made cannot
    /// see it and return before its entry in the root is durable.
    fan_out: Arc<Mutex<()>>,
}

impl ContentStore {
    /// Opens (creating, `0700`) the store at `root`. Its fan-out
    /// directories are made as the first object lands in each: making all
    /// 256 up front cost a fresh data directory's first start tens of
    /// milliseconds, paid before its first turn, for directories most
    /// stores never fill.
    pub fn open(root: impl Into<PathBuf>) -> std::io::Result<Self> {
        let root = root.into();
        crate::private::create_dir(&root, true)?;
        Ok(Self {
            root,
            fan_out: Arc::new(Mutex::new(())),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the object named `digest` lives (whether or not it exists).
    pub fn path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.hex();
        self.root.join(&hex[..2]).join(&hex[2..])
    }

    /// Whether the object is stored.
    pub fn contains(&self, digest: &Digest) -> bool {
        self.path(digest).is_file()
    }

    /// Stores `bytes` durably and returns their digest. Bytes already stored
    /// are not kept twice; their modification time is refreshed so a
    /// collection running meanwhile spares them.
    pub fn put(&self, bytes: &[u8]) -> std::io::Result<Digest> {
        self.put_admitted(bytes, |_| Ok(()))
    }

    /// [`ContentStore::put`], asking `admit` (with the object's size) before
    /// new bytes are kept — the bound of a store — and never for bytes
    /// already there.
    ///
    /// The digest is computed, and `admit` asked, while the temporary
    /// file's `fsync` waits on the disk on a second thread: hashing 5 MiB
    /// costs about as much as syncing it, and neither needs the other until
    /// the rename. The price is that bytes already stored, or refused, are
    /// written once before that is known (then removed): rare cases, in
    /// which nothing is lost.
    pub fn put_admitted<E: From<std::io::Error>>(
        &self,
        bytes: &[u8],
        admit: impl FnOnce(u64) -> Result<(), E>,
    ) -> Result<Digest, E> {
        let (tmp, file) = self.temporary(bytes)?;
        let outcome = std::thread::scope(|scope| {
            let synced = scope.spawn(|| file.sync_all());
            let digest = Digest::of(bytes);
            let decided = if self.refresh(&digest) {
                Ok(Placement::AlreadyStored)
            } else {
                admit(bytes.len() as u64).map(|()| Placement::New)
            };
            let synced = synced
                .join()
                .unwrap_or_else(|_| Err(std::io::Error::other("the fsync thread panicked")));
            synced?;
            Ok((digest, decided?))
        });
        match outcome {
            Ok((digest, Placement::New)) => {
                self.place(&tmp, &digest)?;
                Ok(digest)
            }
            done => {
                let _ = std::fs::remove_file(&tmp);
                done.map(|(digest, _)| digest)
            }
        }
    }

    /// Stores `bytes` under a digest the caller already computed (checked
    /// only in debug builds: hashing twice is the cost this saves). Bytes
    /// already stored cost one `stat`.
    pub fn put_as(&self, digest: Digest, bytes: &[u8]) -> std::io::Result<()> {
        debug_assert_eq!(digest, Digest::of(bytes));
        if self.refresh(&digest) {
            return Ok(());
        }
        let (tmp, file) = self.temporary(bytes)?;
        if let Err(e) = file.sync_all() {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        self.place(&tmp, &digest)
    }

    /// A new temporary file in the root holding `bytes` (not yet synced),
    /// and its path; nothing is left behind when writing fails.
    fn temporary(&self, bytes: &[u8]) -> std::io::Result<(PathBuf, std::fs::File)> {
        let tmp = self.root.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
        let mut file = crate::private::file_options()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        if let Err(e) = file.write_all(bytes) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok((tmp, file))
    }

    /// Whether `digest` is stored; if so its modification time is refreshed
    /// (best effort: a store on a file system without times still works).
    fn refresh(&self, digest: &Digest) -> bool {
        let path = self.path(digest);
        if !path.is_file() {
            return false;
        }
        let now = std::fs::FileTimes::new().set_modified(SystemTime::now());
        if let Ok(file) = std::fs::File::options().write(true).open(&path) {
            let _ = file.set_times(now);
        }
        true
    }

    /// Renames a synced temporary file into place and makes the name
    /// durable. The object's fan-out directory is made if it is not there
    /// (the first object in it, or one a user pruned by hand), and the root
    /// synced before the object goes in, so the directory's name is as
    /// durable as the object's.
    fn place(&self, tmp: &Path, digest: &Digest) -> std::io::Result<()> {
        let path = self.path(digest);
        let dir = path.parent().unwrap_or(&self.root);
        let placed = self
            .fan_out_dir(dir)
            .and_then(|()| std::fs::rename(tmp, &path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(tmp);
            return Err(e);
        }
        sync_dir(dir)
    }

    /// Makes `dir`, a fan-out directory, durably, unless it is there.
    fn fan_out_dir(&self, dir: &Path) -> std::io::Result<()> {
        // A poisoned lock guards nothing but this check: go on.
        let _made = self.fan_out.lock().unwrap_or_else(|e| e.into_inner());
        if dir.is_dir() {
            return Ok(());
        }
        crate::private::create_dir(dir, false)?;
        sync_dir(&self.root)
    }

    /// The object's bytes; `NotFound` when it is not stored.
    pub fn get(&self, digest: &Digest) -> std::io::Result<Vec<u8>> {
        std::fs::read(self.path(digest))
    }

    /// The object's size, or `None` when it is not stored.
    pub fn size(&self, digest: &Digest) -> Option<u64> {
        std::fs::metadata(self.path(digest)).ok().map(|m| m.len())
    }

    /// Deletes one object (a missing one is not an error).
    pub fn remove(&self, digest: &Digest) -> std::io::Result<()> {
        match std::fs::remove_file(self.path(digest)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every stored object. Names that are not objects (temporary files,
    /// strays) are skipped.
    pub fn list(&self) -> std::io::Result<Vec<Stored>> {
        let mut out = Vec::new();
        for fan in read_dir_or_empty(&self.root)? {
            let fan = fan?;
            let prefix = fan.file_name().to_string_lossy().into_owned();
            if prefix.len() != 2 || !fan.file_type()?.is_dir() {
                continue;
            }
            for entry in std::fs::read_dir(fan.path())? {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(digest) = Digest::from_hex(&format!("{prefix}{name}")) else {
                    continue;
                };
                let meta = entry.metadata()?;
                out.push(Stored {
                    digest,
                    size: meta.len(),
                    modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
        Ok(out)
    }

    /// The bytes all objects take.
    pub fn total_bytes(&self) -> std::io::Result<u64> {
        Ok(self.list()?.iter().map(|s| s.size).sum())
    }

    /// Removes temporary files a crash left behind mid-`put`.
    pub fn sweep_temporaries(&self) -> std::io::Result<()> {
        for fan in read_dir_or_empty(&self.root)? {
            let fan = fan?;
            if is_temporary(&fan) {
                let _ = std::fs::remove_file(fan.path());
            }
            if !fan.file_type()?.is_dir() {
                continue;
            }
            for entry in std::fs::read_dir(fan.path())? {
                let entry = entry?;
                if is_temporary(&entry) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(())
    }
}

/// A `put`'s temporary file (in the root, or in a fan-out directory where
/// earlier versions wrote them).
fn is_temporary(entry: &std::fs::DirEntry) -> bool {
    entry.file_name().to_string_lossy().starts_with(".tmp-")
}

/// What [`ContentStore::put_admitted`] does with its temporary file.
enum Placement {
    New,
    AlreadyStored,
}

fn read_dir_or_empty(dir: &Path) -> std::io::Result<Vec<std::io::Result<std::fs::DirEntry>>> {
    match std::fs::read_dir(dir) {
        Ok(entries) => Ok(entries.collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client names the blob it is about to send by the protocol's
    /// function; the store names what it stored by its digest: one id.
    #[test]
    fn a_clients_blob_id_is_the_stores() {
        for bytes in [&b""[..], b"hello", &[0xff; 1000]] {
            assert_eq!(Digest::of(bytes).id(), crate::protocol::blob::id_of(bytes));
        }
    }

    #[test]
    fn the_same_bytes_are_stored_once_under_their_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path().join("objects")).unwrap();
        let a = store.put(b"hello").unwrap();
        assert_eq!(
            a.hex(),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        assert_eq!(store.put(b"hello").unwrap(), a);
        assert_eq!(store.get(&a).unwrap(), b"hello");
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(store.total_bytes().unwrap(), 5);
        store.remove(&a).unwrap();
        assert!(!store.contains(&a));
        store.remove(&a).unwrap();
    }

    #[test]
    fn a_fan_out_directory_is_made_when_its_first_object_lands() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("objects");
        let store = ContentStore::open(&root).unwrap();
        let entries = || std::fs::read_dir(&root).unwrap().count();
        assert_eq!(entries(), 0, "a fresh store is one empty directory");
        let d = store.put(b"hello").unwrap();
        assert_eq!(entries(), 1);
        assert!(root.join(&d.hex()[..2]).is_dir());
        // Pruned by hand: made again by the next object that needs it.
        store.remove(&d).unwrap();
        std::fs::remove_dir(root.join(&d.hex()[..2])).unwrap();
        assert_eq!(store.put(b"hello").unwrap(), d);
        assert_eq!(store.get(&d).unwrap(), b"hello");
        let reopened = ContentStore::open(&root).unwrap();
        assert_eq!(reopened.list().unwrap().len(), 1);
    }

    #[test]
    fn names_that_are_not_digests_never_reach_the_file_system() {
        for bad in [
            "",
            "..",
            "../../etc/passwd",
            &"a".repeat(63),
            &"g".repeat(64),
        ] {
            assert!(Digest::from_hex(bad).is_none(), "{bad}");
        }
        assert!(Digest::from_id(&format!("sha256:{}", "A".repeat(64))).is_some());
        assert!(Digest::from_id(&"a".repeat(64)).is_none());
    }

    #[test]
    fn temporaries_left_by_a_crash_are_swept_and_never_listed() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        let d = store.put(b"x").unwrap();
        let stray = store.path(&d).with_file_name(".tmp-crashed");
        std::fs::write(&stray, b"half").unwrap();
        let stray_in_root = dir.path().join(".tmp-also-crashed");
        std::fs::write(&stray_in_root, b"half").unwrap();
        assert_eq!(store.list().unwrap().len(), 1);
        store.sweep_temporaries().unwrap();
        assert!(!stray.exists());
        assert!(!stray_in_root.exists());
        assert!(store.contains(&d));
    }

    #[test]
    fn refused_or_known_bytes_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let store = ContentStore::open(dir.path()).unwrap();
        let refused = store.put_admitted(b"big", |size| {
            assert_eq!(size, 3);
            Err(std::io::Error::other("full"))
        });
        assert_eq!(refused.unwrap_err().to_string(), "full");
        assert!(store.list().unwrap().is_empty());
        let d = store.put(b"x").unwrap();
        let again = store.put_admitted(b"x", |_| -> std::io::Result<()> {
            panic!("bytes already stored are not admitted again")
        });
        assert_eq!(again.unwrap(), d);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.len() != 2)
            .collect();
        assert!(names.is_empty(), "temporary files left: {names:?}");
    }
}
