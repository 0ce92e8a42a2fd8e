//! `longhand tool build [DIR] [--json]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context;

use crate::cli::usage;

use super::config::{BuildConfig, Engine, Lang};
use super::stamp::{self, Built, Stamp};
use longhand_hands::{Hands, ToolSource};

/// What `build` reports: the component, and whether it was already up to
/// date (nothing ran).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Report {
    #[serde(flatten)]
    pub(crate) built: Built,
    pub(crate) up_to_date: bool,
}

/// A checked toolchain, ready to build with.
enum Toolchain {
    Rust,
    /// componentize-py, and the directory of the `longhand_tool` package.
    Python {
        tool: PathBuf,
        sdk: PathBuf,
    },
    Js,
}

/// Build the project in `dir` with its pinned toolchain, then load the
/// component as a call would (refused imports are refused here). A Python
/// or JavaScript project whose sources and toolchain are those of its last
/// build, and whose component is still that build's, is not built again
/// unless `force` (see [`super::stamp`]).
pub(crate) async fn build(hands: &Hands, dir: &Path, force: bool) -> anyhow::Result<Report> {
    // Absolute from here on: the toolchains run with the project as their
    // working directory, where a path relative to ours would point
    // elsewhere (`tool build greet` from greet's parent).
    let dir = &absolute(dir)?;
    let config = BuildConfig::load(dir)?;
    let (toolchain, mut identity) = match config.tool.lang {
        Lang::Rust => (Toolchain::Rust, BTreeMap::new()),
        Lang::Python => python_toolchain(dir, &config)?,
        Lang::Js | Lang::Ts => js_toolchain(dir, &config)?,
    };
    identity.insert("longhand".to_owned(), env!("CARGO_PKG_VERSION").to_owned());
    let planned = match toolchain {
        Toolchain::Rust => None,
        _ => Some(dir.join(format!("{}.wasm", config.tool.name))),
    };
    let sources = match &planned {
        Some(out) => stamp::sources(dir, out)?,
        None => None,
    };
    if let (Some(out), Some(sources), false) = (&planned, &sources, force)
        && let Some(stamp) = Stamp::read(dir)
        && &stamp.sources == sources
        && stamp.toolchain == identity
        && &stamp.component == out
        && stamp.component_is_intact()
    {
        return Ok(Report {
            built: Built {
                component: stamp.component,
                digest: stamp.digest,
                size: stamp.size,
                tools: stamp.tools,
            },
            up_to_date: true,
        });
    }
    let component = match toolchain {
        Toolchain::Rust => rust(dir)?,
        Toolchain::Python { tool, sdk } => python(dir, &config, &tool, &sdk)?,
        Toolchain::Js => js(dir, &config)?,
    };
    let component = component.canonicalize().with_context(|| {
        format!(
            "the toolchain finished but wrote no {}",
            component.display()
        )
    })?;
    let size = std::fs::metadata(&component)
        .with_context(|| {
            format!(
                "the toolchain finished but wrote no {}",
                component.display()
            )
        })?
        .len();
    let working = crate::cli::progress::Working::start(crate::cli::progress::compiling(
        &component.file_name().unwrap_or_default().to_string_lossy(),
    ));
    let loaded = hands
        .load(ToolSource::File(&component))
        .await
        .with_context(|| format!("{} was built but Longhand refuses it", component.display()))?;
    drop(working);
    let built = Built {
        component,
        digest: loaded.digest().to_owned(),
        size,
        tools: loaded.info().tools.iter().map(|t| t.name.clone()).collect(),
    };
    // Rust's sources are read after the build, for `tool test`'s staleness
    // check (cargo decides Rust's skips).
    let sources = match sources {
        Some(sources) => Some(sources),
        None => stamp::sources(dir, &built.component)?,
    };
    if let Some(sources) = sources {
        Stamp::new(sources, identity, &built).write(dir);
    }
    Ok(Report {
        built,
        up_to_date: false,
    })
}

/// `dir` as an absolute path, or a usage error naming it.
fn absolute(dir: &Path) -> anyhow::Result<PathBuf> {
    dir.canonicalize().map_err(|e| {
        usage(format!(
            "{}: {e}; give the tool project's directory",
            dir.display()
        ))
    })
}

/// Run a toolchain step with its output on our stderr (stdout is the
/// result's, and `--json`'s), failing with what to do.
fn run(step: &str, cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("cannot start {step}"))?;
    if !status.success() {
        return Err(usage(format!(
            "{step} failed ({status}); its errors are above"
        )));
    }
    Ok(())
}

/// The first line a program prints for `args`, or why it could not run.
fn output_of(program: &Path, args: &[&str]) -> Result<String, std::io::Error> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `program` on PATH.
fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

fn rust(dir: &Path) -> anyhow::Result<PathBuf> {
    if on_path("cargo").is_none() {
        return Err(usage(
            "cargo is not installed: install Rust (https://rustup.rs), then `rustup target add wasm32-wasip2`",
        ));
    }
    let component = rust_component(dir)?;
    // Said only when it is so: a compile error is the author's to read.
    if !wasm_target_installed(dir) {
        return Err(usage(
            "the wasm32-wasip2 target is not installed for this project's Rust: run `rustup \
             target add wasm32-wasip2`, then build again",
        ));
    }
    run(
        "cargo build --release --target wasm32-wasip2",
        Command::new("cargo")
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .current_dir(dir),
    )?;
    Ok(component)
}

/// Whether the Rust that builds in `dir` (its toolchain file and
/// overrides apply) has the wasm32-wasip2 standard library. When that
/// cannot be told, the build goes ahead and says what it says.
fn wasm_target_installed(dir: &Path) -> bool {
    let Ok(out) = Command::new("rustc")
        .args(["--print", "sysroot"])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
    else {
        return true;
    };
    let sysroot = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    !out.status.success()
        || sysroot.is_empty()
        || Path::new(&sysroot)
            .join("lib/rustlib/wasm32-wasip2/lib")
            .is_dir()
}

/// Where `cargo build --release --target wasm32-wasip2` puts the Rust
/// project's component (from `cargo metadata`, offline).
fn rust_component(dir: &Path) -> anyhow::Result<PathBuf> {
    let meta = Command::new("cargo")
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .context("cannot run `cargo metadata`")?;
    if !meta.status.success() {
        return Err(usage(format!(
            "`cargo metadata` failed in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&meta.stderr).trim()
        )));
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&meta.stdout).context("`cargo metadata` printed no JSON")?;
    let target = meta["target_directory"]
        .as_str()
        .context("`cargo metadata` names no target directory")?;
    // The project's own package: its workspace also holds the SDK it
    // carries in vendor/ (a path dependency beneath the workspace's root).
    let manifest = dir.join("Cargo.toml");
    let package = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| {
            p["manifest_path"]
                .as_str()
                .is_some_and(|m| Path::new(m) == manifest)
        })
        .and_then(|p| p["name"].as_str())
        .context("the project's Cargo.toml has no package")?;
    Ok(Path::new(target)
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", package.replace('-', "_"))))
}

/// The component `build` last made for the project in `dir`, without
/// building: for `longhand tool test`.
pub(crate) fn built_component(dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = &absolute(dir)?;
    let config = BuildConfig::load(dir)?;
    let component = match config.tool.lang {
        Lang::Rust => rust_component(dir)?,
        Lang::Python | Lang::Js | Lang::Ts => dir.join(format!("{}.wasm", config.tool.name)),
    };
    if !component.is_file() {
        return Err(usage(format!(
            "{} is not built yet (no {}): run `longhand tool build` first, or pass --component PATH",
            dir.display(),
            component.display()
        )));
    }
    Ok(component)
}

/// Find and check componentize-py and the SDK it will bundle.
fn python_toolchain(
    dir: &Path,
    config: &BuildConfig,
) -> anyhow::Result<(Toolchain, BTreeMap<String, String>)> {
    let pin = config.pin("componentize-py")?;
    let install = format!(
        "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt (or \
         `pip install componentize-py=={pin}`)"
    );
    let venv = dir.join(".venv/bin/componentize-py");
    let tool = if venv.is_file() {
        Some(venv)
    } else {
        on_path("componentize-py")
    };
    let Some(tool) = tool else {
        return Err(usage(format!(
            "componentize-py is not installed: in {}, {install}",
            dir.display()
        )));
    };
    let version = output_of(&tool, &["--version"])
        .with_context(|| format!("cannot run {}", tool.display()))?;
    if version.split_whitespace().last() != Some(pin) {
        return Err(usage(format!(
            "longhand-tool.toml pins componentize-py {pin}, but {} is `{version}`: {install}",
            tool.display()
        )));
    }
    // The SDK as componentize-py will bundle it: the `longhand_tool`
    // package importable by the Python beside componentize-py, copied alone
    // onto the path (all of site-packages would offer it every installed
    // package; a symbolic link would point out of the directory
    // componentize-py's interpreter is given, which WASI refuses).
    let python = tool.with_file_name("python");
    let python = if python.is_file() {
        python
    } else {
        PathBuf::from("python3")
    };
    // The copy the project carries (`tool new` writes it) is the SDK the
    // project builds with; else the one installed beside componentize-py.
    let carried = dir.join("vendor/longhand-tool/longhand_tool");
    let package = if carried.join("__init__.py").is_file() {
        carried.to_string_lossy().into_owned()
    } else {
        output_of(
            &python,
            &[
                "-c",
                "import longhand_tool, os; print(os.path.dirname(longhand_tool.__file__))",
            ],
        )
        .unwrap_or_default()
    };
    if package.is_empty() || !Path::new(&package).is_dir() {
        return Err(usage(format!(
            "the longhand_tool SDK is not installed for {}: {install} (requirements.txt names the \
             SDK's path)",
            python.display()
        )));
    }
    let package = PathBuf::from(package);
    let identity = BTreeMap::from([
        ("componentize-py".to_owned(), pin.to_owned()),
        ("sdk".to_owned(), stamp::tree_digest(&package)?),
    ]);
    Ok((Toolchain::Python { tool, sdk: package }, identity))
}

fn python(
    dir: &Path,
    config: &BuildConfig,
    tool: &Path,
    package: &Path,
) -> anyhow::Result<PathBuf> {
    let sdk = dir.join(".longhand/python-sdk");
    if sdk.exists() {
        std::fs::remove_dir_all(&sdk).with_context(|| format!("cannot clear {}", sdk.display()))?;
    }
    copy_python_package(package, &sdk.join("longhand_tool"))?;
    let out = dir.join(format!("{}.wasm", config.tool.name));
    run(
        "componentize-py",
        Command::new(tool)
            .args(["-d", "wit", "-w", "tool", "componentize", "-p", "."])
            .arg("-p")
            .arg(&sdk)
            .args(["app", "-o"])
            .arg(&out)
            .current_dir(dir),
    )?;
    Ok(out)
}

/// The version in `node_modules/<package>/package.json`, if installed.
fn installed(dir: &Path, package: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
        .ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["version"].as_str().map(str::to_owned)
}

/// Check the pinned JavaScript toolchain and the SDK are installed.
fn js_toolchain(
    dir: &Path,
    config: &BuildConfig,
) -> anyhow::Result<(Toolchain, BTreeMap<String, String>)> {
    let engine = config.engine();
    let mut identity = BTreeMap::new();
    let (componentizer, _) = engine.package();
    // The npm binaries below are node scripts (or native, for esbuild).
    on_path("node").ok_or_else(|| usage("node is not installed: install Node.js 20 or later"))?;
    for package in [componentizer, "esbuild"] {
        let pin = config.pin(package)?;
        match installed(dir, package) {
            Some(v) if v == pin => {
                identity.insert(package.to_owned(), v);
            }
            found => {
                return Err(usage(format!(
                    "longhand-tool.toml pins {package} {pin}, but {} has {}: run `npm install` in {} \
                 (package.json pins the same versions)",
                    dir.join("node_modules").display(),
                    found.map_or("none".to_owned(), |v| format!("version {v}")),
                    dir.display()
                )));
            }
        }
    }
    if installed(dir, "@longhand/tool").is_none() {
        return Err(usage(format!(
            "the @longhand/tool SDK is not installed in {}: run `npm install` (package.json \
             names the SDK's path)",
            dir.display()
        )));
    }
    identity.insert(
        "sdk".to_owned(),
        stamp::tree_digest(&dir.join("node_modules/@longhand/tool"))?,
    );
    identity.insert("engine".to_owned(), engine.name().to_owned());
    Ok((Toolchain::Js, identity))
}

fn js(dir: &Path, config: &BuildConfig) -> anyhow::Result<PathBuf> {
    let engine = config.engine();
    let (componentizer, _) = engine.package();
    let bundle = dir.join("dist/bundle.js");
    run(
        "esbuild",
        Command::new(dir.join("node_modules/.bin/esbuild"))
            .arg(if config.tool.lang == Lang::Ts {
                "src/index.ts"
            } else {
                "src/index.js"
            })
            .args([
                "--bundle",
                "--format=esm",
                "--platform=neutral",
                "--log-level=warning",
                // Component imports (`@longhand/tool/host` imports
                // `longhand:tool/host`): the componentizer binds them.
                "--external:longhand:*",
                "--external:wasi:*",
            ])
            // The SDK's host bindings pass u64 as the engine takes it.
            .arg(format!(
                "--define:__LONGHAND_ENGINE__=\"{}\"",
                engine.name()
            ))
            .arg(format!("--outfile={}", bundle.display()))
            .current_dir(dir),
    )?;
    let out = dir.join(format!("{}.wasm", config.tool.name));
    let mut cmd = match engine {
        Engine::Spidermonkey => {
            let mut cmd = Command::new(dir.join("node_modules/.bin/componentize-js"));
            cmd.args(["--wit", "wit", "--world-name", engine.world(), "-o"])
                .arg(&out)
                .arg(&bundle);
            cmd
        }
        Engine::Quickjs => {
            let mut cmd = Command::new(dir.join("node_modules/.bin/componentize-qjs"));
            // `--sync`: the component-model async ABI is not enabled in
            // Longhand's host, so handlers run to their end synchronously.
            cmd.args(["--sync", "--wit", "wit", "--world", engine.world(), "--js"])
                .arg(&bundle)
                .arg("-o")
                .arg(&out);
            cmd
        }
    };
    run(componentizer, cmd.current_dir(dir))?;
    Ok(out)
}

/// Copy a Python package's `.py` files (and subpackages), nothing else.
fn copy_python_package(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() && path.join("__init__.py").is_file() {
            copy_python_package(&path, &to.join(entry.file_name()))?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "py" || e == "typed") {
            std::fs::copy(&path, to.join(entry.file_name()))?;
        }
    }
    Ok(())
}
