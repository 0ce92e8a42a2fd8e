//! Steering a running session from outside: the loop's side of the
//! control inbox (`session::inbox`).
//!
//! While a runner runs, a poller reads the session's inbox every
//! [`POLL`] and hands new controls to the loop, which acts on them at its
//! next safe point — between actions, never inside a tool call:
//! - `send`: the text goes into the model's context (a note it reads at its
//!   next step);
//! - `pause`: the session pauses as a limit would (`resume` carries on);
//! - `cancel`: the session ends, failed, with the reason.
//!
//! `cancel --now` does not wait for the safe point: the step in flight is
//! dropped (a model request abandoned, a tool call's future dropped), the
//! calls it left started are recorded in doubt, and the session ends.
//!
//! A model request is a safe point too: it is redoable (a request with no
//! answer is sent again on wake), so a `pause` or `cancel` that arrives
//! while one is in flight — or while the loop waits to retry one — drops
//! it and is acted on at once, instead of waiting for an answer that can
//! take minutes ([`Ctx::abandon_on_stop`]). A tool call is not: it may
//! have effects, so `pause` and `cancel` wait for it (`cancel --now` does
//! not).
//!
//! Every control received is recorded by a `steered` event carrying its
//! id, and that is all this module does with a `pause` or a `cancel`: what
//! it causes is `decide`'s (the fold keeps the control as
//! `SessionState::stop_asked` until a pause or the end answers it, so a
//! crash between the two is finished on wake). The fold keeps the highest
//! id, so a resumed worker asks the inbox only for newer controls and none
//! is applied twice. A pause posted before an operator's `resume` is not
//! applied after it: the person who resumed had the last word.
//! `cancel --now` drops the step in flight from outside the loop, so
//! `cancel_now` also records what the drop left (calls started and never
//! finished, in doubt); the end is still `decide`'s.

use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::core::ctx::Ctx;
use crate::error::RunError;
use longhand_session::inbox::{Control, ControlKind};
use longhand_session::{Event, SessionId, Store};

/// How often the inbox is read while a session runs.
pub const POLL: Duration = Duration::from_millis(250);

/// The poller of one session's inbox.
pub(crate) struct Poller {
    task: tokio::task::JoinHandle<()>,
}

impl Poller {
    /// Poll `session`'s inbox for controls after `after`; new ones go to
    /// `tx`, a `cancel --now` also to `now`, and the id of a `pause` or
    /// `cancel` also to `stop` (after `tx`, so the loop finds the control
    /// in its inbox when it sees the id).
    ///
    /// The first read is done before this returns: controls posted while
    /// the session was not running (a note sent to a paused session) are
    /// in the inbox at the loop's first safe point, not at a later one a
    /// poll happens to precede.
    pub(crate) async fn start(
        store: std::sync::Arc<dyn Store>,
        session: SessionId,
        mut after: u64,
        tx: mpsc::UnboundedSender<Control>,
        now: watch::Sender<Option<Control>>,
        stop: watch::Sender<Option<u64>>,
    ) -> Self {
        // The first read is delivered here, the rest by the task.
        let mut read = match store.controls(&session, after).await {
            Ok(controls) => {
                deliver(controls, &mut after, &tx, &now, &stop);
                Ok(Vec::new())
            }
            Err(e) => Err(e),
        };
        let task = tokio::spawn(async move {
            loop {
                match read {
                    Ok(controls) => {
                        if !deliver(controls, &mut after, &tx, &now, &stop) {
                            return;
                        }
                    }
                    // A store that cannot answer now may answer next time;
                    // the loop's own appends report a broken store.
                    Err(e) => tracing::debug!(error = %e, "reading the control inbox failed"),
                }
                tokio::time::sleep(POLL).await;
                read = store.controls(&session, after).await;
            }
        });
        Self { task }
    }

    /// Stop polling.
    pub(crate) fn stop(self) {
        self.task.abort();
    }
}

/// Hands `controls` to the loop (see [`Poller::start`]); `false` once the
/// loop is gone.
fn deliver(
    controls: Vec<Control>,
    after: &mut u64,
    tx: &mpsc::UnboundedSender<Control>,
    now: &watch::Sender<Option<Control>>,
    stop: &watch::Sender<Option<u64>>,
) -> bool {
    for control in controls {
        *after = (*after).max(control.id);
        if control.kind == (ControlKind::Cancel { now: true }) {
            let _ = now.send(Some(control.clone()));
        }
        let id = control.id;
        let stops = matches!(
            control.kind,
            ControlKind::Pause | ControlKind::Cancel { now: false }
        );
        if tx.send(control).is_err() {
            return false;
        }
        if stops {
            let _ = stop.send(Some(id));
        }
    }
    true
}

/// Resolves with the `cancel --now` control once one arrives.
pub(crate) async fn cancel_requested(
    now: &mut watch::Receiver<Option<Control>>,
) -> Option<Control> {
    now.wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|c| c.clone())
}

/// The `steered` event recording that `control` was acted on.
fn steered(control: &Control) -> Event {
    Event::Steered {
        control: control.id,
        kind: control.kind.as_str().to_owned(),
        text: control.text.clone(),
        by: control.by.clone(),
    }
}

impl Ctx<'_> {
    /// `work` (a model request, or the wait before retrying one), unless a
    /// `pause` or `cancel` not yet acted on arrives first: then `work` is
    /// dropped and `None` returned, within [`POLL`] of the control being
    /// posted. Only for redoable work: nothing it did is relied on.
    pub(crate) async fn abandon_on_stop<T>(&mut self, work: impl Future<Output = T>) -> Option<T> {
        let last = self.journal.state.last_control;
        let Some(stop) = self.stop.as_mut() else {
            return Some(work.await);
        };
        tokio::select! {
            // An answer that is already here is kept.
            biased;
            out = work => Some(out),
            _ = stop.wait_for(|id| id.is_some_and(|id| id > last)) => None,
        }
    }

    /// Record the controls that arrived: at a safe point, between actions.
    pub(crate) async fn apply_controls(&mut self) -> Result<(), RunError> {
        let Some(rx) = self.inbox.as_mut() else {
            return Ok(());
        };
        let mut arrived = Vec::new();
        while let Ok(control) = rx.try_recv() {
            arrived.push(control);
        }
        for control in arrived {
            if control.id <= self.journal.state.last_control {
                continue;
            }
            // A `pause` or `cancel` is acted on by `decide`, next.
            self.write(vec![steered(&control)]).await?;
            let _ = self.store.settle_control(&self.lease, control.id).await;
            if self.journal.state.stop_asked.is_some() {
                // The rest wait for the next run (a cancel after a pause is
                // read at the resume).
                break;
            }
        }
        Ok(())
    }

    /// `cancel --now`: the step in flight was dropped; record the calls it
    /// left started as in doubt, and the control. The end it causes is
    /// `decide`'s (the runner asks it next).
    pub(crate) async fn cancel_now(&mut self, control: Control) -> Result<(), RunError> {
        if control.id <= self.journal.state.last_control || self.journal.state.is_terminal() {
            return Ok(());
        }
        self.flush().await?;
        let mut events = Vec::new();
        for (call_id, call) in self.journal.state.open_calls.clone() {
            events.push(Event::ToolInDoubt {
                step: call.step,
                call_id,
                reason: format!(
                    "`{}` was ended by `cancel --now` while it ran; whether it took effect is \
                     unknown",
                    call.tool
                ),
            });
        }
        events.push(steered(&control));
        self.write(events).await?;
        let _ = self.store.settle_control(&self.lease, control.id).await;
        Ok(())
    }

    /// Before an operator's resume: pauses posted before it are answered
    /// by it (recorded, not applied).
    pub(crate) async fn supersede_pauses(&mut self) -> Result<(), RunError> {
        let controls = self
            .store
            .controls(&self.session, self.journal.state.last_control)
            .await?;
        let mut events = Vec::new();
        for control in controls.iter().filter(|c| c.kind == ControlKind::Pause) {
            let mut event = steered(control);
            if let Event::Steered { text, .. } = &mut event {
                *text = Some("superseded by the operator's resume".to_owned());
            }
            events.push(event);
        }
        // Only a prefix of the inbox may be marked applied: the fold keeps
        // the highest id, so a later control must not be skipped.
        let first_other = controls
            .iter()
            .find(|c| c.kind != ControlKind::Pause)
            .map(|c| c.id);
        events.retain(|e| match (e, first_other) {
            (Event::Steered { control, .. }, Some(other)) => *control < other,
            _ => true,
        });
        if !events.is_empty() {
            self.write(events).await?;
        }
        Ok(())
    }
}
