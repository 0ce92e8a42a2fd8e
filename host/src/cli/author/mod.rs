//! `longhand tool new` and `longhand tool build`: a tool author's first two
//! commands, in Rust, Python or JavaScript.
//!
//! `new` writes a project whose tool is `greet` (`{"name": string}` →
//! `{"greeting": "Hello, <name>!"}`): sources, the WIT the component targets,
//! a test of the tool's logic in the language's own runner, a README, and
//! `longhand-tool.toml`, which pins the toolchain `build` runs. `build` runs
//! that toolchain offline (cargo, componentize-py, esbuild with
//! componentize-js or componentize-qjs), refuses a toolchain whose version
//! is not the pinned one (saying how to install the right one), then loads
//! the component the way every call does — so a component whose imports
//! the host does not provide is refused here, at build time, naming the
//! import — and prints its path, digest, size and tools.
//!
//! `record` is a tool author's third: `tool call --record FIXTURE.json`
//! writes a call (input, HTTP exchanges, output) to a fixture, and `tool
//! test` replays a project's `fixtures/` against its component.
//!
//! What this module must not do: fetch anything (installing the toolchain
//! is the author's step, spelled out in every error), or write outside the
//! project directory it is given (`build` writes the component and, for
//! JavaScript, `dist/` inside it; `--record` writes the one file it names).

mod build;
mod config;
mod new;
mod record;
mod sdk;
mod stamp;

pub(super) use build::build;
#[cfg(test)]
pub(super) use config::{BuildConfig, ESBUILD};
pub(super) use config::{COMPONENTIZE_PY, COMPONENTIZE_QJS, Engine, Lang};
pub(super) use new::{WIT, init, new, write_files};
pub(super) use record::{Recording, test};
