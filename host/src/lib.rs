//! Longhand: agents that run for hours or days, with every tool a
//! WebAssembly component in a sandbox.
//!
//! The crate has three rooms that never share state, and two doors:
//! - [`hands`]: the tool host (wasmtime, grants, limits, receipts), the
//!   crate `longhand-hands` (`host/hands/`);
//! - [`session`]: the append-only event log, the agent's only memory, the
//!   crate `longhand-session` (`host/session/`);
//! - [`brain`]: the stateless agent loop and its model providers;
//! - [`checks`]: what the harness runs to decide work is done;
//! - [`memory`]: the memory bank, what outlives a session;
//! - [`sandbox`]: how native processes the host starts are held (a
//!   command check's whole process tree dies with the harness);
//! - [`dist`]: distribution and trust: publishing, installing, signing and
//!   locking tool components;
//! - [`cli`]: the `longhand` command line;
//! - [`serve`]: the HTTP API and the web page (`longhand serve`).
//!
//! `session` and `hands` are the ground floor, each a crate of its own so
//! the compiler keeps them from importing anything built on them; they are
//! re-exported here under their old names, so `crate::session::…` and
//! `longhand_host::hands::…` paths read as before (docs/design.md, "Floors").

pub mod brain;
pub mod checks;
pub mod cli;
pub mod dist;
pub mod http_client;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod memory;
pub mod sandbox;
#[cfg(feature = "serve")]
pub mod serve;
pub mod telemetry;
pub mod triggers;

pub use longhand_hands as hands;
pub use longhand_session as session;
