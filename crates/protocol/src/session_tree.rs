//! A session listing as the conversations it holds: every rewind and fork
//! under the session it came from, so that ten undos read as one
//! conversation with ten branches, not ten sessions of one title. Every
//! client that lists sessions (`pod sessions`, the TUI's and the web page's
//! pickers) draws this same tree.

use uuid::Uuid;

use super::SessionInfo;

/// One row of the tree: which session, how deep, and the guide drawn
/// before its title (`├ `, `└ `, `│ ` per level; empty at the top).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeRow {
    /// The session's index in the listing.
    pub index: usize,
    /// 0 for a session listed without the one it came from.
    pub depth: usize,
    pub guide: String,
    /// The index of the session it came from, when that is listed.
    pub parent: Option<usize>,
}

/// The rows of `sessions` (newest activity first, as `list_sessions`
/// answers) as a tree: a session forked from a listed one right under it.
/// Groups, and the branches of one session, come in the order of their
/// newest activity, so the conversation worked on last stays on top. A
/// session whose origin is not listed (another workspace's, a deleted log)
/// is a top row; the sessions of a cycle (only a hand-edited log can make
/// one) come last, the cycle cut at the newest.
pub fn session_tree(sessions: &[SessionInfo]) -> Vec<TreeRow> {
    let position = |id: Uuid| sessions.iter().position(|s| s.session_id == id);
    let parent: Vec<Option<usize>> = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            s.forked_from
                .as_ref()
                .and_then(|f| position(f.session_id))
                .filter(|&p| p != i)
        })
        .collect();
    // The listing is newest first, so a subtree's newest activity is the
    // smallest index in it.
    let mut newest: Vec<usize> = (0..sessions.len()).collect();
    for i in 0..sessions.len() {
        let mut at = i;
        for _ in 0..sessions.len() {
            let Some(up) = parent[at] else { break };
            newest[up] = newest[up].min(i);
            at = up;
        }
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); sessions.len()];
    for (i, p) in parent.iter().enumerate() {
        if let Some(p) = p {
            children[*p].push(i);
        }
    }
    for list in &mut children {
        list.sort_by_key(|&c| newest[c]);
    }
    let mut tops: Vec<usize> = (0..sessions.len())
        .filter(|&i| parent[i].is_none())
        .collect();
    tops.sort_by_key(|&i| newest[i]);
    let mut rows = Vec::with_capacity(sessions.len());
    let mut seen = vec![false; sessions.len()];
    // Sessions on a cycle have no top: the newest becomes one.
    for top in tops.into_iter().chain(0..sessions.len()) {
        if seen[top] {
            continue;
        }
        // Depth-first, each entry carrying the guide of its ancestors.
        let mut stack = vec![(top, 0, String::new(), String::new())];
        while let Some((index, depth, guide, above)) = stack.pop() {
            if std::mem::replace(&mut seen[index], true) {
                continue;
            }
            rows.push(TreeRow {
                index,
                depth,
                guide,
                parent: (depth > 0).then(|| parent[index]).flatten(),
            });
            let below: Vec<usize> = children[index]
                .iter()
                .copied()
                .filter(|&c| !seen[c])
                .collect();
            let last = below.len().saturating_sub(1);
            for (n, &child) in below.iter().enumerate().rev() {
                let (mark, through) = if n == last {
                    ("└ ", "  ")
                } else {
                    ("├ ", "│ ")
                };
                let (guide, next) = if depth == 0 {
                    (mark.to_owned(), through.to_owned())
                } else {
                    (format!("{above}{mark}"), format!("{above}{through}"))
                };
                stack.push((child, depth + 1, guide, next));
            }
        }
    }
    rows
}

/// `sessions` reordered as the tree draws them, with the rows, each row's
/// `index` (and `parent`) now its position: for a picker that moves its
/// selection row by row.
pub fn in_tree_order(sessions: Vec<SessionInfo>) -> (Vec<SessionInfo>, Vec<TreeRow>) {
    let rows = session_tree(&sessions);
    let mut moved_to = vec![0; sessions.len()];
    for (at, row) in rows.iter().enumerate() {
        moved_to[row.index] = at;
    }
    let mut slots: Vec<Option<SessionInfo>> = sessions.into_iter().map(Some).collect();
    let ordered = rows
        .iter()
        .filter_map(|row| slots[row.index].take())
        .collect();
    let rows = rows
        .into_iter()
        .enumerate()
        .map(|(at, row)| TreeRow {
            index: at,
            parent: row.parent.map(|p| moved_to[p]),
            ..row
        })
        .collect();
    (ordered, rows)
}

/// What a row says of its session's origin, for a branch: `rewind` or
/// `fork`; `None` for a session that is neither.
pub fn branch_kind(session: &SessionInfo) -> Option<&'static str> {
    match (&session.forked_from, session.rewound) {
        (Some(_), true) => Some("rewind"),
        (Some(_), false) => Some("fork"),
        (None, _) => None,
    }
}

/// Whether a branch's title is the one of the session it came from (the
/// usual rewind keeps the first message): a row then leaves it out, as it
/// would only repeat the row above. False for a top row and for a session
/// without a title.
pub fn repeats_title(sessions: &[SessionInfo], row: &TreeRow) -> bool {
    let Some(parent) = row.parent else {
        return false;
    };
    let own = sessions[row.index].shown_title(sessions);
    own.is_some() && own == sessions[parent].shown_title(sessions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ForkPoint;

    fn session(n: u128, from: Option<u128>, title: &str) -> SessionInfo {
        SessionInfo {
            session_id: Uuid::from_u128(n),
            created_at: String::new(),
            updated_at: String::new(),
            entries: 1,
            title: Some(title.into()),
            compacted_from: None,
            forked_from: from.map(|f| ForkPoint {
                session_id: Uuid::from_u128(f),
                seq: Some(3),
            }),
            current: false,
            workspace: None,
            rewound: true,
        }
    }

    fn drawn(sessions: &[SessionInfo]) -> Vec<String> {
        session_tree(sessions)
            .iter()
            .map(|r| {
                let title = if repeats_title(sessions, r) {
                    "=".to_owned()
                } else {
                    sessions[r.index].shown_title(sessions).unwrap_or_default()
                };
                format!(
                    "{}{} {title}",
                    r.guide,
                    sessions[r.index].session_id.as_u128()
                )
            })
            .collect()
    }

    #[test]
    fn branches_sit_under_their_origin_newest_first() {
        // Newest first: 4 (a rewind of 2), 5 (alone), 2 (a rewind of 1),
        // 3 (a fork of 1), 1, 6 (a fork of a session not listed).
        let sessions = [
            session(4, Some(2), "fix"),
            session(5, None, "other"),
            session(2, Some(1), "fix"),
            session(3, Some(1), "try this"),
            session(1, None, "fix"),
            session(6, Some(99), "orphan"),
        ];
        assert_eq!(
            drawn(&sessions),
            [
                "1 fix",
                "├ 2 =",
                "│ └ 4 =",
                "└ 3 try this",
                "5 other",
                "6 orphan"
            ]
        );
    }

    #[test]
    fn in_tree_order_moves_the_sessions_with_their_rows() {
        let sessions = vec![
            session(2, Some(1), "fix"),
            session(3, None, "other"),
            session(1, None, "fix"),
        ];
        let (ordered, rows) = in_tree_order(sessions.clone());
        let ids: Vec<u128> = ordered.iter().map(|s| s.session_id.as_u128()).collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(drawn(&ordered), drawn(&sessions), "the same tree");
        assert_eq!(
            rows.iter().map(|r| (r.index, r.parent)).collect::<Vec<_>>(),
            [(0, None), (1, Some(0)), (2, None)]
        );
    }

    #[test]
    fn a_cycle_is_cut_and_every_session_is_listed_once() {
        let sessions = [
            session(1, Some(2), "a"),
            session(2, Some(1), "b"),
            session(3, Some(3), "c"),
        ];
        assert_eq!(drawn(&sessions), ["3 c", "1 a", "└ 2 b"]);
    }
}
