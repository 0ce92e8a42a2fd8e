//! What a process outside the brain may watch of every run: when a run of
//! a session starts and ends, and each event the journal commits. The
//! application installs one [`Watch`] at start (OpenTelemetry traces are
//! one); the brain calls it and knows nothing of what it does.
//!
//! A watch must be cheap and must not fail: it is called on the append
//! path, after the event is durable, and what it does never changes the
//! run.

use std::sync::OnceLock;

use longhand_session::{EventRecord, SessionId};

/// A process-wide observer of runs and committed events.
pub trait Watch: Send + Sync {
    /// A run of `session` (an agent named `agent`; a child of `parent`
    /// when it is one) begins in this process.
    fn run_started(&self, session: &SessionId, agent: &str, parent: Option<&str>);
    /// One event of `session` was committed.
    fn event(&self, session: &SessionId, record: &EventRecord);
    /// The run of `session` ended: `status` is the session's status after
    /// it (`finished`, `paused`, …), `error` what stopped it, if something
    /// did.
    fn run_ended(&self, session: &SessionId, status: &str, error: Option<String>);
}

static WATCH: OnceLock<Box<dyn Watch>> = OnceLock::new();

/// Install the process's watch. The first call wins; a later one is
/// refused with the watch it brought.
pub fn install(watch: Box<dyn Watch>) -> Result<(), Box<dyn Watch>> {
    WATCH.set(watch)
}

/// The run of one session in this process, as the watch sees it; end it
/// with [`Run::end`].
#[must_use = "a run is reported ended only by `end`"]
pub struct Run {
    session: Option<SessionId>,
}

/// Tell the watch a run begins. Inert when none is installed.
pub fn run_started(session: &SessionId, agent: &str, parent: Option<&str>) -> Run {
    let Some(watch) = WATCH.get() else {
        return Run { session: None };
    };
    watch.run_started(session, agent, parent);
    Run {
        session: Some(session.clone()),
    }
}

impl Run {
    /// Tell the watch the run ended (see [`Watch::run_ended`]).
    pub fn end(self, status: &str, error: Option<String>) {
        if let (Some(session), Some(watch)) = (self.session, WATCH.get()) {
            watch.run_ended(&session, status, error);
        }
    }
}

/// Tell the watch an event was committed.
pub(crate) fn event(session: &SessionId, record: &EventRecord) {
    if let Some(watch) = WATCH.get() {
        watch.event(session, record);
    }
}
