//! `longhand tool install python` and `longhand tool install js`: two tools
//! whose sources ship inside the binary and are built on the machine that
//! installs them.
//!
//! The `python` and `js` tools (`tools/python/`, `tools/js/` in the
//! repository) are ordinary tool projects, the kind `longhand tool new`
//! writes. The binary carries their text (a few kilobytes, with the SDK
//! files and WIT they build against), not their components: the CPython
//! component is about 19 MB, most of the binary's size budget. Installing
//! one writes the project under `DATA/bundled/`, builds it with the same
//! code as `longhand tool build` and its pinned toolchain, and hands the
//! component to `tool install` as the file it is, so it meets the same
//! checks, record and precompile as `tool install ./python.wasm`.
//!
//! The toolchain is fetched once, on the first install, into
//! `DATA/toolchains/` (componentize-py from PyPI into a venv; componentize-qjs
//! and esbuild from npm by a lock file); afterwards nothing needs the
//! network. An operator who has the toolchain already (an air-gapped
//! machine, CI) names it with `LONGHAND_PY_VENV` (a venv holding the pinned
//! componentize-py and the `longhand_tool` SDK) or `LONGHAND_JS_MODULES` (a
//! `node_modules` holding the pinned componentize-qjs, esbuild and
//! `@longhand/tool`), and nothing is fetched. A project already built from
//! these exact sources is not built again.
//!
//! What this module must not do: install (the caller does, as for any
//! file), or write outside `DATA/bundled/` and `DATA/toolchains/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use super::author::{self, WIT, write_files};
use super::env::env;
use longhand_hands::Hands;

/// A tool whose sources the binary carries.
pub(super) struct Bundled {
    /// The name `tool install NAME` takes, and the component's name.
    pub(super) name: &'static str,
    /// The project's files, by path inside it.
    files: &'static [(&'static str, &'static str)],
    toolchain: Toolchain,
}

/// How a bundled project's toolchain is found or fetched.
#[derive(Clone, Copy)]
enum Toolchain {
    /// componentize-py in a venv, with the Python SDK beside it.
    Python,
    /// componentize-qjs and esbuild in a `node_modules`, with the JS SDK.
    Js,
}

/// The tools `tool install NAME` builds from the binary's own sources.
pub(super) const BUNDLED: &[Bundled] = &[
    Bundled {
        name: "python",
        files: &[
            (
                "longhand-tool.toml",
                include_str!("../../../tools/python/longhand-tool.toml"),
            ),
            ("app.py", include_str!("../../../tools/python/app.py")),
        ],
        toolchain: Toolchain::Python,
    },
    Bundled {
        name: "js",
        files: &[
            (
                "longhand-tool.toml",
                include_str!("../../../tools/js/longhand-tool.toml"),
            ),
            (
                "package.json",
                include_str!("../../../tools/js/package.json"),
            ),
            (
                "src/index.js",
                include_str!("../../../tools/js/src/index.js"),
            ),
        ],
        toolchain: Toolchain::Js,
    },
];

/// The Python SDK, as the venv's `longhand_tool` package.
const PYTHON_SDK: &[(&str, &str)] = &[
    (
        "__init__.py",
        include_str!("../../../sdk/python/longhand_tool/__init__.py"),
    ),
    (
        "_export.py",
        include_str!("../../../sdk/python/longhand_tool/_export.py"),
    ),
    (
        "http.py",
        include_str!("../../../sdk/python/longhand_tool/http.py"),
    ),
    (
        "schema.py",
        include_str!("../../../sdk/python/longhand_tool/schema.py"),
    ),
    (
        "py.typed",
        include_str!("../../../sdk/python/longhand_tool/py.typed"),
    ),
];

/// The JS SDK, as `node_modules/@longhand/tool`.
const JS_SDK: &[(&str, &str)] = &[
    ("package.json", include_str!("../../../sdk/js/package.json")),
    ("index.js", include_str!("../../../sdk/js/index.js")),
    ("index.d.ts", include_str!("../../../sdk/js/index.d.ts")),
    ("host.js", include_str!("../../../sdk/js/host.js")),
    ("host.d.ts", include_str!("../../../sdk/js/host.d.ts")),
];

/// What `npm ci` installs for the JS toolchain: pinned and hashed.
const JS_TOOLCHAIN: &[(&str, &str)] = &[
    (
        "package.json",
        include_str!("../../../tools/js/toolchain/package.json"),
    ),
    (
        "package-lock.json",
        include_str!("../../../tools/js/toolchain/package-lock.json"),
    ),
];

/// What to do when `error` is a load of a tool this binary can build but
/// that is not installed yet (`component = "python"` before `tool install
/// python`): the command that installs it.
pub(super) fn hint(error: &anyhow::Error) -> Option<String> {
    error.chain().find_map(|cause| {
        let missing = match cause.downcast_ref::<longhand_hands::LoadError>()? {
            longhand_hands::LoadError::UnknownBuiltin { name, .. } => name,
            _ => return None,
        };
        let bundled = find(missing)?;
        Some(format!(
            "`{name}` is built from sources in this binary: install it once with \
             `longhand tool install {name}`",
            name = bundled.name
        ))
    })
}

/// The bundled tool `name` is, if any.
pub(super) fn find(name: &str) -> Option<&'static Bundled> {
    BUNDLED.iter().find(|b| b.name == name)
}

impl Bundled {
    /// Everything the component is made from: the project, the SDK, the WIT
    /// and the toolchain's pins.
    fn inputs(&self) -> Vec<(&'static str, &'static str)> {
        let mut all: Vec<_> = self.files.to_vec();
        all.extend_from_slice(WIT);
        match self.toolchain {
            Toolchain::Python => all.extend_from_slice(PYTHON_SDK),
            Toolchain::Js => {
                all.extend_from_slice(JS_SDK);
                all.extend_from_slice(JS_TOOLCHAIN);
            }
        }
        all
    }

    /// A digest of [`Self::inputs`]: the project's directory name, so a
    /// binary with other sources builds in a directory of its own.
    fn sources_digest(&self) -> String {
        let mut hash = Sha256::new();
        for (path, text) in self.inputs() {
            for part in [path.as_bytes(), text.as_bytes()] {
                hash.update((part.len() as u64).to_le_bytes());
                hash.update(part);
            }
        }
        hex::encode(hash.finalize())
    }

    /// Build the component in `data/bundled/`, fetching the toolchain into
    /// `data/toolchains/` first if it is not there, and return its path.
    pub(super) async fn build(&self, hands: &Hands, data: &Path) -> anyhow::Result<PathBuf> {
        let dir =
            data.join("bundled")
                .join(format!("{}-{}", self.name, &self.sources_digest()[..16]));
        let component = dir.join(format!("{}.wasm", self.name));
        if component.is_file() {
            eprintln!(
                "{} was built from these sources already: {}",
                self.name,
                component.display()
            );
            return Ok(component);
        }
        write_project(
            &dir,
            &self
                .files
                .iter()
                .copied()
                .chain(WIT.iter().copied())
                .collect::<Vec<_>>(),
        )?;
        let toolchains = data.join("toolchains");
        match self.toolchain {
            Toolchain::Python => link(&python_venv(&toolchains)?, &dir.join(".venv"))?,
            Toolchain::Js => link(&js_modules(&toolchains)?, &dir.join("node_modules"))?,
        }
        eprintln!("building {} in {}", self.name, dir.display());
        let report = author::build(hands, &dir, true).await.with_context(|| {
            format!(
                "building the {} tool from the sources in this binary (in {})",
                self.name,
                dir.display()
            )
        })?;
        Ok(report.built.component)
    }
}

/// Write `files` under `dir`, replacing what a failed build left there.
fn write_project(dir: &Path, files: &[(&str, &str)]) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    write_files(dir, files)
}

/// `link` → `target`, as `pip install` / `npm install` would have put the
/// toolchain in the project.
fn link(target: &Path, link: &Path) -> anyhow::Result<()> {
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("cannot link {} to {}", link.display(), target.display()))
}

/// Run a fetching step with its output on stderr.
fn run(step: &str, cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("cannot start {step}"))?;
    if !status.success() {
        bail!("{step} failed ({status}); its errors are above");
    }
    Ok(())
}

/// The file that says a toolchain directory was completed: a directory
/// without it is what an interrupted fetch left, and is fetched again.
const COMPLETE: &str = ".longhand-complete";

/// The venv with componentize-py: `LONGHAND_PY_VENV` as given, else
/// `toolchains/componentize-py-<pin>`, made on first use.
fn python_venv(toolchains: &Path) -> anyhow::Result<PathBuf> {
    if let Some(venv) = env("LONGHAND_PY_VENV").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(venv));
    }
    let pin = author::COMPONENTIZE_PY;
    let venv = toolchains.join(format!("componentize-py-{pin}"));
    if !venv.join(COMPLETE).is_file() {
        if venv.exists() {
            std::fs::remove_dir_all(&venv)
                .with_context(|| format!("cannot clear {}", venv.display()))?;
        }
        eprintln!(
            "fetching componentize-py {pin} from PyPI into {} (once)",
            venv.display()
        );
        run(
            "python3 -m venv",
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
        )
        .context(
            "the python tool is built with componentize-py, installed in a venv: install \
             Python 3.10+ with venv (Debian: python3-venv), or set LONGHAND_PY_VENV to a venv \
             that has componentize-py and the longhand_tool SDK",
        )?;
        run(
            "pip install componentize-py",
            Command::new(venv.join("bin/python")).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                &format!("componentize-py=={pin}"),
            ]),
        )
        .context(
            "fetching componentize-py from PyPI (set LONGHAND_PY_VENV to use a venv that has it)",
        )?;
        let site = Command::new(venv.join("bin/python"))
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .stdin(Stdio::null())
            .output()
            .context("cannot ask the venv's python where its packages go")?;
        let site = String::from_utf8_lossy(&site.stdout).trim().to_owned();
        if site.is_empty() {
            bail!("the venv's python names no site-packages directory");
        }
        write_files(&Path::new(&site).join("longhand_tool"), PYTHON_SDK)?;
        std::fs::write(venv.join(COMPLETE), pin)?;
    }
    Ok(venv)
}

/// The `node_modules` with componentize-qjs and esbuild:
/// `LONGHAND_JS_MODULES` as given, else
/// `toolchains/componentize-qjs-<pin>/node_modules`, made by `npm ci` on
/// first use.
fn js_modules(toolchains: &Path) -> anyhow::Result<PathBuf> {
    if let Some(modules) = env("LONGHAND_JS_MODULES").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(modules));
    }
    let pin = author::COMPONENTIZE_QJS;
    let root = toolchains.join(format!("componentize-qjs-{pin}"));
    let modules = root.join("node_modules");
    if !root.join(COMPLETE).is_file() {
        if root.exists() {
            std::fs::remove_dir_all(&root)
                .with_context(|| format!("cannot clear {}", root.display()))?;
        }
        eprintln!(
            "fetching componentize-qjs {pin} and esbuild from npm into {} (once)",
            root.display()
        );
        write_files(&root, JS_TOOLCHAIN)?;
        run(
            "npm ci",
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
                .current_dir(&root),
        )
        .context(
            "the js tool is built with componentize-qjs from npm: install Node.js 20+ with npm, \
             or set LONGHAND_JS_MODULES to a node_modules that has componentize-qjs, esbuild \
             and @longhand/tool",
        )?;
        write_files(&modules.join("@longhand/tool"), JS_SDK)?;
        std::fs::write(root.join(COMPLETE), pin)?;
    }
    Ok(modules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bundled_project_pins_the_toolchain_this_binary_builds_with() {
        for b in BUNDLED {
            let dir = tempfile::TempDir::new().unwrap();
            write_files(dir.path(), b.files).unwrap();
            let config = author::BuildConfig::load(dir.path()).unwrap();
            assert_eq!(config.tool.name, b.name);
            let (package, version) = match b.toolchain {
                Toolchain::Python => ("componentize-py", author::COMPONENTIZE_PY),
                Toolchain::Js => ("componentize-qjs", author::COMPONENTIZE_QJS),
            };
            assert_eq!(config.pin(package).unwrap(), version, "{}", b.name);
        }
        let lock = JS_TOOLCHAIN[0].1;
        assert!(lock.contains(&format!(
            "\"componentize-qjs\": \"{}\"",
            author::COMPONENTIZE_QJS
        )));
        assert!(lock.contains(&format!("\"esbuild\": \"{}\"", author::ESBUILD)));
    }

    #[test]
    fn the_sources_digest_names_the_sources() {
        let python = find("python").unwrap();
        let js = find("js").unwrap();
        assert_eq!(python.sources_digest(), python.sources_digest());
        assert_ne!(python.sources_digest(), js.sources_digest());
        assert!(find("ruby").is_none());
    }
}
