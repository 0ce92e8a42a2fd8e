//! Longhand: agents that run for hours or days, with every tool a
//! WebAssembly component in a sandbox.
//!
//! The crate has three rooms that never share state, and two doors:
//! - [`hands`]: the tool host (wasmtime, grants, limits, receipts);
//! - [`session`]: the append-only event log, the agent's only memory;
//! - [`brain`]: the stateless agent loop and its model providers;
//! - [`checks`]: what the harness runs to decide work is done;
//! - [`memory`]: the memory bank, what outlives a session;
//! - [`cli`]: the `longhand` command line;
//! - [`serve`]: the HTTP API and the web page (`longhand serve`).

pub mod brain;
pub mod checks;
pub mod cli;
pub mod hands;
pub mod mcp;
pub mod memory;
pub mod serve;
pub mod session;
pub mod telemetry;
pub mod triggers;
