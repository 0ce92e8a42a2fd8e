//! For tool authors: build a tool crate for `wasm32-wasip2` from a test, so
//! `cargo test` can run the tool in the real host (grants, limits, schema
//! checks and all) rather than only natively.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use longhand_hands::{Grants, Hands, HandsConfig, ToolSource, dev};
//! let wasm = dev::build_component(env!("CARGO_MANIFEST_DIR"))?;
//! let hands = Hands::new(HandsConfig::default())?;
//! let tool = hands.load(ToolSource::File(&wasm)).await?;
//! let out = hands
//!     .call(&tool, &Grants::default(), "greet", &serde_json::json!({"name": "Ada"}))
//!     .await;
//! assert!(out.result.is_ok());
//! # Ok(()) }
//! ```
//!
//! The build goes to its own target directory (`<target>/wasm-dev`), so it
//! never waits on the lock of the `cargo test` that runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Build the crate at `manifest_dir` (a `cdylib` using `longhand-sdk`) in
/// release mode for `wasm32-wasip2` and return the path of its component.
///
/// Fails with cargo's output when the build fails, or with the command to
/// run when the `wasm32-wasip2` target is missing.
pub fn build_component(manifest_dir: impl AsRef<Path>) -> anyhow::Result<PathBuf> {
    let manifest_dir = manifest_dir.as_ref();
    let manifest = manifest_dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", manifest.display()))?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not valid TOML: {e}", manifest.display()))?;
    let name = table
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .ok_or_else(|| anyhow::anyhow!("{} has no package.name", manifest.display()))?
        .to_owned();

    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| find_target_dir(manifest_dir))
        .join("wasm-dev");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(manifest_dir)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
        ])
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_MAKEFLAGS")
        .output()
        .map_err(|e| anyhow::anyhow!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("wasm32-wasip2") && stderr.contains("target may not be installed") {
            anyhow::bail!(
                "the wasm32-wasip2 target is missing: run `rustup target add wasm32-wasip2`"
            );
        }
        anyhow::bail!("building {name} for wasm32-wasip2 failed:\n{stderr}");
    }
    let wasm = target_dir
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    anyhow::ensure!(
        wasm.is_file(),
        "the build succeeded but {} is missing; is the crate a cdylib?",
        wasm.display()
    );
    Ok(wasm)
}

/// The nearest ancestor's `target/` next to a `Cargo.lock`, else `./target`.
fn find_target_dir(start: &Path) -> PathBuf {
    let mut dir = Some(start);
    while let Some(d) = dir {
        if d.join("Cargo.lock").is_file() {
            return d.join("target");
        }
        dir = d.parent();
    }
    start.join("target")
}

type HttpResult<T> = Result<T, wasmtime_wasi_http::Error>;

/// `wasi:http` hooks that refuse every request (`HTTP-request-denied`),
/// for an embedder or a baseline that links `wasi:http` on bare wasmtime
/// without a network (this build has no default sender). The tool host
/// itself sends through its grant policy, not through this.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNetwork;

impl wasmtime_wasi_http::WasiHttpHooks for NoNetwork {
    fn send_request(
        &mut self,
        _request: http::Request<wasmtime_wasi_http::WasiBody>,
        _options: Option<wasmtime_wasi_http::RequestOptions>,
        _fut: Box<dyn Future<Output = HttpResult<()>> + Send>,
    ) -> Box<
        dyn Future<
                Output = HttpResult<(
                    http::Response<wasmtime_wasi_http::WasiBody>,
                    Box<dyn Future<Output = HttpResult<()>> + Send>,
                )>,
            > + Send,
    > {
        Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) })
    }
}
