//! Builds the built-in tool components (`tools/exec`, `tools/fs`,
//! `tools/http`, `tools/json`, `tools/postgres`, `tools/sqlite`) for
//! `wasm32-wasip2` and writes them deflated into `OUT_DIR` as
//! `<name>.wasm.deflate`, with the digest of the plain bytes beside, for
//! `src/builtin.rs` to `include_bytes!`.
//!
//! `sqlite` carries the SQLite engine, which is C: it needs a C compiler
//! that targets wasm32 and the WASI libc headers (Debian: `apt-get install
//! clang wasi-libc`; or a wasi-sdk named by `WASI_SDK_PATH`). Without them
//! the other built-ins are still built and `sqlite` is left out with a
//! warning (the binary then says how to get it), unless
//! `LONGHAND_REQUIRE_EXTERNAL` is set, as in CI, where its absence fails
//! the build.
//!
//! The guests are built by a nested `cargo build`, as wasmtime's
//! `crates/test-programs/artifacts/build.rs` does, with three precautions:
//!
//! * **Its own target directory** (`<workspace>/target/wasm-guests`, or
//!   `$LONGHAND_GUEST_TARGET_DIR`): the outer build holds the lock on its own
//!   directory, and a separate one also survives switching between `cargo
//!   build`, `cargo test` and `cargo clippy` without rebuilding the guests.
//! * **A clean environment**: the outer build's flags are for the host
//!   target (`CARGO_ENCODED_RUSTFLAGS`, `RUSTFLAGS` such as
//!   `-C target-cpu=native`), and `cargo clippy` sets
//!   `RUSTC_WORKSPACE_WRAPPER`; none of that belongs in a wasm build. Only
//!   `-D warnings` is carried over, so CI that denies warnings denies them in
//!   the guests too.
//! * **`--locked`**: the outer cargo has already resolved the workspace, so
//!   the nested one must never rewrite `Cargo.lock` under it.
//!
//! The guests are built for size (`opt-level = "s"`, fat LTO, one codegen
//! unit), set through `CARGO_PROFILE_RELEASE_*` for this build only: that
//! makes them 25-40% smaller, and size is what the host pays for — every
//! byte is compiled by Cranelift when a component is loaded, and every byte
//! ships inside the `longhand` binary — while the tools spend their time in
//! host calls, not hot loops.
//!
//! If the `wasm32-wasip2` standard library is missing, it is installed once
//! with `rustup`; if that is impossible the build fails saying which command
//! to run.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const TARGET: &str = "wasm32-wasip2";

/// Built-in tools: the folder under `tools/` is the component name, and the
/// package is `longhand-tool-<name>`.
const TOOLS: &[&str] = &["exec", "fs", "http", "json", "postgres"];

/// The built-in whose engine is C (see the module docs).
const C_TOOL: &str = "sqlite";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let manifest_dir = PathBuf::from(var("CARGO_MANIFEST_DIR")?);
    // This crate is `host/hands/`: the workspace is two folders up.
    let workspace = manifest_dir
        .ancestors()
        .nth(2)
        .ok_or("host/hands/ is not two folders below the workspace")?
        .to_path_buf();
    let out_dir = PathBuf::from(var("OUT_DIR")?);

    for watched in ["tools", "sdk", "wit", "Cargo.toml", "Cargo.lock"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(watched).display()
        );
    }
    println!("cargo:rerun-if-env-changed=LONGHAND_GUEST_TARGET_DIR");
    let target_dir = env::var_os("LONGHAND_GUEST_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target").join("wasm-guests"));

    ensure_target()?;
    build(&workspace, &target_dir, TOOLS, &[])?;
    println!("cargo::rustc-check-cfg=cfg(longhand_sqlite)");
    for var in ["WASI_SDK_PATH", "WASI_SYSROOT", "LONGHAND_REQUIRE_EXTERNAL"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let mut built: Vec<&str> = TOOLS.to_vec();
    let c_built = match wasm_c_compiler() {
        Ok(cc) => build(&workspace, &target_dir, &[C_TOOL], &cc),
        Err(missing) => Err(missing),
    };
    match c_built {
        Ok(()) => {
            println!("cargo:rustc-cfg=longhand_sqlite");
            built.push(C_TOOL);
        }
        Err(why) if env::var_os("LONGHAND_REQUIRE_EXTERNAL").is_some() => {
            return Err(format!(
                "the built-in `{C_TOOL}` tool cannot be built and LONGHAND_REQUIRE_EXTERNAL is set: {why}"
            ));
        }
        Err(why) => {
            println!("cargo:warning=the built-in `{C_TOOL}` tool is left out of this build: {why}");
        }
    }

    let release = target_dir.join(TARGET).join("release");
    for tool in built {
        let built = release.join(format!("longhand_tool_{tool}.wasm"));
        let bytes =
            std::fs::read(&built).map_err(|e| format!("cannot read {}: {e}", built.display()))?;
        // Deflated: the built-ins are a fifth of the binary, and wasm
        // shrinks to about a third (5.1 MB to 1.8 MB for the six).
        let packed = miniz_oxide::deflate::compress_to_vec(&bytes, 9);
        let copy = out_dir.join(format!("{tool}.wasm.deflate"));
        std::fs::write(&copy, &packed)
            .map_err(|e| format!("cannot write {}: {e}", copy.display()))?;
        // The digest beside the bytes: a process that loads a built-in
        // does not hash a megabyte or two to learn it.
        let digest = format!(
            "sha256:{}",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes))
        );
        let file = out_dir.join(format!("{tool}.digest"));
        std::fs::write(&file, digest)
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    Ok(())
}

fn var(name: &str) -> Result<String, String> {
    env::var(name).map_err(|_| format!("{name} is not set; build scripts run under cargo"))
}

/// The rustc cargo uses for this build (it sets `RUSTC` for build scripts).
fn rustc() -> String {
    env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned())
}

/// Makes sure the `wasm32-wasip2` standard library is installed.
fn ensure_target() -> Result<(), String> {
    if target_installed()? {
        return Ok(());
    }
    let how = format!("install it with `rustup target add {TARGET}`");
    // `rustup` honours RUSTUP_TOOLCHAIN, which its proxy set for this build,
    // so the target lands in the toolchain that is compiling us.
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .map_err(|e| {
            format!("the {TARGET} target is missing and rustup could not be run ({e}): {how}")
        })?;
    if !status.success() || !target_installed()? {
        return Err(format!(
            "the {TARGET} target is missing and `rustup target add {TARGET}` failed: {how}"
        ));
    }
    Ok(())
}

fn target_installed() -> Result<bool, String> {
    let output = Command::new(rustc())
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run `{} --print sysroot`: {e}", rustc()))?;
    if !output.status.success() {
        return Err(format!(
            "`{} --print sysroot` failed: {}",
            rustc(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    Ok(Path::new(&sysroot)
        .join("lib/rustlib")
        .join(TARGET)
        .join("lib")
        .is_dir())
}

/// A C compiler for wasm32 and the flags that point it at a WASI libc, as
/// `(variable, value)` pairs for the nested cargo (the `cc` crate reads
/// `CC_wasm32_wasip2` and `CFLAGS_wasm32_wasip2`). An explicit
/// `CC_wasm32_wasip2` is taken as it is.
fn wasm_c_compiler() -> Result<Vec<(String, String)>, String> {
    println!("cargo:rerun-if-env-changed=CC_wasm32_wasip2");
    println!("cargo:rerun-if-env-changed=CFLAGS_wasm32_wasip2");
    if env::var_os("CC_wasm32_wasip2").is_some() {
        return Ok(Vec::new());
    }
    let (clang, sysroot) = if let Some(sdk) = env::var_os("WASI_SDK_PATH") {
        let sdk = PathBuf::from(sdk);
        (sdk.join("bin/clang"), sdk.join("share/wasi-sysroot"))
    } else if let Some(sysroot) = env::var_os("WASI_SYSROOT") {
        (PathBuf::from("clang"), PathBuf::from(sysroot))
    } else if Path::new("/usr/include/wasm32-wasi/stdio.h").is_file() {
        // Debian's and Ubuntu's `wasi-libc` package.
        (PathBuf::from("clang"), PathBuf::from("/usr"))
    } else {
        return Err(
            "no WASI libc was found (install `clang` and `wasi-libc` with apt-get, \
                    or set WASI_SDK_PATH to a wasi-sdk), then build again"
                .to_owned(),
        );
    };
    let works = Command::new(&clang)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        return Err(format!(
            "`{}` cannot be run (install `clang` with apt-get, or set WASI_SDK_PATH to a wasi-sdk), \
             then build again",
            clang.display()
        ));
    }
    Ok(vec![
        ("CC_wasm32_wasip2".to_owned(), clang.display().to_string()),
        (
            "CFLAGS_wasm32_wasip2".to_owned(),
            format!("--target=wasm32-wasi --sysroot={}", sysroot.display()),
        ),
    ])
}

fn build(
    workspace: &Path,
    target_dir: &Path,
    tools: &[&str],
    extra_env: &[(String, String)],
) -> Result<(), String> {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "--release", "--locked", "--target", TARGET])
        .arg("--target-dir")
        .arg(target_dir);
    for tool in tools {
        cmd.args(["-p", &format!("longhand-tool-{tool}")]);
    }
    for (name, value) in extra_env {
        cmd.env(name, value);
    }
    cmd.env("CARGO_PROFILE_RELEASE_OPT_LEVEL", "s")
        .env("CARGO_PROFILE_RELEASE_LTO", "true")
        .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1");
    for inherited in [
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CLIPPY_ARGS",
    ] {
        cmd.env_remove(inherited);
    }
    match env::var("RUSTFLAGS") {
        Ok(flags) if flags.contains("-D warnings") || flags.contains("-Dwarnings") => {
            cmd.env("RUSTFLAGS", "-D warnings");
        }
        _ => {
            cmd.env_remove("RUSTFLAGS");
        }
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo to build the built-in tools: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the built-in tools for {TARGET} failed ({status}); the errors are above. \
             To see them alone: cargo build --release --target {TARGET} {}",
            tools
                .iter()
                .map(|t| format!("-p longhand-tool-{t}"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    Ok(())
}
