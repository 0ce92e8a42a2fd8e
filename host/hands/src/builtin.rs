//! The tool components that ship inside the `longhand` binary: `exec`,
//! `fs`, `http`, `json`, `postgres` and `sqlite` (sources in `tools/`).
//! `sqlite` is left out of a build made without a C compiler for wasm32
//! (see `build.rs`); [`unbuilt`] says so to whoever asks for it.
//!
//! `build.rs` builds them for `wasm32-wasip2` and leaves them deflated in
//! `OUT_DIR`; this module names the bytes and inflates each once, on first
//! use ([`Builtin::wasm`]). It must not treat
//! them specially: a built-in is loaded, checked and granted exactly like a
//! component from disk, so that what the operator sees in `describe` is the
//! whole truth about it.

use std::fmt;
use std::sync::OnceLock;

/// A tool component compiled into the binary.
#[derive(Clone, Copy)]
pub struct Builtin {
    /// The component's name, the same as its `describe` reports.
    pub name: &'static str,
    /// The component binary, deflated (see [`Builtin::wasm`]).
    deflated: &'static [u8],
    /// `sha256:<hex>` of [`Builtin::wasm`], computed by `build.rs` when the
    /// bytes were embedded (a test hashes them again).
    pub digest: &'static str,
}

/// The most a built-in may inflate to: far above any (the largest is
/// under 2 MiB), and a bound should the embedded bytes ever be damaged.
const MAX_INFLATED: usize = 64 << 20;

impl Builtin {
    /// The component binary (a WASI Preview 2 component), inflated on
    /// first use and kept for the process's life: the same bytes, the
    /// same digest, as the file `build.rs` built. Bytes that do not inflate
    /// (a damaged binary) come back empty, which loading then refuses as
    /// not a component.
    pub fn wasm(&self) -> &'static [u8] {
        static INFLATED: [OnceLock<Box<[u8]>>; BUILTINS.len()] =
            [const { OnceLock::new() }; BUILTINS.len()];
        let Some(slot) = BUILTINS.iter().position(|b| b.name == self.name) else {
            return &[];
        };
        INFLATED[slot].get_or_init(|| {
            let started = std::time::Instant::now();
            let bytes =
                miniz_oxide::inflate::decompress_to_vec_with_limit(self.deflated, MAX_INFLATED)
                    .unwrap_or_else(|e| {
                        tracing::error!(
                            builtin = self.name,
                            ?e,
                            "a built-in tool does not inflate"
                        );
                        Vec::new()
                    });
            tracing::debug!(
                builtin = self.name,
                bytes = bytes.len(),
                inflated_us = started.elapsed().as_micros(),
                "inflated"
            );
            bytes.into_boxed_slice()
        })
    }
}

impl fmt::Debug for Builtin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A megabyte of bytes helps nobody in a log line.
        f.debug_struct("Builtin")
            .field("name", &self.name)
            .field("deflated_bytes", &self.deflated.len())
            .finish()
    }
}

/// Every built-in component, in name order.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "exec",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/exec.wasm.deflate")),
        digest: include_str!(concat!(env!("OUT_DIR"), "/exec.digest")),
    },
    Builtin {
        name: "fs",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/fs.wasm.deflate")),
        digest: include_str!(concat!(env!("OUT_DIR"), "/fs.digest")),
    },
    Builtin {
        name: "http",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/http.wasm.deflate")),
        digest: include_str!(concat!(env!("OUT_DIR"), "/http.digest")),
    },
    Builtin {
        name: "json",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/json.wasm.deflate")),
        digest: include_str!(concat!(env!("OUT_DIR"), "/json.digest")),
    },
    Builtin {
        name: "postgres",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/postgres.wasm.deflate")),
        digest: include_str!(concat!(env!("OUT_DIR"), "/postgres.digest")),
    },
    #[cfg(longhand_sqlite)]
    Builtin {
        name: "sqlite",
        deflated: include_bytes!(concat!(env!("OUT_DIR"), "/sqlite.wasm.deflate")),
        digest: include_str!(concat!(env!("OUT_DIR"), "/sqlite.digest")),
    },
];

/// Why the built-in `name` is missing from this binary, when it is one
/// that a build can leave out.
pub fn unbuilt(name: &str) -> Option<&'static str> {
    if name == "sqlite" && builtin(name).is_none() {
        return Some(
            "this longhand was built without the built-in `sqlite` tool: no C compiler for \
             wasm32 was found at build time. Install one (Debian: `apt-get install clang \
             wasi-libc`; or set WASI_SDK_PATH to a wasi-sdk) and build longhand again",
        );
    }
    None
}

/// The built-in component called `name`, if there is one.
pub fn builtin(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component;

    /// Magic, then version 0x0d and layer 1: a component, not a core module.
    const COMPONENT_HEADER: &[u8] = b"\0asm\x0d\0\x01\0";

    #[test]
    fn every_builtin_is_a_component() {
        for b in BUILTINS {
            assert!(
                b.wasm().starts_with(COMPONENT_HEADER),
                "{} is not a component",
                b.name
            );
        }
    }

    #[test]
    fn every_builtin_digest_is_the_hash_of_its_bytes() {
        for b in BUILTINS {
            assert_eq!(b.digest, component::digest_of(b.wasm()), "{}", b.name);
        }
    }

    /// The outer imports are found with the nested modules stepped over,
    /// and a component cut anywhere inside a nested module is refused.
    #[test]
    fn imports_are_read_without_walking_nested_modules() {
        let json = builtin("json").expect("json");
        let imports = component::imports_of("json", json.wasm()).expect("json's imports");
        let names: Vec<&str> = imports.iter().map(|(name, _)| *name).collect();
        for expected in ["longhand:tool/types@", "wasi:io/streams@"] {
            assert!(
                names.iter().any(|n| n.starts_with(expected)),
                "{expected} missing from {names:?}"
            );
        }
        assert!(names.iter().all(|n| !n.is_empty()));
        for cut in [
            json.wasm().len() / 3,
            json.wasm().len() / 2,
            json.wasm().len() - 1,
        ] {
            match component::imports_of("json", &json.wasm()[..cut]) {
                Err(component::LoadError::NotComponent { .. }) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    /// Only `exec` imports `process` and only `postgres` imports `sql`:
    /// the SDK's bindings name both for every tool, and a tool that never
    /// runs a program or queries a database must not import them.
    #[test]
    fn only_exec_imports_process_and_only_postgres_imports_sql() {
        for b in BUILTINS {
            let imports = component::imports_of(b.name, b.wasm()).expect("imports");
            let imports_of =
                |prefix: &str| imports.iter().any(|(name, _)| name.starts_with(prefix));
            assert_eq!(
                imports_of("longhand:tool/process@"),
                b.name == "exec",
                "{}: {imports:?}",
                b.name
            );
            assert_eq!(
                imports_of("longhand:tool/sql@"),
                b.name == "postgres",
                "{}: {imports:?}",
                b.name
            );
        }
    }

    #[test]
    fn looks_up_by_name() {
        assert_eq!(builtin("json").map(|b| b.name), Some("json"));
        assert!(builtin("nope").is_none());
        let mut names: Vec<_> = BUILTINS.iter().map(|b| b.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BUILTINS.len(), "names are unique");
    }
}
