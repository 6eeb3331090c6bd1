//! Resolving user input segments: checking them when a `run` arrives and
//! flattening them into the text the model reads.
//!
//! Nothing here drops input silently: a segment that cannot be expanded —
//! an unknown type, a slug with no file, a file that vanished since the check
//! — becomes a visible placeholder, so the model can say what it did not get.

use std::future::Future;
use std::io::Read;

use crate::blobs::{BlobError, Blobs};
use crate::protocol::{ErrorCode, Segment, SegmentView};
use crate::provider::ImageSlot;
use crate::tools::looks_binary;
use crate::workspace::{Access, OpenError, ScopeError, Workspace};

/// Largest file a `file_ref` (or a knowledge or workflow file) may inline:
/// it is re-sent on every model call of the session.
pub const MAX_REF_BYTES: u64 = 256 * 1024;

/// Where knowledge and workflow files live, relative to the workspace root.
pub const KNOWLEDGE_DIR: &str = ".pod/knowledge";
pub const WORKFLOWS_DIR: &str = ".pod/workflows";
/// Claude Code's custom commands, which users bring along: workflows too,
/// after `.pod/workflows` (a slug in both is the `.pod` one).
pub const CLAUDE_COMMANDS_DIR: &str = ".claude/commands";
/// Where workflows are looked for, first match wins.
pub const WORKFLOW_DIRS: [&str; 2] = [WORKFLOWS_DIR, CLAUDE_COMMANDS_DIR];

/// A `run` refused because of its segments; nothing is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub code: ErrorCode,
    pub message: String,
}

/// Expands a slug (`#style`, `/review`) to its text.
pub trait Resolver: Send + Sync {
    fn resolve(&self, slug: &str) -> Option<String>;
}

/// The resolvers flattening uses for `knowledge_ref` and `workflow_invoke`,
/// and the blob store `image` segments name.
pub struct Resolvers {
    pub knowledge: Box<dyn Resolver>,
    pub workflows: Box<dyn Resolver>,
    /// `None`: no store (tests, tools that only read text); every image is
    /// then unavailable.
    pub blobs: Option<Blobs>,
    /// `--max-context-images`.
    pub max_context_images: usize,
}

impl Resolvers {
    /// Resolvers reading `<workspace>/.pod/knowledge/<slug>.md` and
    /// `<workspace>/.pod/workflows/<slug>.md` (else
    /// `<workspace>/.claude/commands/<slug>.md`).
    pub fn for_workspace(workspace: &Workspace) -> Self {
        Self {
            knowledge: Box::new(FileResolver::new(workspace.clone(), [KNOWLEDGE_DIR])),
            workflows: Box::new(FileResolver::new(workspace.clone(), WORKFLOW_DIRS)),
            blobs: None,
            max_context_images: crate::blobs::DEFAULT_MAX_CONTEXT_IMAGES,
        }
    }

    /// These resolvers with the blob store images are read from, sending
    /// at most `max_context_images` of them.
    pub fn with_blobs(mut self, blobs: Option<Blobs>, max_context_images: usize) -> Self {
        self.blobs = blobs;
        self.max_context_images = max_context_images;
        self
    }
}

/// Resolves `slug` to the Markdown file `<dir>/<slug>.md` of the first of
/// its directories that has one. The file is found through
/// [`Workspace::resolve`], so a `.pod` directory symlinked out of the
/// workspace resolves nothing.
pub struct FileResolver {
    workspace: Workspace,
    dirs: Vec<String>,
}

impl FileResolver {
    pub fn new<D: Into<String>>(workspace: Workspace, dirs: impl IntoIterator<Item = D>) -> Self {
        Self {
            workspace,
            dirs: dirs.into_iter().map(Into::into).collect(),
        }
    }
}

impl Resolver for FileResolver {
    fn resolve(&self, slug: &str) -> Option<String> {
        if !is_valid_slug(slug) {
            return None;
        }
        self.dirs
            .iter()
            .find_map(|dir| read_ref(&self.workspace, &format!("{dir}/{slug}.md")).ok())
    }
}

/// A slug names one file in one directory: letters, digits, `-`, `_` and
/// inner `.`; no separators, no `..`, nothing hidden.
pub fn is_valid_slug(slug: &str) -> bool {
    !slug.is_empty()
        && slug.len() <= 128
        && !slug.starts_with('.')
        && !slug.contains("..")
        && slug
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Why a referenced file cannot be inlined.
#[derive(Debug)]
enum RefError {
    OutOfScope(ScopeError),
    Unreadable(String),
}

/// Reads a referenced workspace file as text: it must resolve inside the
/// workspace and be a regular, non-binary, UTF-8 file of at most
/// [`MAX_REF_BYTES`].
fn read_ref(workspace: &Workspace, path: &str) -> Result<String, RefError> {
    let unreadable = |reason: String| RefError::Unreadable(format!("{path}: {reason}"));
    let opened = workspace.open(path, Access::Read).map_err(|e| match e {
        OpenError::Scope(e) => RefError::OutOfScope(e),
        OpenError::NotFound => unreadable("no such file".into()),
        OpenError::IsDirectory => unreadable("is a directory, not a regular file".into()),
        e => unreadable(e.to_string()),
    })?;
    let meta = opened.metadata;
    if meta.len() > MAX_REF_BYTES {
        return Err(unreadable(format!(
            "{} bytes is over the {MAX_REF_BYTES}-byte limit for inlined files",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    opened
        .file
        .take(MAX_REF_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| unreadable(e.to_string()))?;
    if bytes.len() as u64 > MAX_REF_BYTES {
        return Err(unreadable(
            "grew over the size limit while being read".into(),
        ));
    }
    if looks_binary(&bytes) {
        return Err(unreadable("binary file".into()));
    }
    String::from_utf8(bytes).map_err(|_| unreadable("not UTF-8 text".into()))
}

/// Checks what can be checked before anything is committed: every `file_ref`
/// must resolve inside the workspace (else `file_ref_out_of_scope`) and be a
/// readable text file under the size limit (else `file_ref_unreadable`, as
/// for a path that cannot be resolved at all: empty, or a dangling symlink).
///
/// Every `image` segment must name a blob the store holds, with the
/// media type its bytes have (else `blob_not_found` / `invalid_params`).
///
/// A `file_ref` to an image file (an accepted type, by its bytes) is
/// stored as a blob now, and answered in the map (segment index → blob id)
/// that becomes `user_input.resolved`: the model is sent these bytes even
/// if the file changes before the request is built.
pub fn check(
    segments: &[Segment],
    workspace: &Workspace,
    blobs: Option<&Blobs>,
) -> Result<Resolved, InputError> {
    let mut resolved = Resolved::new();
    for (index, segment) in segments.iter().enumerate() {
        if let SegmentView::Image {
            blob, media_type, ..
        } = segment.view()
        {
            check_image(blobs, blob, media_type)?;
        }
        if let SegmentView::FileRef { path } = segment.view() {
            if let Some(id) = store_image_ref(workspace, blobs, path)? {
                resolved.insert(index.to_string(), id);
                continue;
            }
            read_ref(workspace, path).map_err(|e| match e {
                RefError::OutOfScope(e @ ScopeError::Outside { .. }) => InputError {
                    code: ErrorCode::FileRefOutOfScope,
                    message: format!("file_ref {e}"),
                },
                RefError::OutOfScope(e @ ScopeError::Invalid { .. }) => InputError {
                    code: ErrorCode::FileRefUnreadable,
                    message: format!("file_ref {e}"),
                },
                RefError::Unreadable(reason) => InputError {
                    code: ErrorCode::FileRefUnreadable,
                    message: format!("file_ref {reason}"),
                },
            })?;
        }
    }
    Ok(resolved)
}

/// `user_input.resolved`: segment index (as a string) → blob id.
pub type Resolved = std::collections::BTreeMap<String, String>;

/// Stores the file a `file_ref` names as a blob when its bytes are an
/// image the pod takes; `None` for any other file (or one that cannot be
/// opened: the text check that follows says why).
fn store_image_ref(
    workspace: &Workspace,
    blobs: Option<&Blobs>,
    path: &str,
) -> Result<Option<String>, InputError> {
    let Some(blobs) = blobs else {
        return Ok(None);
    };
    let Ok(opened) = workspace.open(path, Access::Read) else {
        return Ok(None);
    };
    let limit = blobs.limits().max_blob_bytes;
    let mut bytes = Vec::new();
    if opened.file.take(limit + 1).read_to_end(&mut bytes).is_err() {
        return Ok(None);
    }
    let Some(media_type) = crate::protocol::blob::sniff(&bytes) else {
        return Ok(None);
    };
    let refused = |e: BlobError| InputError {
        code: match e {
            BlobError::TooLarge { .. } | BlobError::Mismatch { .. } => ErrorCode::FileRefUnreadable,
            ref e => e.code(),
        },
        message: format!("file_ref {path}: {e}"),
    };
    let info = blobs.put(media_type, &bytes).map_err(refused)?;
    Ok(Some(info.digest.id()))
}

fn check_image(blobs: Option<&Blobs>, blob: &str, media_type: &str) -> Result<(), InputError> {
    let refused = |e: BlobError| InputError {
        code: e.code(),
        message: format!("image segment: {e}"),
    };
    let Some(blobs) = blobs else {
        return Err(refused(BlobError::NotFound(blob.to_owned())));
    };
    let info = blobs
        .info(&Blobs::parse_id(blob).map_err(refused)?)
        .map_err(refused)?;
    if info.media_type != media_type {
        return Err(InputError {
            code: ErrorCode::InvalidParams,
            message: format!(
                "image segment: blob {blob} is {}, not the media_type {media_type:?} the segment \
                 says",
                info.media_type
            ),
        });
    }
    Ok(())
}

/// [`check`] on the blocking pool, for callers on an actor thread: the
/// check opens and reads files, and a slow disk or a hostile file must not
/// stall every client. The paths are taken from `segments` now, so the
/// future owns what it needs and the caller keeps the segments.
pub fn check_async(
    segments: &[Segment],
    workspace: &Workspace,
    blobs: Option<&Blobs>,
) -> impl Future<Output = Result<Resolved, InputError>> + Send + 'static {
    // All of them when any is checked: `resolved` is keyed by index.
    let checked = segments.iter().any(|s| {
        matches!(
            s.view(),
            SegmentView::FileRef { .. } | SegmentView::Image { .. }
        )
    });
    let refs: Vec<Segment> = if checked {
        segments.to_vec()
    } else {
        Vec::new()
    };
    let workspace = workspace.clone();
    let blobs = blobs.cloned();
    async move {
        if refs.is_empty() {
            return Ok(Resolved::new());
        }
        tokio::task::spawn_blocking(move || check(&refs, &workspace, blobs.as_ref()))
            .await
            .unwrap_or_else(|e| {
                Err(InputError {
                    code: ErrorCode::FileRefUnreadable,
                    message: format!("checking the file refs failed: {e}"),
                })
            })
    }
}

/// Whether flattening these segments reads files: a `file_ref`, or the
/// knowledge or workflow file a slug names. Only such inputs are worth
/// sending to the blocking pool (see `JobEnv::read_inputs`).
pub fn reads_files(segments: &[Segment]) -> bool {
    segments.iter().any(|segment| {
        matches!(
            segment.view(),
            SegmentView::FileRef { .. }
                | SegmentView::KnowledgeRef { .. }
                | SegmentView::WorkflowInvoke { .. }
                | SegmentView::Image { .. }
        )
    })
}

/// A user input as the model gets it: its text, and the images that go
/// in it, each at a byte offset of the text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flattened {
    pub text: String,
    /// `(offset, image)`, offsets ascending. The slot's `send` is decided
    /// per request.
    pub images: Vec<(usize, ImageSlot)>,
}

impl From<String> for Flattened {
    fn from(text: String) -> Self {
        Self {
            text,
            images: Vec::new(),
        }
    }
}

/// What the model is told of an image: read from the blob's header only.
/// A blob that is gone (deleted from disk) is an unavailable image, never
/// an error: every later call of the session would fail with it.
fn image_slot(blobs: Option<&Blobs>, blob: &str, name: Option<&str>) -> Option<ImageSlot> {
    let digest = Blobs::parse_id(blob).ok()?;
    let info = blobs.and_then(|b| b.info(&digest).ok());
    Some(ImageSlot {
        blob: digest,
        media_type: info.as_ref().map_or("image/png", |i| i.media_type),
        name: name.unwrap_or("image").to_owned(),
        size: info.as_ref().map_or(0, |i| i.size),
        dims: info.as_ref().and_then(|i| i.dims),
        path: info.and(blobs.map(|b| b.path(&digest))),
        send: false,
    })
}

/// The text the model reads for these segments.
///
/// `text` and `paste` run inline, as the user typed them; every other
/// segment becomes a block on lines of its own, so the model sees where a
/// file or a workflow starts and ends.
///
/// An image — an `image` segment, or a `file_ref` that `resolved` says was
/// stored as a blob — is not text: it goes in [`Flattened::images`] at its
/// place in the text.
pub fn flatten(
    segments: &[Segment],
    resolved: &Resolved,
    workspace: &Workspace,
    resolvers: &Resolvers,
) -> Flattened {
    let mut out = String::new();
    let mut images = Vec::new();
    let mut after_block = false;
    for (index, segment) in segments.iter().enumerate() {
        let image = match (segment.view(), resolved.get(&index.to_string())) {
            (SegmentView::Image { blob, name, .. }, _) => Some((blob, name)),
            (SegmentView::FileRef { path }, Some(blob)) => Some((blob.as_str(), Some(path))),
            _ => None,
        };
        let (piece, is_block) = match (image, segment.view()) {
            (Some((blob, name)), _) => match image_slot(resolvers.blobs.as_ref(), blob, name) {
                Some(slot) => {
                    if !out.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    images.push((out.len(), slot));
                    after_block = true;
                    continue;
                }
                None => (format!("[image unavailable: {blob}]"), true),
            },
            (None, view) => flatten_text(view, workspace, resolvers),
        };
        if (is_block || after_block) && !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&piece);
        after_block = is_block;
    }
    Flattened { text: out, images }
}

/// A segment that is not an image, as text, and whether it is a block.
fn flatten_text(
    view: SegmentView<'_>,
    workspace: &Workspace,
    resolvers: &Resolvers,
) -> (String, bool) {
    match view {
        SegmentView::Text { text } | SegmentView::Paste { text, .. } => (text.to_owned(), false),
        SegmentView::FileRef { path } => (file_block(workspace, path), true),
        SegmentView::KnowledgeRef { slug } => (
            match resolvers.knowledge.resolve(slug) {
                Some(text) => tagged("knowledge", "slug", slug, &text),
                None => format!("[unknown knowledge: {slug}]"),
            },
            true,
        ),
        SegmentView::WorkflowInvoke { slug, args } => (workflow_block(resolvers, slug, args), true),
        SegmentView::Unknown { kind } => (format!("[unknown input: kind={kind}]"), true),
        // Reached only for an image `flatten` could not place.
        SegmentView::Image { blob, .. } => (format!("[image unavailable: {blob}]"), true),
    }
}

fn file_block(workspace: &Workspace, path: &str) -> String {
    match read_ref(workspace, path) {
        Ok(content) => tagged("file", "path", path, &content),
        Err(RefError::OutOfScope(e)) => format!("[file not included: {e}]"),
        Err(RefError::Unreadable(reason)) => {
            format!("[file not included, it can no longer be read: {reason}]")
        }
    }
}

/// A workflow's text is the instruction; the user's arguments follow it.
fn workflow_block(resolvers: &Resolvers, slug: &str, args: &str) -> String {
    let args = args.trim();
    match resolvers.workflows.resolve(slug) {
        Some(text) if args.is_empty() => tagged("workflow", "slug", slug, &text),
        Some(text) => tagged(
            "workflow",
            "slug",
            slug,
            &format!("{}\n\nArguments: {args}", text.trim_end()),
        ),
        None if args.is_empty() => format!("[unknown workflow: {slug}]"),
        None => format!("[unknown workflow: {slug}] {args}"),
    }
}

/// `<tag attr="value">\nbody\n</tag>`, the attribute escaped so a path
/// cannot close the tag.
fn tagged(tag: &str, attr: &str, value: &str, body: &str) -> String {
    let value = value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;");
    let body = body.strip_suffix('\n').unwrap_or(body);
    format!("<{tag} {attr}=\"{value}\">\n{body}\n</{tag}>")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_validated() {
        for ok in ["style", "rust-style", "a_b", "v1.2", "日本"] {
            assert!(is_valid_slug(ok), "{ok}");
        }
        for bad in ["", "../x", "a/b", "a\\b", "..", ".hidden", "a..b", "a b"] {
            assert!(!is_valid_slug(bad), "{bad}");
        }
    }

    #[test]
    fn tag_attributes_are_escaped() {
        assert_eq!(
            tagged("file", "path", "a\"<b>&", "x\n"),
            "<file path=\"a&quot;&lt;b>&amp;\">\nx\n</file>"
        );
    }
}
