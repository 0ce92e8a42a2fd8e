//! The session: the append-only event log that is the agent's only memory.
//!
//! - [`event`]: the protocol, one [`Event`] enum every front end speaks;
//! - [`store`]: the [`Store`] contract (append with fencing and optimistic
//!   seq checks, leases, verified reads, content-addressed blobs) and its
//!   errors;
//! - [`holder`]: the process behind a lease, and whether it still lives;
//! - [`inbox`]: the control inbox, how a process that does not hold the
//!   lease steers a session (pause, cancel, send);
//! - [`sqlite`]: the embedded default backend, one file per store directory;
//! - `postgres`: the backend for many workers on many machines (the cargo
//!   feature `postgres`, on by default);
//! - `contract`: what both backends check and compute the same way (the
//!   lease and seq rules, the checksum chain), and `conformance`, the one
//!   test suite both run.
//!
//! What this module must not do: interpret events beyond the lifecycle
//! status (folding them into state is the brain's job), call models or run
//! tools. It stores facts and proves they were not damaged.

// The one suite both backends run; it needs both (default features).
#[cfg(all(test, feature = "postgres"))]
mod conformance;
mod contract;
pub mod event;
pub mod holder;
pub mod inbox;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod sqlite;
pub mod store;

pub use event::{
    BlobRef, Event, EventRecord, MAX_EVENT_JSON, PauseKind, PauseReason, ResumeCause,
    SessionStatus, sha256_digest,
};
pub use inbox::{Control, ControlKind, MAX_CONTROL_TEXT};
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use sqlite::{SqliteOptions, SqliteStore, WriteStats};
pub use store::{
    Appended, Clock, Durability, Lease, SessionId, SessionSummary, Store, StoreError, SystemClock,
    WakeLog, now_ms,
};
