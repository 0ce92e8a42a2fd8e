//! The ask executor's cache (`act::ask`): what a runner keeps between
//! turns so a request costs what the turn added. Its own file, below
//! `core::ctx` (which holds one) and `act::ask` (which fills it), so the
//! context never reaches up into the executors.

use std::collections::{HashSet, VecDeque};

use crate::core::state::roles::Role;
use crate::model::ModelRequest;
use longhand_session::BlobRef;

/// What a runner keeps between turns so a request costs what the turn
/// added, not the whole history: the history changes only at its ends
/// (answers and results are appended; whole turns are dropped from the
/// front), so the last request is updated at its ends instead of rebuilt.
#[derive(Default)]
pub(crate) struct ContextCache {
    /// The system prompt's and the tool list's blobs, per role (fixed for
    /// a session).
    pub(crate) fixed: std::collections::HashMap<&'static str, (BlobRef, BlobRef)>,
    /// The goal and its blob.
    pub(crate) goal: Option<(String, BlobRef)>,
    /// The last request, and which history items it holds.
    pub(crate) built: Option<Built>,
    /// Call ids used in this session's history so far (a superset of those
    /// still in it), built from the history once per runner.
    pub(crate) call_ids: Option<HashSet<String>>,
}

/// A request as last built from the state.
pub(crate) struct Built {
    /// The role it was built for (the handoff writer's is the worker's).
    pub(crate) role: Role,
    pub(crate) request: ModelRequest,
    /// Messages before the history: the goal, then the note on left-out
    /// items when there are any.
    pub(crate) prefix: usize,
    /// The history seq of each message after the prefix, in order.
    pub(crate) seqs: VecDeque<u64>,
    /// The last history seq looked at (items that make no message, such as
    /// a passed completion check, are looked at but hold no place).
    pub(crate) through: u64,
    /// `history_omitted` when built.
    pub(crate) omitted: u64,
}
