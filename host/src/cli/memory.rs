//! `longhand memory list | search | show | forget`: the memory bank
//! (`<data dir>/memory.db`) for the operator.
//!
//! Entry text was written by a model or a person: it reaches the terminal
//! only through [`one_line`] / [`printable`], and `--json` through
//! [`json_line`].

use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context;
use clap::Subcommand;

use super::settings::data_dir;
use super::term::{json_line, one_line, printable};
use super::{Outcome, usage};
use longhand_brain::memory::{self, Memory, MemoryBank, MemoryError};

/// `longhand memory` subcommands.
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// List current entries (neither superseded nor forgotten), newest first.
    List {
        #[command(flatten)]
        scopes: ScopeFlags,
        /// At most this many entries (default 50, at most 1000).
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// One JSON object per entry.
        #[arg(long)]
        json: bool,
    },
    /// Search current entries by their words, best match first.
    Search {
        /// Words to look for; an entry matching any of them is found.
        query: String,
        #[command(flatten)]
        scopes: ScopeFlags,
        /// At most this many entries (default 10, at most 1000).
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// One JSON object per entry.
        #[arg(long)]
        json: bool,
    },
    /// Show one entry, superseded and forgotten ones too, with the sessions
    /// that used it.
    Show {
        /// The entry id (m-…).
        id: String,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Erase an entry's text and tags, keeping a tombstone (id, scope,
    /// source, links, the sessions that used it).
    Forget {
        /// The entry id (m-…).
        id: String,
    },
}

/// `--scope`, repeatable.
#[derive(Debug, clap::Args)]
pub struct ScopeFlags {
    /// Only this scope (e.g. project:foo); repeat for several. Default: all.
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<String>,
}

/// Runs a `longhand memory` command.
pub fn run(cmd: MemoryCommand) -> anyhow::Result<Outcome> {
    let bank = open_bank()?;
    let mut out = std::io::stdout().lock();
    match cmd {
        MemoryCommand::List {
            scopes,
            limit,
            json,
        } => {
            let found = bank.list(&scopes.resolve(&bank)?, limit).map_err(refused)?;
            print_entries(&mut out, &found, json)?;
            if found.is_empty() && !json {
                writeln!(out, "no memories; agents write them with memory__remember")?;
            }
        }
        MemoryCommand::Search {
            query,
            scopes,
            limit,
            json,
        } => {
            if !query.chars().any(char::is_alphanumeric) {
                return Err(usage(
                    "the query has no word to search for; give one or more words",
                ));
            }
            let found = bank
                .search(&query, &scopes.resolve(&bank)?, limit)
                .map_err(refused)?;
            print_entries(&mut out, &found, json)?;
            if found.is_empty() && !json {
                writeln!(
                    out,
                    "no memory matches; `longhand memory list` shows them all"
                )?;
            }
        }
        MemoryCommand::Show { id, json } => {
            let memory = get(&bank, &id)?;
            if json {
                writeln!(out, "{}", json_line(&memory))?;
            } else {
                write!(out, "{}", describe(&memory))?;
            }
        }
        MemoryCommand::Forget { id } => {
            let memory = get(&bank, &id)?;
            if bank.forget(&memory.id).map_err(refused)? {
                writeln!(
                    out,
                    "forgot {id}: its text and tags are erased; the tombstone stays \
                     (`longhand memory show {id}`)"
                )?;
            } else {
                writeln!(out, "{id} was already forgotten")?;
            }
        }
    }
    Ok(Outcome::Done)
}

fn open_bank() -> anyhow::Result<MemoryBank> {
    let dir = data_dir().ok_or_else(|| {
        usage("cannot find a data directory: set LONGHAND_HOME (or HOME / XDG_DATA_HOME)")
    })?;
    let path = memory::default_path(&dir);
    MemoryBank::open(&path).with_context(|| format!("opening the memory bank {}", path.display()))
}

impl ScopeFlags {
    /// The scopes named, checked; every scope in the bank when none is.
    fn resolve(&self, bank: &MemoryBank) -> anyhow::Result<Vec<String>> {
        if self.scopes.is_empty() {
            return Ok(bank.scopes()?);
        }
        for scope in &self.scopes {
            memory::validate_scope(scope).map_err(refused)?;
        }
        Ok(self.scopes.clone())
    }
}

/// The entry `id`, or a usage error that says how to find ids.
fn get(bank: &MemoryBank, id: &str) -> anyhow::Result<Memory> {
    bank.get(id)?.ok_or_else(|| {
        usage(format!(
            "no memory has id {}; `longhand memory list` (or `search`) shows the ids",
            one_line(id)
        ))
    })
}

/// A refusal of what the operator gave is a usage error; anything else
/// (the file, SQLite) stays what it is.
fn refused(error: MemoryError) -> anyhow::Error {
    match error {
        MemoryError::Invalid { .. } | MemoryError::NotFound { .. } => usage(error),
        other => other.into(),
    }
}

/// Longest first line shown in a listing, in characters.
const PREVIEW_CHARS: usize = 80;

fn print_entries(out: &mut impl Write, found: &[Memory], json: bool) -> anyhow::Result<()> {
    if json {
        for memory in found {
            writeln!(out, "{}", json_line(memory))?;
        }
        return Ok(());
    }
    let tags: Vec<String> = found.iter().map(|m| tag_list(m, ",")).collect();
    let scope_width = found.iter().map(|m| m.scope.len()).max().unwrap_or(0);
    let tag_width = tags.iter().map(String::len).max().unwrap_or(0);
    for (memory, tags) in found.iter().zip(&tags) {
        writeln!(
            out,
            "{}  {:<scope_width$}  {:<tag_width$}  {}",
            memory.id,
            one_line(&memory.scope),
            one_line(tags),
            one_line(&preview(&memory.text)),
        )?;
    }
    Ok(())
}

fn tag_list(memory: &Memory, separator: &str) -> String {
    if memory.tags.is_empty() {
        "-".to_owned()
    } else {
        memory.tags.join(separator)
    }
}

/// The first non-blank line of `text`, cut to [`PREVIEW_CHARS`]; `…` marks
/// a cut or more lines.
fn preview(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    let mut shown: String = first.chars().take(PREVIEW_CHARS).collect();
    if shown.len() < first.len() || lines.next().is_some() {
        shown.push('…');
    }
    shown
}

fn time(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// `show`'s human form: fields, the sessions that used it, then the text.
fn describe(m: &Memory) -> String {
    let mut s = String::new();
    let state = match (&m.forgotten_ms, &m.superseded_by) {
        (Some(at), _) => format!("forgotten {}", time(*at)),
        (None, Some(by)) => format!("superseded by {by}"),
        (None, None) => "current".to_owned(),
    };
    let mut line = |key: &str, value: &str| s.push_str(&format!("{key:<11} {value}\n"));
    line("id", &m.id);
    line("state", &state);
    line("scope", &one_line(&m.scope));
    line("tags", &one_line(&tag_list(m, ", ")));
    if let Some(source) = &m.source {
        let session = one_line(&source.session);
        line("source", &format!("{session} event {}", source.seq));
    }
    line("created", &time(m.created_ms));
    line("updated", &time(m.updated_ms));
    if let Some(old) = &m.supersedes {
        line("supersedes", &one_line(old));
    }
    line(
        "uses",
        &format!("{} (last {} sessions kept)", m.uses, m.used_by.len()),
    );
    for u in &m.used_by {
        let session = one_line(&u.session);
        s.push_str(&format!(
            "  {session}  {}x  last {}\n",
            u.count,
            time(u.last_ms)
        ));
    }
    if m.forgotten_ms.is_none() {
        s.push('\n');
        s.push_str(&printable(&m.text));
        if !m.text.ends_with('\n') {
            s.push('\n');
        }
    }
    s
}
