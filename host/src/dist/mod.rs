//! Distribution and trust (issue 18, part 3): publishing a tool component
//! to an OCI registry, installing one from a registry, an HTTPS URL or a
//! file, signatures, the trust store, `longhand.lock`, upgrades reviewed
//! against what the installed version asks for.
//!
//! What it owns: the bytes between a source and the install store
//! (`$LONGHAND_HOME/tools`), and every check on them before the hands see
//! them: sizes, media types, digests, signatures. What it must not do: run
//! a component (the hands load, precompile and describe it, the same way
//! as any other), read agent files (the CLI hands it names and digests), or
//! touch sessions.
//!
//! Everything a registry, a URL or a file says is hostile input: bounded
//! before it is buffered ([`registry::MAX_MANIFEST_BYTES`],
//! [`registry::MAX_COMPONENT_BYTES`]), checked against the digest that
//! named it, refused with an error that says what was wrong.

pub mod error;
pub mod file;
mod http;
pub mod lock;
pub mod names;
pub mod registry;
pub mod review;
pub mod sign;
pub mod source;
pub mod store;
pub mod token;

pub use error::DistError;
pub use names::{is_digest, is_tool_name};
pub use source::{OciRef, Source};
