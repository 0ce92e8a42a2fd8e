//! `longhand memory list | search | show | forget` against a bank seeded
//! through the library at `<LONGHAND_HOME>/memory.db`, the file the binary
//! opens. No component runs here, so the homes are plain temporary
//! directories (no compile cache to warm).

use std::path::Path;

use longhand_brain::memory::{self, Memory, MemoryBank, NewMemory};
use serde_json::Value;
use tempfile::TempDir;

use crate::support::{Ended, command, run};

fn longhand(home: &Path, args: &[&str]) -> Ended {
    run(command(home, args))
}

fn bank(home: &Path) -> MemoryBank {
    MemoryBank::open(&memory::default_path(home)).expect("open the bank")
}

fn remember(bank: &MemoryBank, scope: &str, text: &str, tags: &[&str]) -> Memory {
    bank.remember(NewMemory {
        scope: scope.into(),
        text: text.into(),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        ..NewMemory::default()
    })
    .expect("remember")
}

fn ids(values: &[Value]) -> Vec<&str> {
    values.iter().map(|v| v["id"].as_str().unwrap()).collect()
}

#[test]
fn list_search_show_forget() {
    let home = TempDir::new().unwrap();
    let bank = bank(home.path());
    let deploy = remember(
        &bank,
        "project:shop",
        "Deploys need AWS_REGION=eu-west-1\nsecond line",
        &["deploy", "aws"],
    );
    let tests = remember(&bank, "project:shop", "Run tests with --offline", &[]);
    let alice = remember(&bank, "user:alice", "Alice wants short deploy notes", &[]);

    // Human listing: newest first, id, scope, tags, first line, aligned.
    let out = longhand(home.path(), &["memory", "list"]);
    out.expect_code(0);
    assert_eq!(out.stdout.len(), 3, "{}", out.stdout_text());
    assert!(out.stdout[0].starts_with(&alice.id));
    let last = &out.stdout[2];
    assert!(last.starts_with(&format!("{}  project:shop  deploy,aws  Deploys", deploy.id)));
    assert!(last.ends_with("eu-west-1…"), "{last}");
    // Columns line up: every line has its text at the same offset.
    let at = |line: &str, word: &str| line.find(word).unwrap();
    assert_eq!(at(&out.stdout[0], "Alice"), at(last, "Deploys"));
    assert_eq!(at(&out.stdout[1], "Run"), at(last, "Deploys"));

    // JSON listing, one object per line, filtered by scope.
    let out = longhand(
        home.path(),
        &["memory", "list", "--scope", "project:shop", "--json"],
    );
    out.expect_code(0);
    let listed = out.json_lines();
    assert_eq!(ids(&listed), [tests.id.as_str(), deploy.id.as_str()]);
    assert_eq!(listed[1]["tags"], serde_json::json!(["deploy", "aws"]));
    assert_eq!(listed[1]["text"], deploy.text.as_str());

    let out = longhand(home.path(), &["memory", "list", "--limit", "1", "--json"]);
    assert_eq!(ids(&out.json_lines()), [alice.id.as_str()]);

    // Search ranks; a scope filter narrows it.
    let out = longhand(
        home.path(),
        &["memory", "search", "deploy region", "--json"],
    );
    out.expect_code(0);
    let found = out.json_lines();
    assert_eq!(ids(&found), [deploy.id.as_str(), alice.id.as_str()]);
    let out = longhand(
        home.path(),
        &[
            "memory",
            "search",
            "deploy",
            "--scope",
            "user:alice",
            "--json",
        ],
    );
    assert_eq!(ids(&out.json_lines()), [alice.id.as_str()]);
    let out = longhand(home.path(), &["memory", "search", "NEAR(\"x\" col:y"]);
    out.expect_code(0);
    assert!(out.stdout_text().contains("no memory matches"));

    // Show: one object, or the fields and the whole text.
    let out = longhand(home.path(), &["memory", "show", &deploy.id, "--json"]);
    out.expect_code(0);
    assert_eq!(out.stdout.len(), 1);
    let shown: Memory = serde_json::from_str(&out.stdout[0]).unwrap();
    assert_eq!(shown, deploy);
    let out = longhand(home.path(), &["memory", "show", &deploy.id]);
    out.expect_code(0);
    let text = out.stdout_text();
    assert!(text.contains("scope       project:shop"), "{text}");
    assert!(text.contains("state       current"), "{text}");
    assert!(text.ends_with("Deploys need AWS_REGION=eu-west-1\nsecond line"));

    // Forget: gone from search and list, a tombstone for show.
    bank.mark_used(std::slice::from_ref(&deploy.id), "s-01")
        .unwrap();
    let out = longhand(home.path(), &["memory", "forget", &deploy.id]);
    out.expect_code(0);
    assert!(
        out.stdout_text()
            .starts_with(&format!("forgot {}", deploy.id))
    );
    let out = longhand(home.path(), &["memory", "search", "region", "--json"]);
    assert!(out.json_lines().is_empty());
    let out = longhand(home.path(), &["memory", "list", "--json"]);
    assert_eq!(
        ids(&out.json_lines()),
        [alice.id.as_str(), tests.id.as_str()]
    );
    let out = longhand(home.path(), &["memory", "show", &deploy.id]);
    out.expect_code(0);
    let text = out.stdout_text();
    assert!(text.contains("state       forgotten"), "{text}");
    assert!(text.contains("  s-01  1x  last "), "{text}");
    assert!(!text.contains("AWS_REGION"), "{text}");
    let out = longhand(home.path(), &["memory", "forget", &deploy.id]);
    out.expect_code(0);
    assert!(out.stdout_text().contains("already forgotten"));
}

#[test]
fn superseded_entries_leave_the_listing_but_show() {
    let home = TempDir::new().unwrap();
    let bank = bank(home.path());
    let old = remember(&bank, "agent:audit", "the API is on port 8080", &[]);
    let new = bank
        .remember(NewMemory {
            scope: "agent:audit".into(),
            text: "the API moved to port 9090".into(),
            supersedes: Some(old.id.clone()),
            ..NewMemory::default()
        })
        .unwrap();
    let out = longhand(home.path(), &["memory", "search", "port", "--json"]);
    assert_eq!(ids(&out.json_lines()), [new.id.as_str()]);
    let out = longhand(home.path(), &["memory", "list", "--json"]);
    assert_eq!(ids(&out.json_lines()), [new.id.as_str()]);
    let out = longhand(home.path(), &["memory", "show", &old.id]);
    out.expect_code(0);
    let text = out.stdout_text();
    assert!(
        text.contains(&format!("superseded by {}", new.id)),
        "{text}"
    );
    assert!(text.contains("port 8080"), "{text}");
    let out = longhand(home.path(), &["memory", "show", &new.id, "--json"]);
    assert_eq!(out.json_lines()[0]["supersedes"], old.id.as_str());
}

#[test]
fn unknown_ids_and_bad_flags_are_usage_errors() {
    let home = TempDir::new().unwrap();
    remember(&bank(home.path()), "p", "something", &[]);
    for args in [
        &["memory", "show", "m-01NOSUCHID"][..],
        &["memory", "forget", "m-01NOSUCHID"],
        &["memory", "show", "\u{1b}[2J"],
        &["memory", "list", "--scope", "not a scope"],
        &["memory", "search", "*"],
    ] {
        let out = longhand(home.path(), args);
        out.expect_code(2);
        assert!(!out.stderr.contains('\u{1b}'), "{:?}", out.stderr);
    }
    let out = longhand(home.path(), &["memory", "show", "m-01NOSUCHID"]);
    assert!(
        out.stderr.contains("`longhand memory list`"),
        "{}",
        out.stderr
    );
    // Nothing was forgotten by the failed calls.
    let out = longhand(home.path(), &["memory", "list", "--json"]);
    assert_eq!(out.json_lines().len(), 1);
}

#[test]
fn entry_text_cannot_drive_the_terminal() {
    let home = TempDir::new().unwrap();
    let hostile = "\u{1b}]0;pwned\u{7}\u{9b}31m\u{202e}txt\nforged line";
    let entry = remember(&bank(home.path()), "p", hostile, &[]);
    for args in [
        &["memory", "list"][..],
        &["memory", "search", "pwned"],
        &["memory", "show", &entry.id],
    ] {
        let out = longhand(home.path(), args);
        out.expect_code(0);
        let text = out.stdout_text();
        for c in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(c), "{args:?} printed {c:?}: {text}");
        }
        assert!(text.contains("\\x1b]0;pwned"), "{args:?}: {text}");
    }
    // Listings show one line per entry; JSON keeps the exact text.
    let out = longhand(home.path(), &["memory", "list"]);
    assert_eq!(out.stdout.len(), 1);
    let out = longhand(home.path(), &["memory", "list", "--json"]);
    let listed = out.json_lines();
    assert_eq!(listed[0]["text"], hostile);
    assert!(!out.stdout_text().contains('\u{9b}'));
}
