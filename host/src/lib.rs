//! Longhand: agents that run for hours or days, with every tool a
//! WebAssembly component in a sandbox. This is the application crate, the
//! one with the `longhand` binary; the parts it is built on are crates of
//! their own, each kept by the compiler from importing what stands on it
//! (docs/design.md, "Crates"):
//! - `longhand-session` (`host/session/`): the append-only event log, the
//!   agent's only memory;
//! - `longhand-hands` (`host/hands/`): the tool host (wasmtime, grants,
//!   limits, receipts) and how native processes are held;
//! - `longhand-brain` (`host/brain/`): the stateless agent loop, its model
//!   providers, checks and memory bank.
//!
//! Here, on top of them:
//! - [`cli`]: the `longhand` command line;
//! - [`serve`]: the HTTP API and the web page (`longhand serve`);
//! - [`mcp`]: tools served to MCP clients (`longhand mcp`);
//! - [`dist`]: distribution and trust: publishing, installing, signing and
//!   locking tool components;
//! - [`triggers`]: timers and webhooks that start sessions;
//! - [`telemetry`]: OpenTelemetry traces of every run.

pub mod cli;
pub mod dist;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "serve")]
pub mod serve;
pub mod telemetry;
pub mod triggers;
