//! This client's requests in flight: one map, `request_id` → what to do
//! with the answer. An answer is read as what was asked for, never
//! guessed from which fields it happens to carry, and a refusal is said
//! where the thing refused was asked.
//!
//! The `/`, `@` and `#` menu keeps its own request (only its latest
//! counts, [`crate::tui::composer`]); an answer nothing here waits on is
//! offered to it.

use std::collections::HashMap;

use super::{App, QueuedRun};
use crate::protocol::answer::{self, Answer};
use crate::protocol::{ErrorCode, Event, Level, Method, Response};
use crate::tui::composer::{Atom, MenuItem};
use crate::tui::overlay::{Overlay, SessionPicker};

/// What to do with the answer to one request.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// The `/` command that sent it, named if the pod refuses it (on the
    /// status line, where the user is looking, not above a streaming
    /// answer).
    pub command: Option<String>,
    pub then: Then,
}

/// What the answer is for.
#[derive(Debug, Default)]
pub(super) enum Then {
    /// Nothing beyond saying a refusal.
    #[default]
    Nothing,
    /// A message (`run`): listed under the conversation while the pod
    /// queues it; back into the input box if refused, never lost.
    Run(Vec<Atom>),
    /// A `cancel` taking back the queued run `run`.
    TakeBack { run: String },
    /// An `approve` for `call_id`.
    Approve { call_id: String },
    /// The workflow list asked for on every snapshot.
    Workflows,
    /// Whether the typed `@path` of the message about to be sent is a file.
    Resolve { path: String },
    /// `/permissions`: the rules, as a notice.
    Rules,
    /// `/jobs`: the jobs, as a notice.
    Jobs,
    /// `/jobs N`: what that job printed, as a notice.
    JobOutput,
    /// `/sessions`: the session picker.
    Sessions,
    /// `/diff`: the diff, as a notice.
    Diff,
}

/// Requests in flight, by `request_id`.
pub(super) type Requests = HashMap<String, Pending>;

impl App {
    /// Sends `method` and remembers what to do with its answer.
    pub(super) fn ask(&mut self, method: Method, then: Then) -> String {
        let id = self.send(method);
        self.pending.insert(
            id.clone(),
            Pending {
                command: None,
                then,
            },
        );
        id
    }

    /// Whether the refusal of request `id` is said here rather than in the
    /// conversation, as any other error is.
    pub(super) fn says_refusal(&self, id: &str) -> bool {
        self.pending.get(id).is_some_and(|p| {
            p.command.is_some()
                || matches!(
                    p.then,
                    Then::Run(_) | Then::TakeBack { .. } | Then::Approve { .. }
                )
        })
    }

    /// The pod refused request `id` (one [`App::says_refusal`] takes).
    pub(super) fn on_refused(&mut self, id: &str, code: ErrorCode, message: &str, event: &Event) {
        let Some(pending) = self.pending.remove(id) else {
            return;
        };
        match pending {
            Pending {
                then: Then::Run(atoms),
                ..
            } => {
                self.conversation.apply(event, self.now);
                self.give_back(atoms, "refused");
            }
            Pending {
                command: Some(command),
                ..
            } => {
                // What to do first: the status line cuts what does not fit.
                let hint = if code == ErrorCode::Busy {
                    " (Esc cancels the running turn)"
                } else {
                    ""
                };
                self.flash = Some(format!(
                    "{command} refused{hint}: {}",
                    crate::safe_text::line(message)
                ));
            }
            Pending {
                then: Then::TakeBack { run },
                ..
            } => {
                self.flash = Some(format!("could not take the message back: {message}"));
                if code == ErrorCode::NotRunning {
                    // Neither queued nor running: it is over, nothing to list.
                    self.queued.retain(|q| q.request_id != run);
                }
            }
            Pending {
                then: Then::Approve { call_id },
                ..
            } => self.on_refused_answer(&call_id, code, message),
            _ => {}
        }
    }

    pub(super) fn on_response(&mut self, response: Response) {
        // The pod's queue as it answered, whoever's run it counts.
        if let (Some(queued), Some(status)) = (response.queued, &mut self.status) {
            status.queued = status.queued.max(queued);
        }
        let Some(id) = response.request_id.clone() else {
            return;
        };
        let then = self.pending.remove(&id).map(|p| p.then).unwrap_or_default();
        match then {
            Then::Run(atoms) => {
                if response.queued.is_some_and(|n| n > 0) {
                    self.queued.push(QueuedRun {
                        request_id: id,
                        atoms,
                    });
                }
            }
            Then::TakeBack { run } => self.took_back(&run, response.removed == Some(true)),
            Then::Approve { .. } => {}
            Then::Rules => {
                if let Ok(answer) = answer::Rules::read(response) {
                    self.notice(super::command::rules_report(&answer.rules));
                }
            }
            Then::Jobs => {
                if let Ok(answer) = answer::Jobs::read(response) {
                    self.notice(super::command::jobs_report(&answer.jobs));
                }
            }
            Then::JobOutput => {
                if let Ok(answer) = answer::JobOutput::read(response) {
                    let text = super::command::job_output_report(&answer.jobs, &answer.output);
                    self.notice(text);
                }
            }
            Then::Diff => {
                if let Some(text) = crate::tui::checkpoints::response_text(&response) {
                    self.notice(text);
                }
            }
            Then::Sessions => {
                if let Ok(answer::Sessions { sessions }) = answer::Sessions::read(response) {
                    let workspace = self.greeting.as_ref().map(|g| g.workspace.clone());
                    self.overlay = Some(Overlay::Sessions(SessionPicker::new(sessions, workspace)));
                }
            }
            Then::Workflows => {
                if let Some(items) = menu_items(response) {
                    self.workflows = items;
                }
            }
            Then::Resolve { path } => {
                if let Some(items) = menu_items(response) {
                    if items.iter().any(|i| i.value == path) {
                        self.composer.make_file_ref(&path);
                    }
                }
                let resolved = !self
                    .pending
                    .values()
                    .any(|p| matches!(p.then, Then::Resolve { .. }));
                if resolved {
                    self.finish_resolving();
                }
            }
            Then::Nothing => {
                if let Some(items) = menu_items(response) {
                    self.on_completions(&id, items);
                }
            }
        }
    }

    /// Forgets the `approve`s in flight: the view was rebuilt from a
    /// snapshot, which says afresh what is pending.
    pub(super) fn forget_answers(&mut self) {
        self.pending
            .retain(|_, p| !matches!(p.then, Then::Approve { .. }));
    }

    /// Forgets the `@path`s still being asked about: the message goes as
    /// it is.
    pub(super) fn forget_resolving(&mut self) {
        self.pending
            .retain(|_, p| !matches!(p.then, Then::Resolve { .. }));
    }

    /// Whether a `cancel` taking back `run` is in flight.
    pub(super) fn taking_back(&self, run: &str) -> bool {
        self.pending
            .values()
            .any(|p| matches!(&p.then, Then::TakeBack { run: r } if r == run))
    }

    fn notice(&mut self, text: String) {
        self.conversation.push_notice(Level::Info, text);
        self.viewport.end();
    }
}

/// A `list_completions` answer as menu items.
fn menu_items(response: Response) -> Option<Vec<MenuItem>> {
    let answer = answer::Completions::read(response).ok()?;
    let items = answer.items.into_iter().map(|i| MenuItem {
        value: i.value,
        detail: i.detail,
        builtin: false,
    });
    Some(items.collect())
}
