//! Resolving user input segments: checking them when a `run` arrives and
//! flattening them into the text the model reads.

use crate::protocol::{ErrorCode, Segment, SegmentView};
use crate::workspace::Workspace;

/// A `run` refused because of its segments; nothing is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub code: ErrorCode,
    pub message: String,
}

/// Checks what can be checked before anything is committed: every `file_ref`
/// must resolve inside the workspace.
pub fn check(segments: &[Segment], workspace: &Workspace) -> Result<(), InputError> {
    for segment in segments {
        if let SegmentView::FileRef { path } = segment.view() {
            workspace.resolve(path).map_err(|e| InputError {
                code: ErrorCode::FileRefOutOfScope,
                message: format!("file_ref {e}"),
            })?;
        }
    }
    Ok(())
}

/// The text the model reads for these segments.
pub fn flatten(segments: &[Segment], _workspace: &Workspace, _resolvers: &Resolvers) -> String {
    let mut out = String::new();
    for segment in segments {
        match segment.view() {
            SegmentView::Text { text } | SegmentView::Paste { text, .. } => out.push_str(text),
            SegmentView::FileRef { path } => out.push_str(&format!("@{path}")),
            SegmentView::KnowledgeRef { slug } => out.push_str(&format!("#{slug}")),
            SegmentView::WorkflowInvoke { slug, args } => out.push_str(&format!("/{slug} {args}")),
            SegmentView::Unknown { kind } => out.push_str(&format!("[unknown input: kind={kind}]")),
        }
    }
    out
}

/// Looks up a knowledge entry or workflow by slug.
pub trait Resolver: Send + Sync {
    fn resolve(&self, slug: &str) -> Option<String>;
}

pub struct Resolvers {
    pub knowledge: Box<dyn Resolver>,
    pub workflows: Box<dyn Resolver>,
}

struct Nothing;

impl Resolver for Nothing {
    fn resolve(&self, _: &str) -> Option<String> {
        None
    }
}

impl Resolvers {
    pub fn for_workspace(_workspace: &Workspace) -> Self {
        Self {
            knowledge: Box::new(Nothing),
            workflows: Box::new(Nothing),
        }
    }
}
