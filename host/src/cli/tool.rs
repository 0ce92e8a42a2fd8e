//! `longhand tool list | describe | call | new | build | test`, and the
//! distribution commands (`publish | install | keygen | lock | upgrade |
//! verify`), which [`dist`](super::dist) runs.
//!
//! Everything a component says (its `describe` text, error messages,
//! output, the resources it reached for) is foreign text: it is printed
//! through [`term`](super::term), never raw.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use super::describe::{first_line, print_description};
use super::env::hands;
use super::settings::GrantFlags;
use super::term::{json_line, json_pretty, one_line};
use super::{Outcome, usage};
use longhand_hands::{Hands, LoadedTool, Receipt, ToolSource, bound, builtin};

#[derive(Debug, clap::Subcommand)]
pub enum ToolCommand {
    /// List the built-in and installed tool components and their tools
    /// (installed ones with their source, digest and signer).
    List {
        /// One JSON object per component.
        #[arg(long)]
        json: bool,
    },
    /// Show what a component offers and asks for.
    Describe {
        /// A built-in or installed name (see `longhand tool list`) or a path
        /// to a .wasm component.
        component: String,
        /// Print the description as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool in a fresh sandboxed instance.
    Call {
        /// A built-in or installed name, or a path to a .wasm component.
        component: String,
        /// The tool to call (see `describe`).
        tool: String,
        /// Input JSON; `@FILE` reads it from a file, `-` from stdin.
        /// Without it the tool gets `{}`, the input of a tool with no
        /// required fields.
        #[arg(long, value_name = "JSON", default_value = "{}")]
        input: String,
        #[command(flatten)]
        grants: Box<GrantFlags>,
        /// Print `{ok, output|error, receipt}` as JSON.
        #[arg(long)]
        json: bool,
        /// Also write the call to this fixture file (input, every HTTP
        /// exchange with secrets redacted, output) for `longhand tool test`.
        #[arg(long, value_name = "FIXTURE.json")]
        record: Option<std::path::PathBuf>,
    },
    /// Start a tool project in ./NAME: the `greet` tool, its WIT, a test, a
    /// README and longhand-tool.toml (the pinned toolchain).
    New {
        /// The project's (and component's) name: lowercase letters, digits, `-`, `_`.
        name: String,
        /// The language to write the tool in.
        #[arg(long, value_enum)]
        lang: super::author::Lang,
        /// JavaScript and TypeScript only: spidermonkey (default; fetch, async handlers) or
        /// quickjs (small and fast to start; no outbound HTTP).
        #[arg(long, value_enum)]
        engine: Option<super::author::Engine>,
        /// Link the `sdk/` folder of a Longhand checkout (default:
        /// LONGHAND_SDK; without either, the project carries the SDK this
        /// binary holds, in vendor/).
        #[arg(long, value_name = "PATH")]
        sdk: Option<std::path::PathBuf>,
    },
    /// Make an existing directory (default: here) a tool project: what
    /// `tool new` writes, around what is there. Its README.md is kept and
    /// its .gitignore gets the lines it lacks; any other file already there
    /// that the project would write stops it before anything is written.
    Init {
        /// The directory.
        #[arg(default_value = ".")]
        dir: std::path::PathBuf,
        /// The language to write the tool in.
        #[arg(long, value_enum)]
        lang: super::author::Lang,
        /// The tool's (and component's) name (default: the directory's).
        #[arg(long)]
        name: Option<String>,
        /// JavaScript and TypeScript only: spidermonkey (default) or quickjs.
        #[arg(long, value_enum)]
        engine: Option<super::author::Engine>,
        /// Link the `sdk/` folder of a Longhand checkout instead of carrying
        /// the SDK in vendor/ (default: LONGHAND_SDK, else carried).
        #[arg(long, value_name = "PATH")]
        sdk: Option<std::path::PathBuf>,
    },
    /// Build the project in DIR (default: here) with its pinned toolchain,
    /// check the component's imports, and print its path, digest, size and tools.
    Build {
        /// The project directory (holding longhand-tool.toml).
        #[arg(default_value = ".")]
        dir: std::path::PathBuf,
        /// Print `{component, digest, size, tools, up_to_date}` as JSON.
        #[arg(long)]
        json: bool,
        /// Build even when the sources and toolchain are those of the last
        /// build (which is otherwise reported as up to date, unchanged).
        #[arg(long)]
        force: bool,
    },
    /// Push a component to an OCI registry as a CNCF wasm artifact and
    /// print the manifest digest. Plain HTTP only to loopback registries.
    Publish {
        /// The .wasm component.
        component: std::path::PathBuf,
        /// Where: oci://HOST[:PORT]/REPO:TAG.
        target: String,
        /// Embed an Ed25519 signature made with this secret key (from
        /// `longhand tool keygen`) before pushing.
        #[arg(long, value_name = "KEYFILE")]
        sign: Option<std::path::PathBuf>,
    },
    /// Fetch a component, check every digest, its signature and imports,
    /// precompile it, show what it asks for, and install it under a name.
    Install {
        /// A path, an https:// URL (needs --digest or a trusted signature)
        /// or oci://HOST[:PORT]/REPO:TAG[@sha256:…]; or `python` / `js`,
        /// built here from the sources in this binary (the first time, their
        /// toolchain is fetched from PyPI / npm into the data directory).
        source: String,
        /// The name to install it under (default: the repository's last
        /// part, or the file's stem).
        #[arg(long)]
        name: Option<String>,
        /// Refuse anything but the component with this digest (sha256:…);
        /// an unsigned component pinned so is accepted.
        #[arg(long, value_name = "DIGEST")]
        digest: Option<String>,
        /// Accept a component no trusted key signed.
        #[arg(long)]
        allow_unsigned: bool,
    },
    /// Write a new signing key pair: KEYFILE (secret, mode 0600) and
    /// KEYFILE.pub (default: keys/signing.key in the data directory).
    Keygen {
        /// Where to write the secret key.
        keyfile: Option<std::path::PathBuf>,
    },
    /// Write longhand.lock beside the agent file: each tool's source,
    /// digests, signer, imports and requests.
    Lock {
        /// The agent file (or its directory).
        agent: std::path::PathBuf,
        /// Write nothing; fail, naming what changed, if the lock would
        /// change or a locked tag has moved.
        #[arg(long)]
        locked: bool,
    },
    /// Fetch the newest version of an installed tool from its source (the
    /// repository's highest version tag when it was installed from one,
    /// e.g. 1.0 → 1.2; else its tag again, e.g. latest) and show what it
    /// asks for beyond the installed one; a version that asks for more is
    /// held until --approve.
    Upgrade {
        /// The installed name.
        name: String,
        /// Install the held version even though it asks for more.
        #[arg(long)]
        approve: bool,
    },
    /// Re-hash installed components against their install records and
    /// ./longhand.lock, and check their signatures again.
    Verify {
        /// Every installed tool, not only those ./longhand.lock names (the
        /// lock is checked either way).
        #[arg(long)]
        all: bool,
    },
    /// Replay DIR/fixtures/*.json (made by `tool call --record`) against the
    /// project's built component: recorded HTTP answers are served in order,
    /// nothing reaches the network, and each output must match.
    Test {
        /// The project directory (holding longhand-tool.toml and fixtures/).
        #[arg(default_value = ".")]
        dir: std::path::PathBuf,
        /// Test this component (a built-in name or a .wasm path) instead of
        /// the one `longhand tool build` made.
        #[arg(long, value_name = "COMPONENT")]
        component: Option<String>,
        /// Write the result the component gives now into each fixture whose
        /// replay differs only in its result (a fixture whose HTTP exchanges
        /// or written files differ must be recorded again).
        #[arg(long)]
        update: bool,
    },
}

/// Whether `cmd` only prints what is on this machine (so SIGPIPE may end
/// it quietly when its reader goes; see `cli::sigpipe_for`).
pub(super) fn only_prints(cmd: &ToolCommand) -> bool {
    matches!(cmd, ToolCommand::List { .. } | ToolCommand::Describe { .. })
}

pub async fn run(cmd: ToolCommand) -> anyhow::Result<Outcome> {
    match cmd {
        ToolCommand::List { json } => list(json).await,
        ToolCommand::Describe { component, json } => describe(&component, json).await,
        ToolCommand::Call {
            component,
            tool,
            input,
            grants,
            json,
            record,
        } => call(&component, &tool, &input, &grants, json, record.as_deref()).await,
        ToolCommand::New {
            name,
            lang,
            engine,
            sdk,
        } => {
            let dir = super::author::new(Path::new("."), &name, lang, engine, sdk.as_deref())?;
            println!("wrote {}/", dir.display());
            println!(
                "next: cd {name}, then see README.md (test, `longhand tool build`, `longhand tool call`)"
            );
            Ok(Outcome::Done)
        }
        ToolCommand::Init {
            dir,
            lang,
            name,
            engine,
            sdk,
        } => {
            let done = super::author::init(&dir, name.as_deref(), lang, engine, sdk.as_deref())?;
            println!("{} is the tool project `{}`", dir.display(), done.name);
            for kept in &done.kept {
                println!("kept your {kept}");
            }
            if done.ignored > 0 {
                println!("added {} lines to .gitignore", done.ignored);
            }
            if done.kept.iter().any(|k| k == "README.md") {
                println!(
                    "next: `longhand tool build`, then `longhand tool test` (the fixtures/ it \
                     replays are written; your README.md was kept)"
                );
            } else {
                println!("next: see README.md (test, `longhand tool build`, `longhand tool call`)");
            }
            Ok(Outcome::Done)
        }
        ToolCommand::Test {
            dir,
            component,
            update,
        } => super::author::test(&hands()?, &dir, component.as_deref(), update).await,
        ToolCommand::Build { dir, json, force } => {
            let report = super::author::build(&hands()?, &dir, force).await?;
            if report.up_to_date {
                eprintln!(
                    "up to date: the sources and toolchain are those of the last build, and so is \
                     the component (--force builds again)"
                );
            }
            let built = &report.built;
            if json {
                println!("{}", json_line(&serde_json::to_value(&report)?));
            } else {
                println!("component: {}", built.component.display());
                println!("digest:    {}", built.digest);
                println!("size:      {} bytes", built.size);
                println!("tools:     {}", one_line(&built.tools.join(", ")));
            }
            Ok(Outcome::Done)
        }
        ToolCommand::Publish {
            component,
            target,
            sign,
        } => super::dist::publish(&component, &target, sign.as_deref()).await,
        ToolCommand::Install {
            source,
            name,
            digest,
            allow_unsigned,
        } => {
            super::dist::install(&source, name.as_deref(), digest.as_deref(), allow_unsigned).await
        }
        ToolCommand::Keygen { keyfile } => super::dist::keygen(keyfile),
        ToolCommand::Lock { agent, locked } => super::dist::lock(&agent, locked).await,
        ToolCommand::Upgrade { name, approve } => super::dist::upgrade(&name, approve).await,
        ToolCommand::Verify { all } => super::dist::verify(all),
    }
}

/// A name with a path separator or a `.wasm` suffix is a file; anything else
/// is a built-in or an installed tool.
fn source_of(component: &str) -> ToolSource<'_> {
    if component.ends_with(".wasm") || component.contains('/') {
        ToolSource::File(Path::new(component))
    } else {
        ToolSource::Builtin(component)
    }
}

async fn load(hands: &Hands, component: &str) -> anyhow::Result<std::sync::Arc<LoadedTool>> {
    let _working = super::progress::Working::start(super::progress::compiling(component));
    Ok(hands.load(source_of(component)).await?)
}

async fn list(json: bool) -> anyhow::Result<Outcome> {
    let hands = hands()?;
    let mut out = std::io::stdout().lock();
    for b in builtin::BUILTINS {
        let tool = load(&hands, b.name).await?;
        let info = tool.info();
        if json {
            let line = json!({
                "name": b.name,
                "digest": tool.digest(),
                "version": info.version,
                "description": info.description,
                "tools": info.tools.iter().map(|t| json!({
                    "name": t.name, "effect": t.effect, "description": t.description,
                })).collect::<Vec<_>>(),
            });
            writeln!(out, "{}", json_line(&line))?;
        } else {
            let tools: Vec<&str> = info.tools.iter().map(|t| t.name.as_str()).collect();
            writeln!(
                out,
                "{:<6} {:<8} {}  [{}]",
                b.name,
                one_line(&info.version),
                one_line(first_line(&info.description)),
                one_line(&tools.join(", "))
            )?;
        }
    }
    // Installed tools from their records: listing neither loads nor
    // compiles them (`tool verify` checks their bytes).
    for r in super::dist::installed()? {
        let signer = r.signer.clone().unwrap_or_else(|| match r.trust {
            crate::dist::store::Trust::Pinned => "unsigned (pinned)".to_owned(),
            _ => "unsigned".to_owned(),
        });
        if json {
            let line = json!({
                "name": r.name,
                "digest": r.digest,
                "version": r.version,
                "source": r.source,
                "manifest_digest": r.manifest_digest,
                "signer": r.signer,
                "trust": r.trust,
                "tools": r.tools,
            });
            writeln!(out, "{}", json_line(&line))?;
        } else {
            writeln!(
                out,
                "{:<6} {:<8} installed from {}  [{}]\n       digest {}  signer {}",
                r.name,
                one_line(&r.version),
                one_line(&r.source),
                one_line(&r.tools.join(", ")),
                r.digest,
                one_line(&signer)
            )?;
        }
    }
    Ok(Outcome::Done)
}

async fn describe(component: &str, json: bool) -> anyhow::Result<Outcome> {
    let hands = hands()?;
    let tool = load(&hands, component).await?;
    let info = tool.info();
    if json {
        let value = json!({
            "component": tool.label(),
            "digest": tool.digest(),
            "imports": tool.capabilities(),
            "info": info,
        });
        println!("{}", json_pretty(&value));
        return Ok(Outcome::Done);
    }
    print_description(&tool);
    Ok(Outcome::Done)
}

/// The `--input` JSON. Every failure here is the operator's input: a file
/// that cannot be read, or text that is not JSON.
fn read_input(input: &str) -> anyhow::Result<serde_json::Value> {
    let text = if input == "-" {
        std::io::read_to_string(std::io::stdin())
            .map_err(|e| usage(format!("reading --input from stdin: {e}")))?
    } else if let Some(path) = input.strip_prefix('@') {
        std::fs::read_to_string(path)
            .map_err(|e| usage(format!("reading --input file {path}: {e}")))?
    } else {
        input.to_owned()
    };
    serde_json::from_str(&text).map_err(|e| {
        usage(format!(
            "--input is not valid JSON; pass an object like '{{\"path\": \"README.md\"}}': {e}"
        ))
    })
}

async fn call(
    component: &str,
    tool_name: &str,
    input: &str,
    flags: &GrantFlags,
    json: bool,
    record: Option<&Path>,
) -> anyhow::Result<Outcome> {
    let input = read_input(input)?;
    let grants = flags.resolve()?;
    let recording = record
        .map(|path| super::author::Recording::start(path, flags, &grants))
        .transpose()?;
    let hands = hands()?;
    // A pinned digest is compared before anything is read from the
    // component: the wrong one is never compiled or cached.
    let tool = match &flags.digest {
        Some(pin) => {
            let _working = super::progress::Working::start(super::progress::compiling(component));
            hands.load_pinned(source_of(component), pin).await?
        }
        None => load(&hands, component).await?,
    };
    if tool.tool(tool_name).is_none() {
        let names = tool.tool_names();
        return Err(usage(format!(
            "{} has no tool `{}`; it offers: {}",
            bound::cut_str(component, bound::MAX_PATH_BYTES),
            bound::name(tool_name),
            one_line(&names.join(", "))
        )));
    }
    let options = recording
        .as_ref()
        .map(super::author::Recording::options)
        .unwrap_or_default();
    let outcome = hands
        .call_with(&tool, &grants, tool_name, &input, options)
        .await;
    if let Some(recording) = recording {
        let (path, exchanges, files) = recording.finish(&tool, tool_name, &input, &outcome)?;
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        eprintln!(
            "recorded to {} ({exchanges} HTTP exchange{}, {files} file{} read)",
            path.display(),
            plural(exchanges),
            plural(files)
        );
    }
    let end = match &outcome.result {
        Ok(_) => Outcome::Done,
        Err(e) => Outcome::ToolError(e.clone()),
    };
    if json {
        let value = match &outcome.result {
            Ok(output) => json!({"ok": true, "output": output, "receipt": outcome.receipt}),
            Err(error) => json!({"ok": false, "error": error, "receipt": outcome.receipt}),
        };
        println!("{}", json_pretty(&value));
        return Ok(end);
    }
    match &outcome.result {
        // Output is JSON for people too: still valid JSON, never raw
        // controls.
        Ok(output) => println!("{}", json_pretty(output)),
        // One line, so a message cannot forge the receipt lines below it.
        Err(error) => eprintln!("error: {}", one_line(&error.to_string())),
    }
    eprintln!("{}", summarize(&outcome.receipt));
    Ok(end)
}

/// One line for people; `--json` has everything.
fn summarize(r: &Receipt) -> String {
    let mut line = format!(
        "receipt: {:.2} ms, fuel {}, peak memory {:.1} MiB, in {} B, out {} B",
        r.wall_us as f64 / 1000.0,
        r.fuel_used,
        r.peak_memory_bytes as f64 / (1 << 20) as f64,
        r.input_bytes,
        r.output_bytes
    );
    if r.bytes_written > 0 {
        line.push_str(&format!(", wrote {} B", r.bytes_written));
    }
    // The tool's own log lines and last progress, as it reported them
    // (escaped, one line each: guest text never forges a line of ours).
    for l in &r.logs {
        line.push_str(&format!(
            "\n  log    {} {}",
            one_line(&l.level),
            one_line(&l.message)
        ));
    }
    if r.logs_dropped > 0 {
        line.push_str(&format!(
            "\n  log    ({} more lines dropped)",
            r.logs_dropped
        ));
    }
    if let Some(p) = &r.progress {
        let of = p.total.map(|t| format!("/{t}")).unwrap_or_default();
        line.push_str(&format!(
            "\n  progress {}{of} {}",
            p.done,
            one_line(&p.message)
        ));
    }
    for u in &r.used {
        line.push_str(&format!(
            "\n  used   {} {}: {}",
            u.capability,
            one_line(&u.resource),
            one_line(&u.detail)
        ));
    }
    for d in &r.denied {
        line.push_str(&format!(
            "\n  denied {} {}: {}",
            d.capability,
            one_line(&d.resource),
            one_line(&d.reason)
        ));
    }
    for l in &r.limits_hit {
        line.push_str(&format!("\n  limit  {}", one_line(l)));
    }
    if r.stdout.dropped_bytes > 0 || r.stderr.dropped_bytes > 0 {
        line.push_str(&format!(
            "\n  stdio  dropped {} B of stdout and {} B of stderr past the cap",
            r.stdout.dropped_bytes, r.stderr.dropped_bytes
        ));
    }
    line
}
