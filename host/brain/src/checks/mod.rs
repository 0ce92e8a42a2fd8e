//! Checks the harness runs to decide whether work is done — never the
//! worker:
//! - [`command`]: a native command the operator wrote, run confined;
//!   [`resolve`] turns its agent.toml entry into what runs;
//! - [`tool`]: the jq predicate over a tool call's output, evaluated in the
//!   sandbox.
//!
//! (Judge checks, and the plan that names checks, live in the brain.)

pub mod command;
pub mod resolve;
pub mod tool;
