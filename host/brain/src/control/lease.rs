//! Holding a session: the lease's TTL, the heartbeat that renews it while a
//! worker runs, and how a dead holder is told from a live one.
//!
//! A lease is renewed from its own task every third of its TTL, whatever
//! the loop is doing — a model request may stream for many minutes, a
//! provider may ask us to wait ten — so a live worker never loses its
//! session to a `resume` or another worker. When a renewal is refused
//! (another worker holds the session now), or the lease runs out because
//! renewals kept failing, the heartbeat says so at once and the runner
//! drops the step in flight: a worker that may no longer own a session
//! stops acting for it within a second of knowing.
//!
//! Telling a dead holder from a live one is the store's part
//! ([`longhand_session::holder`]): every lease names its holder's process,
//! and a holder of this machine whose process is gone is taken over at
//! once by `acquire_lease`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use longhand_session::{Lease, SessionId, Store, StoreError};

/// How long a worker's lease on a session lasts without renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(60);

/// The TTL this process uses: [`LEASE_TTL`], or `LONGHAND_LEASE_TTL_MS`
/// when set (at least 300 ms). The variable exists so tests can watch a
/// lease outlive a request longer than its TTL without waiting minutes.
pub fn ttl() -> Duration {
    std::env::var("LONGHAND_LEASE_TTL_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(LEASE_TTL, |ms| Duration::from_millis(ms.max(300)))
}

/// The lease owner a child session (a delegate's, a parallel task's) runs
/// under: its parent's owner and the parent session. Never the parent's
/// owner itself: a worker takes back the leases held in its own name that
/// it no longer runs, and it runs only top-level sessions, so a child
/// leased in the worker's name would be woken a second time beside the
/// parent driving it.
pub fn child_owner(owner: &str, parent: &SessionId) -> String {
    format!("{owner}/{parent}")
}

/// The task renewing one lease.
pub struct Heartbeat {
    task: tokio::task::JoinHandle<()>,
    lost: watch::Receiver<Option<Arc<StoreError>>>,
}

/// Resolves when the lease is lost, with why.
pub struct Lost(watch::Receiver<Option<Arc<StoreError>>>);

impl Lost {
    /// Wait until the heartbeat gives up the lease, and say why; never
    /// returns while the lease is held.
    pub async fn wait(&mut self) -> String {
        loop {
            if let Some(error) = self.0.borrow().clone() {
                return error.to_string();
            }
            if self.0.changed().await.is_err() {
                // The heartbeat stopped without losing the lease: the run
                // is over and this branch is never chosen.
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Heartbeat {
    /// Renew `lease` every `ttl / 3` until stopped.
    pub fn start(store: Arc<dyn Store>, lease: Lease, ttl: Duration) -> Self {
        let (tx, rx) = watch::channel(None);
        let period = ttl / 3;
        let task = tokio::spawn(async move {
            let mut expires = tokio::time::Instant::now() + ttl;
            loop {
                tokio::time::sleep(period).await;
                match store.renew(&lease, ttl).await {
                    Ok(_) => expires = tokio::time::Instant::now() + ttl,
                    Err(
                        error @ (StoreError::Fenced { .. }
                        | StoreError::LeaseHeld { .. }
                        | StoreError::NotFound { .. }),
                    ) => {
                        let _ = tx.send(Some(Arc::new(error)));
                        return;
                    }
                    Err(error) => {
                        // A store that fails for a while (disk full, a
                        // database restarting) is retried until the lease
                        // would run out; past that another worker may take
                        // the session, so this one stops.
                        tracing::warn!(%error, "cannot renew the session lease; retrying");
                        if tokio::time::Instant::now() + period >= expires {
                            let _ = tx.send(Some(Arc::new(error)));
                            return;
                        }
                    }
                }
            }
        });
        Self { task, lost: rx }
    }

    /// A handle that resolves when the lease is lost.
    pub fn lost(&self) -> Lost {
        Lost(self.lost.clone())
    }

    /// Stop renewing.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Give `lease` up. When the store cannot be reached (a database
/// restarting, a full disk), the release is retried from a task of its own
/// until it goes through or the lease would have run out anyway: the
/// session is then free as soon as the store is back, not a TTL later
/// (a worker that lost its database mid-run used to leave every session
/// it ran stalled for most of a minute).
pub async fn release(store: Arc<dyn Store>, lease: Lease, ttl: Duration) {
    let transient = |e: &StoreError| matches!(e, StoreError::Db { .. } | StoreError::Io { .. });
    match store.release(&lease).await {
        Err(e) if transient(&e) => {
            tracing::warn!(error = %e, session = %lease.session, "cannot release the lease; retrying");
            tokio::spawn(async move {
                let deadline = tokio::time::Instant::now() + ttl;
                while tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(RELEASE_RETRY).await;
                    match store.release(&lease).await {
                        Err(e) if transient(&e) => continue,
                        _ => return,
                    }
                }
            });
        }
        _ => {}
    }
}

/// How often a release that failed is tried again.
const RELEASE_RETRY: Duration = Duration::from_millis(250);
