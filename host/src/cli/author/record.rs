//! `longhand tool call … --record FIXTURE.json` and `longhand tool test
//! [DIR]`: tool tests from recorded host interactions.
//!
//! A fixture is one call written down: the tool, its input, the grants a
//! replay needs (the hosts as granted when recording, never more), every
//! `wasi:http` exchange in order (the hands' [`Tape`]), and the output or
//! the error. `tool test` replays each of `DIR/fixtures/*.json` against
//! the project's built component in a fresh instance, with the recorded
//! answers served instead of the network; it passes when every request is
//! the recorded one, in order, none is missing, and the output is equal.
//!
//! A call granted directories (`--dir`, `--mount`) keeps, beside that,
//! what it found there: each file it opened to read (its bytes as they
//! were), each directory it opened or listed (names, sizes and times of
//! what it listed), and each file it wrote (its bytes after the call),
//! bounded by the hands' file tape ([`longhand_hands::files_tape`]). The
//! fixture names the directories by guest path and mode, never by host
//! path. `tool test` makes a fresh directory per grant holding what was
//! found, grants it at the same guest path and mode, and passes only if
//! each file the call wrote holds what it held when recorded.
//!
//! What a fixture never holds: a secret. Secrets are named (the
//! `--secret` specs, which carry no value), the exchanges leave the tape
//! redacted, and the input and output pass the same redactor. A replay
//! holds no secret at all: the recorded answers need none.
//!
//! What this module must not do: reach the network during a test (the
//! tape answers, and hosts not recorded are not granted), or write
//! anything but the one fixture file `--record` names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::settings::GrantFlags;
use super::super::term::{json_pretty, one_line};
use super::super::{Outcome, usage};
use longhand_hands::files_tape::FileEntry;
use longhand_hands::tape::Exchange;
use longhand_hands::{
    Access, CallError, CallOptions, CallOutcome, DirSpec, FilesTape, Grants, Hands, HostPattern,
    Limits, LoadedTool, Tape, ToolSource,
};

/// The fixture format written and read here.
const FORMAT: u32 = 1;

/// Largest fixture file `tool test` reads: a tape holds at most
/// [`longhand_hands::tape::MAX_TAPE_BYTES`] of bodies, which base64 and
/// JSON escapes can make four times larger on disk.
const MAX_FIXTURE_BYTES: u64 = 4 * longhand_hands::tape::MAX_TAPE_BYTES + (1 << 20);

/// Most lines of each side a JSON diff compares line by line; larger
/// outputs are shown as their first differing line.
const MAX_DIFF_LINES: usize = 2000;

/// One recorded call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    /// Format version; [`FORMAT`].
    #[serde(default = "format")]
    longhand_fixture: u32,
    /// The tool called (see `longhand tool describe`).
    tool: String,
    /// Its input. Default `{}`.
    #[serde(default = "empty_object")]
    input: Value,
    /// What the replay is granted.
    #[serde(default, skip_serializing_if = "FixtureGrants::is_empty")]
    grants: FixtureGrants,
    /// Every `wasi:http` exchange, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    http: Vec<Exchange>,
    /// What the call found in its granted directories (the replay's
    /// directories hold exactly these).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    files: Vec<FileEntry>,
    /// The files the call wrote, as they were after it: a replay must
    /// leave each the same.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    wrote: Vec<FileEntry>,
    /// The output expected; exactly one of `output` and `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    /// The error expected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<CallError>,
    /// The digest of the component recorded against; for people (a test
    /// is meant to pass against a rebuilt component).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recorded_with: Option<String>,
}

fn format() -> u32 {
    FORMAT
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// The grants of a fixture: what the recorded call was granted, minus
/// what a replay cannot or must not have.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureGrants {
    /// `--allow-host` patterns as written. The replay is granted these and
    /// nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    hosts: Vec<String>,
    /// `--secret` specs (`ENV_VAR@HOST[:HEADER]`, no value), for people:
    /// a replay holds no secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    secrets: Vec<String>,
    /// Directories, by guest path and mode (never the host path): a replay
    /// grants a fresh directory at each, holding the fixture's `files`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    dirs: Vec<FixtureDir>,
    /// `--env` variables with the values the call saw.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    env: BTreeMap<String, String>,
    /// Limits, when the call did not use the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    limits: Option<Limits>,
}

/// A granted directory as a fixture keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureDir {
    /// Where the guest saw it.
    guest: String,
    /// `read-only` or `read-write`.
    #[serde(default)]
    mode: Access,
    /// Whether the grant allowed symbolic links.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    symlinks: bool,
}

impl FixtureGrants {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    /// The replay's grants: the recorded hosts, env and limits, and each
    /// recorded directory as a fresh one under `scratch` holding `files`;
    /// no secret.
    fn replay(&self, files: &[FileEntry], scratch: &Path) -> anyhow::Result<Grants> {
        let hosts = self
            .hosts
            .iter()
            .map(|h| HostPattern::parse(h))
            .collect::<Result<_, _>>()?;
        let mut dirs = Vec::with_capacity(self.dirs.len());
        for (i, dir) in self.dirs.iter().enumerate() {
            let host = scratch.join(format!("dir-{i}"));
            std::fs::create_dir_all(&host)?;
            lay_out(&host, &dir.guest, &self.dirs, files)?;
            let spec = DirSpec {
                host_path: host,
                guest_path: dir.guest.clone(),
                access: dir.mode,
                symlinks: dir.symlinks,
            };
            dirs.push(spec.resolve(scratch)?);
        }
        let grants = Grants {
            hosts,
            dirs,
            env: self.env.clone(),
            limits: self.limits.clone().unwrap_or_default(),
            ..Grants::default()
        };
        grants.validate()?;
        Ok(grants)
    }
}

/// The grant whose guest path holds `path`: the longest that does.
fn grant_of<'a>(path: &str, dirs: &'a [FixtureDir]) -> Option<&'a FixtureDir> {
    dirs.iter()
        .filter(|d| {
            let root = d.guest.trim_end_matches('/');
            path == root || path.starts_with(&format!("{root}/")) || root.is_empty()
        })
        .max_by_key(|d| d.guest.trim_end_matches('/').len())
}

/// `path` beneath its grant `guest`, checked to be plain names only: a
/// fixture is read from a project and may have been edited by anyone.
fn beneath(guest: &str, path: &str) -> anyhow::Result<PathBuf> {
    let rest = path[guest.trim_end_matches('/').len()..].trim_start_matches('/');
    let mut out = PathBuf::new();
    for part in rest.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." || part.contains('\\') {
            bail!("`files`: {path} is not a plain path beneath {guest}");
        }
        out.push(part);
    }
    Ok(out)
}

/// Write the `files` that belong to grant `guest` (and no nested grant)
/// into `host`.
fn lay_out(
    host: &Path,
    guest: &str,
    dirs: &[FixtureDir],
    files: &[FileEntry],
) -> anyhow::Result<()> {
    for entry in files {
        if grant_of(&entry.path, dirs).is_none_or(|d| d.guest != guest) {
            continue;
        }
        let at = host.join(beneath(guest, &entry.path)?);
        if entry.dir {
            std::fs::create_dir_all(&at)?;
            continue;
        }
        if let Some(parent) = at.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::File::create(&at)
            .with_context(|| format!("cannot make {} for {}", at.display(), entry.path))?;
        match (&entry.content, entry.size) {
            (Some(content), _) => {
                use std::io::Write as _;
                (&file).write_all(&content.0)?;
            }
            (None, Some(size)) => file.set_len(size)?,
            (None, None) => {}
        }
        if let Some(time) = entry.modified_time() {
            file.set_modified(time)?;
        }
    }
    Ok(())
}

/// What differs between the files a recording wrote and what the replay
/// left in its directories.
fn compare_written(grants: &Grants, dirs: &[FixtureDir], wrote: &[FileEntry]) -> Vec<String> {
    let mut problems = Vec::new();
    for entry in wrote {
        let Some((dir, grant)) = grant_of(&entry.path, dirs).and_then(|d| {
            grants
                .dirs
                .iter()
                .find(|g| g.guest_path() == d.guest)
                .map(|g| (d, g))
        }) else {
            problems.push(format!("{}: no recorded directory holds it", entry.path));
            continue;
        };
        let at = match beneath(&dir.guest, &entry.path) {
            Ok(rel) => grant.host_path().join(rel),
            Err(e) => {
                problems.push(format!("{e:#}"));
                continue;
            }
        };
        if entry.dir {
            if !at.is_dir() {
                problems.push(format!(
                    "the call did not make the directory {}",
                    entry.path
                ));
            }
            continue;
        }
        let want = entry
            .content
            .as_ref()
            .map(|c| c.0.as_slice())
            .unwrap_or_default();
        match std::fs::read(&at) {
            Ok(got) if got == want => {}
            Ok(got) => {
                let show = |b: &[u8]| match std::str::from_utf8(b) {
                    Ok(text) => Value::String(text.to_owned()),
                    Err(_) => Value::String(format!("({} bytes, not UTF-8)", b.len())),
                };
                problems.push(format!(
                    "{} differs from what the recorded call wrote (- expected, + got):\n{}",
                    entry.path,
                    diff_json(&show(want), &show(&got)).join("\n")
                ));
            }
            Err(_) => problems.push(format!(
                "the recorded call wrote {}; the replay did not",
                entry.path
            )),
        }
    }
    problems
}

/// A call being recorded: started before the call, written after it.
pub(crate) struct Recording {
    path: PathBuf,
    tape: Tape,
    files: Option<FilesTape>,
    grants: FixtureGrants,
}

impl Recording {
    /// Check that a call with `flags` can be recorded to `path` and
    /// replayed, and make its tape.
    pub(crate) fn start(path: &Path, flags: &GrantFlags, grants: &Grants) -> anyhow::Result<Self> {
        if !flags.databases.is_empty() {
            return Err(usage(
                "--record keeps a call's input, HTTP exchanges and output, not a database's \
                 answers: a call granted --database cannot be replayed from a fixture. Record \
                 the call without databases",
            ));
        }
        if path.is_dir() || path.extension().is_none_or(|e| e != "json") {
            return Err(usage(format!(
                "--record {}: give the fixture file to write, ending in .json (e.g. \
                 fixtures/greet-ada.json)",
                path.display()
            )));
        }
        let limits = (grants.limits != Limits::default()).then(|| grants.limits.clone());
        let dirs: Vec<FixtureDir> = grants
            .dirs
            .iter()
            .map(|d| FixtureDir {
                guest: d.guest_path().to_owned(),
                mode: d.access(),
                symlinks: d.symlinks(),
            })
            .collect();
        Ok(Self {
            path: path.to_owned(),
            tape: Tape::record(),
            files: (!dirs.is_empty()).then(FilesTape::record),
            grants: FixtureGrants {
                dirs,
                hosts: flags.hosts.clone(),
                secrets: flags.secrets.clone(),
                env: grants.env.clone(),
                limits,
            },
        })
    }

    /// The options that make a call record onto this recording's tape.
    pub(crate) fn options(&self) -> CallOptions {
        CallOptions {
            tape: Some(self.tape.clone()),
            files: self.files.clone(),
        }
    }

    /// Write the fixture (atomically); return its path, how many
    /// exchanges it holds and how many files. A recording the tape could not keep whole is
    /// refused: a fixture that is not the call would fail, or pass, for
    /// the wrong reason.
    pub(crate) fn finish(
        self,
        tool: &LoadedTool,
        name: &str,
        input: &Value,
        outcome: &CallOutcome,
    ) -> anyhow::Result<(PathBuf, usize, usize)> {
        let (files, wrote) = self
            .files
            .as_ref()
            .map(FilesTape::finish)
            .unwrap_or_default();
        let mut problems = self.tape.problems();
        problems.extend(
            self.files
                .as_ref()
                .map(FilesTape::problems)
                .unwrap_or_default(),
        );
        if !problems.is_empty() {
            bail!(
                "the call was not recorded to {}: {}",
                self.path.display(),
                problems.join("; ")
            );
        }
        let mut input = input.clone();
        self.tape.scrub(&mut input);
        let mut env = serde_json::to_value(&self.grants.env)?;
        self.tape.scrub(&mut env);
        let (mut output, mut error) = match &outcome.result {
            Ok(v) => (Some(v.clone()), None),
            Err(e) => (None, Some(serde_json::to_value(e)?)),
        };
        for v in output.iter_mut().chain(error.iter_mut()) {
            self.tape.scrub(v);
        }
        let http = self.tape.exchanges();
        let fixture = Fixture {
            longhand_fixture: FORMAT,
            tool: name.to_owned(),
            input,
            grants: FixtureGrants {
                env: serde_json::from_value(env)?,
                ..self.grants
            },
            http,
            files,
            wrote,
            output,
            error: error.map(serde_json::from_value).transpose()?,
            recorded_with: Some(tool.digest().to_owned()),
        };
        write_fixture(&self.path, &fixture)?;
        let files = fixture.files.iter().filter(|f| f.content.is_some()).count();
        Ok((self.path, fixture.http.len(), files))
    }
}

/// Write `fixture` to `path` whole or not at all (a sibling file renamed
/// into place).
fn write_fixture(path: &Path, fixture: &Fixture) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(fixture)? + "\n";
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let staging = path.with_extension(format!("json.{}.tmp", std::process::id()));
    std::fs::write(&staging, text)
        .with_context(|| format!("cannot write {}", staging.display()))?;
    std::fs::rename(&staging, path).with_context(|| {
        let _ = std::fs::remove_file(&staging);
        format!("cannot write {}", path.display())
    })
}

/// A name with a path separator or a `.wasm` suffix is a file; anything
/// else is a built-in (as `longhand tool call` reads it).
fn source_of(component: &str) -> ToolSource<'_> {
    if component.ends_with(".wasm") || component.contains('/') {
        ToolSource::File(Path::new(component))
    } else {
        ToolSource::Builtin(component)
    }
}

/// `longhand tool test [DIR] [--component C]`: replay `DIR/fixtures/*.json`.
/// `longhand tool test [DIR] [--component C] [--update]`: replay every
/// fixture; with `update`, a fixture whose only difference is the result
/// takes the result the component gives now.
pub(crate) async fn test(
    hands: &Hands,
    dir: &Path,
    component: Option<&str>,
    update: bool,
) -> anyhow::Result<Outcome> {
    let fixtures_dir = dir.join("fixtures");
    let mut fixtures: Vec<PathBuf> = match std::fs::read_dir(&fixtures_dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read {}", fixtures_dir.display()));
        }
    };
    fixtures.sort();
    if fixtures.is_empty() {
        return Err(usage(format!(
            "no fixtures in {}: record one with `longhand tool call COMPONENT TOOL --input JSON \
             --record {}/NAME.json`",
            fixtures_dir.display(),
            fixtures_dir.display()
        )));
    }
    let built;
    let source = match component {
        Some(c) => source_of(c),
        None => {
            built = super::build::built_component(dir)?;
            if let Some(warning) = super::stamp::staleness(dir, &built) {
                eprintln!("warning: {}", one_line(&warning));
            }
            ToolSource::File(&built)
        }
    };
    let tool = {
        let _working = crate::cli::progress::Working::start(
            "compiling the component for this machine (once; later loads are cached)",
        );
        hands.load(source).await?
    };
    println!(
        "testing {} ({}) against {} fixture{}",
        one_line(tool.label()),
        tool.digest(),
        fixtures.len(),
        if fixtures.len() == 1 { "" } else { "s" }
    );
    let mut failed = 0;
    let mut updated = 0;
    for path in &fixtures {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let problems = match run_fixture(hands, &tool, path, update).await {
            Ok(Replayed::Passed) => Vec::new(),
            Ok(Replayed::Updated) => {
                updated += 1;
                println!(
                    "UPDATED {} (the new result is in the fixture)",
                    one_line(&name)
                );
                continue;
            }
            Ok(Replayed::Failed(problems)) => problems,
            Err(e) => vec![format!("{e:#}")],
        };
        if problems.is_empty() {
            println!("ok    {}", one_line(&name));
        } else {
            failed += 1;
            println!("FAIL  {}", one_line(&name));
            for problem in &problems {
                for line in problem.lines() {
                    println!("      {}", one_line(line));
                }
            }
        }
    }
    let passed = fixtures.len() - failed - updated;
    if update {
        println!("{passed} passed, {updated} updated, {failed} failed");
    } else {
        println!("{passed} passed, {failed} failed");
    }
    if failed == 0 {
        return Ok(Outcome::Done);
    }
    Ok(Outcome::ToolError(CallError::Failed {
        message: format!("{failed} of {} fixtures failed", fixtures.len()),
    }))
}

/// How one fixture's replay went.
enum Replayed {
    Passed,
    /// `--update`: the result differed, nothing else did, and the fixture
    /// now holds the new one.
    Updated,
    /// What differs from the fixture.
    Failed(Vec<String>),
}

/// Replay one fixture. With `update`, a fixture whose replay differs only
/// in its result is rewritten with the result the component gives now
/// (and its digest); one whose HTTP exchanges or written files differ is
/// not: those need the call made again (`tool call --record`).
async fn run_fixture(
    hands: &Hands,
    tool: &LoadedTool,
    path: &Path,
    update: bool,
) -> anyhow::Result<Replayed> {
    let size = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if size > MAX_FIXTURE_BYTES {
        bail!(
            "{} is {size} bytes, more than a fixture may be ({MAX_FIXTURE_BYTES})",
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let fixture: Fixture = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a fixture (record one with `longhand tool call … --record`)",
            path.display()
        )
    })?;
    if fixture.longhand_fixture != FORMAT {
        bail!(
            "{} is fixture format {}; this longhand reads format {FORMAT}",
            path.display(),
            fixture.longhand_fixture
        );
    }
    let expected: Result<&Value, &CallError> = match (&fixture.output, &fixture.error) {
        (Some(output), None) => Ok(output),
        (None, Some(error)) => Err(error),
        _ => bail!(
            "{} must hold exactly one of `output` and `error`",
            path.display()
        ),
    };
    let scratch = tempfile::tempdir().context("cannot make a directory for the replay")?;
    let grants = fixture
        .grants
        .replay(&fixture.files, scratch.path())
        .with_context(|| format!("{}: `grants`", path.display()))?;
    if tool.tool(&fixture.tool).is_none() {
        let names = tool.tool_names();
        bail!(
            "the component has no tool `{}`; it offers: {}",
            fixture.tool,
            names.join(", ")
        );
    }
    let tape = Tape::replay(fixture.http.clone());
    let outcome = hands
        .call_with(
            tool,
            &grants,
            &fixture.tool,
            &fixture.input,
            CallOptions {
                tape: Some(tape.clone()),
                files: None,
            },
        )
        .await;
    let mut problems = tape.problems();
    problems.extend(compare_written(
        &grants,
        &fixture.grants.dirs,
        &fixture.wrote,
    ));
    let got: Result<&Value, &CallError> = outcome.result.as_ref();
    if got == expected {
        return Ok(if problems.is_empty() {
            Replayed::Passed
        } else {
            Replayed::Failed(problems)
        });
    }
    if update && problems.is_empty() {
        let (output, error) = match got {
            Ok(v) => (Some(v.clone()), None),
            Err(e) => (None, Some(e.clone())),
        };
        let fixture = Fixture {
            output,
            error,
            recorded_with: Some(tool.digest().to_owned()),
            ..fixture
        };
        write_fixture(path, &fixture)?;
        return Ok(Replayed::Updated);
    }
    problems.push(format!(
        "the result differs from the recording (- expected, + got):\n{}",
        diff_json(&result_json(expected), &result_json(got)).join("\n")
    ));
    if update {
        problems.push(
            "not updated: the call's HTTP exchanges or written files differ too; record it \
             again with `longhand tool call … --record`"
                .to_owned(),
        );
    }
    Ok(Replayed::Failed(problems))
}

/// A result as the fixture writes it: `{"output": …}` or `{"error": …}`.
fn result_json(result: Result<&Value, &CallError>) -> Value {
    match result {
        Ok(v) => serde_json::json!({ "output": v }),
        Err(e) => serde_json::json!({ "error": e }),
    }
}

/// A line diff of two JSON values, pretty-printed: changed lines with a
/// line of context around each run of them.
fn diff_json(want: &Value, got: &Value) -> Vec<String> {
    let (w, g) = (json_pretty(want), json_pretty(got));
    let (w, g): (Vec<&str>, Vec<&str>) = (w.lines().collect(), g.lines().collect());
    if w.len() > MAX_DIFF_LINES || g.len() > MAX_DIFF_LINES {
        let at = w.iter().zip(&g).take_while(|(a, b)| a == b).count();
        return vec![
            format!(
                "  (too long to diff whole; first difference at line {})",
                at + 1
            ),
            format!("- {}", w.get(at).unwrap_or(&"(end)")),
            format!("+ {}", g.get(at).unwrap_or(&"(end)")),
        ];
    }
    // Longest common subsequence, then a walk that prints it as a diff.
    let (n, m) = (w.len(), g.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if w[i] == g[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut lines: Vec<(char, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && w[i] == g[j] {
            lines.push((' ', w[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            lines.push(('+', g[j]));
            j += 1;
        } else {
            lines.push(('-', w[i]));
            i += 1;
        }
    }
    let near_change = |k: usize| {
        let lo = k.saturating_sub(1);
        let hi = (k + 1).min(lines.len() - 1);
        (lo..=hi).any(|x| lines[x].0 != ' ')
    };
    let mut out = Vec::new();
    let mut skipped = false;
    for (k, (mark, line)) in lines.iter().enumerate() {
        if near_change(k) {
            if skipped {
                out.push("  …".to_owned());
                skipped = false;
            }
            out.push(format!("{mark} {line}"));
        } else {
            skipped = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_diff_shows_the_changed_lines_with_context() {
        let want = serde_json::json!({"output": {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}});
        let got = serde_json::json!({"output": {"a": 1, "b": 2, "c": 30, "d": 4, "e": 5}});
        let diff = diff_json(&want, &got);
        assert!(diff.contains(&"-     \"c\": 3,".to_owned()), "{diff:#?}");
        assert!(diff.contains(&"+     \"c\": 30,".to_owned()), "{diff:#?}");
        assert!(diff.iter().any(|l| l.contains("\"b\": 2")), "{diff:#?}");
        assert!(!diff.iter().any(|l| l.contains("\"output\"")), "{diff:#?}");
        assert!(diff_json(&want, &want).is_empty());
    }

    #[test]
    fn a_minimal_fixture_reads_and_a_bad_one_says_what_is_wrong() {
        let f: Fixture = serde_json::from_str(
            r#"{"tool": "greet", "input": {"name": "Ada"}, "output": {"greeting": "Hello, Ada!"}}"#,
        )
        .unwrap();
        assert_eq!(f.longhand_fixture, FORMAT);
        assert!(f.http.is_empty() && f.grants.is_empty());
        let err = serde_json::from_str::<Fixture>(r#"{"tool": "greet", "outptu": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("outptu"), "{err}");
    }
}
