//! `sqlite`: the built-in SQLite tool through the path an agent calls it
//! by — `longhand tool call sqlite query|execute|schema` with a directory
//! granted at `/data`, the engine running inside the component. Each
//! known way around "read-only" and "one file" is a test here that shows
//! the engine refusing or bounding it, and after it the next call works
//! and the file holds what it held.
//!
//! The files are made and read back with the host's own rusqlite, never
//! through the tool under test.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tempfile::TempDir;

use crate::support::{Ended, Home};

/// Whether this build carries the `sqlite` built-in (a build without a C
/// compiler for wasm32 leaves it out, see host/hands/build.rs); a test
/// that cannot run says it was skipped, and fails instead under
/// `LONGHAND_REQUIRE_EXTERNAL=1`.
fn built() -> bool {
    if longhand_hands::builtin::builtin("sqlite").is_some() {
        return true;
    }
    if std::env::var("LONGHAND_REQUIRE_EXTERNAL").is_ok_and(|v| v == "1") {
        panic!(
            "LONGHAND_REQUIRE_EXTERNAL=1 but this build has no sqlite tool: install clang and wasi-libc"
        );
    }
    eprintln!(
        "skipped: this build has no sqlite tool (install clang and wasi-libc, then build again)"
    );
    false
}

/// A directory holding `app.db`, granted at `/data`.
struct Data {
    home: Home,
    dir: TempDir,
}

impl Data {
    fn new() -> Self {
        let dir = TempDir::new().expect("tempdir");
        let c = rusqlite::Connection::open(dir.path().join("app.db")).expect("create app.db");
        c.execute_batch(
            "CREATE TABLE t (
                 id INTEGER PRIMARY KEY,
                 name TEXT NOT NULL DEFAULT 'none',
                 score REAL,
                 payload BLOB
             );
             INSERT INTO t(name, score, payload) VALUES
                 ('ada', 1.5, x'0001ff'), ('bob', NULL, NULL), ('cy', -2.25, x'');
             CREATE UNIQUE INDEX t_name ON t(name);
             CREATE VIEW named AS SELECT id, upper(name) AS shout FROM t;",
        )
        .expect("fill app.db");
        Self {
            home: Home::new(),
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `sqlite <tool>` with the directory granted `mode` (`ro` or `rw`).
    fn call(&self, tool: &str, mode: &str, input: Value) -> Ended {
        let grant = format!("{}:/data:{mode}", self.dir.path().display());
        let input = input.to_string();
        self.home.run(&[
            "tool", "call", "sqlite", tool, "--dir", &grant, "--input", &input,
        ])
    }

    /// A call that succeeds: its output.
    #[track_caller]
    fn ok(&self, tool: &str, mode: &str, input: Value) -> Value {
        let out = self.call(tool, mode, input);
        out.expect_code(0);
        serde_json::from_str(&out.stdout_text()).expect("the output is JSON")
    }

    /// A call that fails with exit `code`: its error text.
    #[track_caller]
    fn refused(&self, tool: &str, mode: &str, input: Value, code: i32) -> String {
        let out = self.call(tool, mode, input);
        out.expect_code(code);
        out.stderr
    }

    fn query(&self, mode: &str, sql: &str) -> Ended {
        self.call("query", mode, json!({"db": "/data/app.db", "sql": sql}))
    }

    fn execute(&self, sql: &str) -> Ended {
        self.call("execute", "rw", json!({"db": "/data/app.db", "sql": sql}))
    }

    /// The rows of `t` by id, read by the host's SQLite.
    fn names(&self) -> Vec<String> {
        let c = rusqlite::Connection::open(self.path("app.db")).expect("open app.db");
        let mut s = c
            .prepare("SELECT name FROM t ORDER BY id")
            .expect("prepare");
        s.query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    }

    fn hash(&self) -> String {
        hex::encode(Sha256::digest(
            std::fs::read(self.path("app.db")).expect("read app.db"),
        ))
    }

    /// The directory's entries, sorted.
    fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The next call works, and the table holds its three rows.
    #[track_caller]
    fn still_works(&self) {
        let out = self.ok(
            "query",
            "ro",
            json!({"db": "/data/app.db", "sql": "SELECT name FROM t ORDER BY id"}),
        );
        assert_eq!(out["rows"], json!([["ada"], ["bob"], ["cy"]]), "{out}");
        assert_eq!(self.names(), ["ada", "bob", "cy"]);
    }
}

/// An error's text, and that it is invalid-input (exit 1).
#[track_caller]
fn invalid(out: &Ended) -> &str {
    out.expect_code(1);
    assert!(out.stderr.contains("invalid input"), "{}", out.stderr);
    &out.stderr
}

#[test]
fn query_binds_parameters_and_answers_in_the_sql_shape() {
    if !built() {
        return;
    }
    let d = Data::new();
    let out = d.ok(
        "query",
        "ro",
        json!({
            "db": "/data/app.db",
            "sql": "SELECT id, name, score, payload, ?1 AS i, ?2 AS r, ?3 AS s, ?4 AS n, ?5 AS b \
                    FROM t WHERE id <= ?1 ORDER BY id",
            "params": [2, 0.5, "é\"x", null, {"base64": "AAEC"}],
        }),
    );
    assert_eq!(
        out,
        json!({
            "columns": [
                {"name": "id", "type": "INTEGER"}, {"name": "name", "type": "TEXT"},
                {"name": "score", "type": "REAL"}, {"name": "payload", "type": "BLOB"},
                {"name": "i", "type": "integer"}, {"name": "r", "type": "real"},
                {"name": "s", "type": "text"}, {"name": "n", "type": ""},
                {"name": "b", "type": "blob"},
            ],
            "rows": [
                [1, "ada", 1.5, {"base64": "AAH/"}, 2, 0.5, "é\"x", null, {"base64": "AAEC"}],
                [2, "bob", null, null, 2, 0.5, "é\"x", null, {"base64": "AAEC"}],
            ],
        })
    );
    // `$1` binds like the postgres tool's placeholders; max_rows cuts and counts.
    let out = d.ok(
        "query",
        "ro",
        json!({"db": "/data/app.db", "sql": "SELECT name FROM t WHERE id >= $1 ORDER BY id",
               "params": [1], "max_rows": 1}),
    );
    assert_eq!(out["rows"], json!([["ada"]]));
    assert_eq!(out["truncated_rows"], 2);
    assert!(out.get("truncated_exact").is_none(), "{out}");
    // A parameter count that does not fit is named.
    let out = d.call(
        "query",
        "ro",
        json!({"db": "/data/app.db", "sql": "SELECT ?1, ?2", "params": [1]}),
    );
    assert!(invalid(&out).contains("parameter 2"), "{}", out.stderr);
}

#[test]
fn execute_inserts_and_the_journal_stays_in_the_grant() {
    if !built() {
        return;
    }
    let d = Data::new();
    let out = d.ok(
        "execute",
        "rw",
        json!({"db": "/data/app.db", "sql": "INSERT INTO t(name, payload) VALUES (?, ?)",
               "params": ["dee", {"base64": "/w=="}]}),
    );
    assert_eq!(out, json!({"changes": 1, "last_insert_rowid": 4}));
    let out = d.ok(
        "execute",
        "rw",
        json!({"db": "/data/app.db", "sql": "UPDATE t SET score = 0 WHERE score IS NULL OR score < 0"}),
    );
    assert_eq!(out["changes"], 3, "{out}");
    assert_eq!(d.names(), ["ada", "bob", "cy", "dee"]);
    let c = rusqlite::Connection::open(d.path("app.db")).unwrap();
    let payload: Vec<u8> = c
        .query_row("SELECT payload FROM t WHERE name = 'dee'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(payload, [0xff]);
    // The journal and the lock directory were made beside the file and
    // removed; nothing else was made.
    assert_eq!(d.listing(), ["app.db"]);
    // A new file is created in a read-write grant.
    let out = d.ok(
        "execute",
        "rw",
        json!({"db": "/data/new.db", "sql": "CREATE TABLE n(x)"}),
    );
    assert_eq!(out["changes"], 0, "{out}");
    assert_eq!(d.listing(), ["app.db", "new.db"]);
}

#[test]
fn schema_lists_tables_views_columns_and_indexes() {
    if !built() {
        return;
    }
    let d = Data::new();
    let out = d.ok("schema", "ro", json!({"db": "/data/app.db"}));
    assert_eq!(
        out,
        json!({"tables": [
            {"schema": "main", "name": "named", "kind": "view",
             "columns": [
                {"name": "id", "type": "INTEGER", "nullable": true},
                {"name": "shout", "type": "", "nullable": true}],
             "indexes": []},
            {"schema": "main", "name": "t", "kind": "table",
             "columns": [
                {"name": "id", "type": "INTEGER", "nullable": true},
                {"name": "name", "type": "TEXT", "nullable": false, "default": "'none'"},
                {"name": "score", "type": "REAL", "nullable": true},
                {"name": "payload", "type": "BLOB", "nullable": true}],
             "indexes": [{"name": "t_name", "columns": ["name"], "unique": true}]},
        ]})
    );
}

#[test]
fn a_missing_file_is_not_found_and_a_syntax_error_is_invalid_input() {
    if !built() {
        return;
    }
    let d = Data::new();
    let err = d.refused(
        "query",
        "ro",
        json!({"db": "/data/nope.db", "sql": "SELECT 1"}),
        1,
    );
    assert!(
        err.contains("not found") && err.contains("/data/nope.db"),
        "{err}"
    );
    let err = d.refused("schema", "ro", json!({"db": "/data/nope.db"}), 1);
    assert!(err.contains("not found"), "{err}");
    // Nothing was created by looking.
    assert_eq!(d.listing(), ["app.db"]);
    let out = d.query("ro", "SELEC name FROM t");
    assert!(invalid(&out).contains("syntax error"), "{}", out.stderr);
    let out = d.query("ro", "SELECT nope FROM t");
    assert!(invalid(&out).contains("no such column"), "{}", out.stderr);
    d.still_works();
}

#[test]
fn writes_in_disguise_are_refused_by_the_engine_in_query() {
    if !built() {
        return;
    }
    let d = Data::new();
    let before = d.hash();
    for sql in [
        "WITH x AS (SELECT 1) DELETE FROM t",
        "/* hi */ DELETE FROM t",
        "-- x\nDELETE FROM t",
        "wItH RECURSIVE x(i) AS (SELECT 1) UPDATE t SET name = 'z'",
        "VACUUM",
        "REINDEX",
    ] {
        // Even with the directory granted read-write.
        for mode in ["ro", "rw"] {
            let out = d.query(mode, sql);
            let err = invalid(&out);
            assert!(err.contains("use `execute`"), "{sql} ({mode}): {err}");
        }
    }
    assert_eq!(d.hash(), before);
    d.still_works();
}

#[test]
fn a_second_statement_is_refused_before_anything_runs() {
    if !built() {
        return;
    }
    let d = Data::new();
    let before = d.hash();
    for sql in [
        "SELECT 1; DROP TABLE t",
        "COMMIT; DROP TABLE t",
        "SELECT 1;\n/* c */ DELETE FROM t;",
    ] {
        // `COMMIT` is refused on its own (each call is its own
        // transaction) before the second statement is looked at.
        let err = invalid(&d.query("rw", sql)).to_owned();
        assert!(
            err.contains("one statement per call") || err.contains("transaction statements"),
            "{sql}: {err}"
        );
        let err = invalid(&d.execute(sql)).to_owned();
        assert!(
            err.contains("one statement per call") || err.contains("transaction statements"),
            "{sql}: {err}"
        );
    }
    assert_eq!(d.hash(), before);
    // Blanks and comments after the one statement are no second one.
    let out = d.ok(
        "query",
        "ro",
        json!({"db": "/data/app.db", "sql": "SELECT count(*) FROM t; -- all\n  "}),
    );
    assert_eq!(out["rows"], json!([[3]]));
    d.still_works();
}

#[test]
fn attach_is_refused_in_query_and_execute_inside_and_outside_the_grant() {
    if !built() {
        return;
    }
    let d = Data::new();
    let outside = TempDir::new().unwrap();
    let foreign = outside.path().join("secret.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE s(x); INSERT INTO s VALUES ('secret')")
        .unwrap();
    let targets = [
        "/data/other.db".to_owned(),
        foreign.display().to_string(),
        ":memory:".to_owned(),
    ];
    for target in &targets {
        let sql = format!("ATTACH '{target}' AS o");
        let err = invalid(&d.query("rw", &sql)).to_owned();
        assert!(err.contains("ATTACH"), "{err}");
        let err = invalid(&d.execute(&sql)).to_owned();
        assert!(err.contains("ATTACH"), "{err}");
        // Nor by the function form, inside another statement.
        let err = invalid(&d.execute(&format!(
            "INSERT INTO t(name) SELECT sqlite_attach('{target}', 'o')"
        )))
        .to_owned();
        assert!(
            err.contains("no such function") || err.contains("not"),
            "{err}"
        );
    }
    assert_eq!(d.listing(), ["app.db"], "ATTACH created no file");
    d.still_works();
}

#[test]
fn vacuum_into_is_refused_and_writes_no_copy() {
    if !built() {
        return;
    }
    let d = Data::new();
    let before = d.hash();
    for sql in [
        "VACUUM INTO '/data/copy.db'",
        "VACUUM main INTO '/data/copy.db'",
        "VACUUM",
    ] {
        let err = invalid(&d.execute(sql)).to_owned();
        assert!(
            err.contains("ATTACH") && err.contains("VACUUM"),
            "{sql}: {err}"
        );
        let err = invalid(&d.query("rw", sql)).to_owned();
        assert!(err.contains("use `execute`"), "{sql}: {err}");
    }
    assert_eq!(d.listing(), ["app.db"]);
    assert_eq!(d.hash(), before);
    d.still_works();
}

#[test]
fn pragmas_may_read_but_not_write() {
    if !built() {
        return;
    }
    let d = Data::new();
    let before = d.hash();
    for sql in [
        "PRAGMA writable_schema=1",
        "PRAGMA writable_schema",
        "PRAGMA journal_mode=WAL",
        "PRAGMA journal_mode=OFF",
        "PRAGMA user_version=7",
        "PRAGMA foreign_keys=OFF",
        "PRAGMA temp_store_directory='/data'",
        "PRAGMA trusted_schema=1",
        "PRAGMA query_only=0",
    ] {
        let err = invalid(&d.execute(sql)).to_owned();
        assert!(err.contains("PRAGMA"), "{sql}: {err}");
        let err = invalid(&d.query("rw", sql)).to_owned();
        assert!(err.contains("PRAGMA"), "{sql}: {err}");
    }
    assert_eq!(d.hash(), before);
    let out = d.ok(
        "query",
        "ro",
        json!({"db": "/data/app.db", "sql": "PRAGMA user_version"}),
    );
    assert_eq!(out["rows"], json!([[0]]));
    let out = d.ok(
        "query",
        "ro",
        json!({"db": "/data/app.db", "sql": "PRAGMA table_info(t)"}),
    );
    assert_eq!(out["rows"].as_array().map(Vec::len), Some(4), "{out}");
    d.still_works();
}

#[test]
fn load_extension_is_not_there() {
    if !built() {
        return;
    }
    let d = Data::new();
    for sql in [
        "SELECT load_extension('/data/evil.so')",
        "SELECT load_extension('/data/evil.so', 'entry')",
    ] {
        let err = invalid(&d.query("ro", sql)).to_owned();
        assert!(err.contains("load_extension"), "{sql}: {err}");
        let err = invalid(&d.execute(sql)).to_owned();
        assert!(err.contains("load_extension"), "{sql}: {err}");
    }
    d.still_works();
}

#[test]
fn a_huge_result_comes_back_bounded_and_quickly() {
    if !built() {
        return;
    }
    let d = Data::new();
    let started = Instant::now();
    let out = d.call(
        "query",
        "ro",
        json!({"db": "/data/app.db",
               "sql": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) \
                       SELECT i, randomblob(1000) FROM r"}),
    );
    let took = started.elapsed();
    out.expect_code(0);
    let text = out.stdout_text();
    assert!(text.len() < 1 << 20, "{} bytes", text.len());
    let v: Value = serde_json::from_str(&text).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 200);
    assert_eq!(rows[199][0], 200);
    assert!(rows[0][1]["base64"].as_str().unwrap().len() > 1300);
    assert!(
        v["truncated_rows"].as_u64().unwrap() > 1000,
        "{}",
        v["truncated_rows"]
    );
    assert_eq!(v["truncated_exact"], false);
    assert!(took < Duration::from_secs(15), "{took:?}");

    // The byte cap holds with the most rows asked for: 10 000 rows of
    // 1000 bytes would be 13 MB of base64.
    let v = d.ok(
        "query",
        "ro",
        json!({"db": "/data/app.db", "max_rows": 10000,
               "sql": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r LIMIT 20000) \
                       SELECT i, randomblob(1000) FROM r"}),
    );
    let kept = v["rows"].as_array().unwrap().len() as u64;
    assert!((400..1000).contains(&kept), "{kept} rows kept");
    assert_eq!(
        v["truncated_rows"].as_u64().unwrap() + kept,
        20000,
        "counted exactly"
    );
    assert!(
        v.get("truncated_exact").is_none(),
        "{}",
        v["truncated_exact"]
    );

    // One huge value is cut with a marker saying how long it was.
    let v = d.ok(
        "query",
        "ro",
        json!({"db": "/data/app.db",
               "sql": "SELECT replace(hex(zeroblob(50000)), '0', 'x') AS t, zeroblob(100000) AS b"}),
    );
    let t = v["rows"][0][0].as_str().unwrap();
    assert!(t.starts_with(&"x".repeat(16 << 10)), "cut at 16 KiB");
    assert!(
        t.ends_with("[cut: 100000 bytes in all; read the rest with substr()]"),
        "{t:.100}"
    );
    assert!(
        v["rows"][0][1]
            .as_str()
            .unwrap()
            .contains("blob of 100000 bytes"),
        "{}",
        v["rows"][0][1]
    );
    d.still_works();
}

#[test]
fn a_runaway_query_stops_at_its_time_limit() {
    if !built() {
        return;
    }
    let d = Data::new();
    let started = Instant::now();
    let err = d.refused(
        "query",
        "ro",
        json!({"db": "/data/app.db", "timeout": "1s",
               "sql": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) \
                       SELECT count(*) FROM r"}),
        1,
    );
    let took = started.elapsed();
    assert!(
        err.contains("failed") && err.contains("time limit"),
        "{err}"
    );
    assert!(err.contains("narrow"), "{err}");
    // One second of SQL, plus starting the process (the component is
    // compiled already).
    assert!(took < Duration::from_secs(6), "{took:?}");
    // A runaway write is stopped too, and rolled back.
    let err = d.refused(
        "execute",
        "rw",
        json!({"db": "/data/app.db", "timeout": "1s",
               "sql": "INSERT INTO t(name) WITH RECURSIVE r(i) AS \
                       (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT 'n' || i FROM r"}),
        1,
    );
    assert!(err.contains("time limit"), "{err}");
    assert_eq!(d.listing(), ["app.db"], "no journal or lock left behind");
    d.still_works();
}

#[test]
fn a_write_the_host_stopped_is_rolled_back_and_its_lock_cleared() {
    if !built() {
        return;
    }
    let d = Data::new();
    let before = d.hash();
    let grant = format!("{}:/data:rw", d.dir.path().display());
    let input = json!({"db": "/data/app.db",
        "sql": "INSERT INTO t(name) WITH RECURSIVE r(i) AS \
                (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT 'n' || i || zeroblob(100) FROM r"})
    .to_string();
    // Fuel for about a tenth of a second of SQLite: the host traps the
    // guest in the middle of the write, with no chance to clean up.
    let out = d.home.run(&[
        "tool",
        "call",
        "sqlite",
        "execute",
        "--dir",
        &grant,
        "--fuel",
        "1500000000",
        "--input",
        &input,
    ]);
    out.expect_code(3);
    assert!(out.stderr.contains("fuel"), "{}", out.stderr);
    let left = d.listing();
    assert!(left.contains(&"app.db.lock".to_owned()), "{left:?}");
    // A fresh lock is another writer's as far as anyone can tell.
    let out = d.execute("INSERT INTO t(name) VALUES ('dee')");
    out.expect_code(1);
    assert!(out.stderr.contains("locked"), "{}", out.stderr);
    // A minute later it is known to be stale: the next write clears it,
    // SQLite rolls the stopped write back from its journal, and the new
    // row goes in.
    let aged = std::time::SystemTime::now() - Duration::from_secs(120);
    std::fs::File::open(d.path("app.db.lock"))
        .and_then(|f| f.set_modified(aged))
        .expect("age the lock");
    let out = d.ok(
        "execute",
        "rw",
        json!({"db": "/data/app.db", "sql": "DELETE FROM t WHERE name = 'nobody'"}),
    );
    assert_eq!(out["changes"], 0, "{out}");
    assert_eq!(d.listing(), ["app.db"]);
    assert_eq!(d.hash(), before, "the stopped write left nothing");
    d.still_works();
}

#[test]
fn execute_on_a_read_only_grant_is_access_denied_and_changes_nothing() {
    if !built() {
        return;
    }
    let d = Data::new();
    let before = d.hash();
    for sql in ["DELETE FROM t", "CREATE TABLE u(x)", "SELECT 1"] {
        let err = d.refused(
            "execute",
            "ro",
            json!({"db": "/data/app.db", "sql": sql}),
            3,
        );
        assert!(err.contains("access denied to /data/app.db"), "{err}");
        assert!(err.contains("read-only"), "{err}");
    }
    // Nor can it create a file there.
    let err = d.refused(
        "execute",
        "ro",
        json!({"db": "/data/made.db", "sql": "CREATE TABLE u(x)"}),
        3,
    );
    assert!(err.contains("access denied"), "{err}");
    assert_eq!(d.hash(), before);
    assert_eq!(d.listing(), ["app.db"]);
    // A path outside every grant is simply not there.
    let err = d.refused(
        "query",
        "ro",
        json!({"db": "/etc/app.db", "sql": "SELECT 1"}),
        1,
    );
    assert!(err.contains("not found"), "{err}");
    d.still_works();
}

#[test]
fn a_hostile_files_views_and_triggers_cannot_call_unsafe_functions() {
    if !built() {
        return;
    }
    let d = Data::new();
    let c = rusqlite::Connection::open(d.path("app.db")).unwrap();
    // sqlite_log() has a side effect outside the database (the error
    // log): the file's own code may never call it. The pragma table
    // functions are not marked innocuous: with trusted_schema off, a view
    // may not use them either (a query may, by its own text).
    c.execute_batch(
        "CREATE VIEW evil AS SELECT name, sqlite_log(1, 'from a view') AS l FROM t;
         CREATE VIEW peek AS SELECT * FROM pragma_database_list;
         CREATE TABLE audit(x);
         CREATE TRIGGER spy AFTER INSERT ON audit BEGIN
             SELECT sqlite_log(1, 'from a trigger');
         END;",
    )
    .unwrap();
    drop(c);
    let before = d.hash();
    let err = invalid(&d.query("ro", "SELECT * FROM evil")).to_owned();
    assert!(err.contains("unsafe use of sqlite_log()"), "{err}");
    let err = invalid(&d.execute("INSERT INTO audit VALUES (1)")).to_owned();
    assert!(err.contains("unsafe use of sqlite_log()"), "{err}");
    assert_eq!(d.hash(), before, "the insert was not made");
    let err = invalid(&d.query("ro", "SELECT * FROM peek")).to_owned();
    assert!(err.contains("unsafe use of virtual table"), "{err}");
    let out = d.ok(
        "query",
        "ro",
        json!({"db": "/data/app.db", "sql": "SELECT name, file FROM pragma_database_list"}),
    );
    assert_eq!(out["rows"], json!([["main", "/data/app.db"]]), "{out}");
    // The view is still listed by `schema`, without columns.
    let out = d.ok("schema", "ro", json!({"db": "/data/app.db"}));
    let evil = out["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "evil")
        .expect("evil is listed");
    assert_eq!(evil["kind"], "view");
    d.still_works();
}

#[test]
fn a_wal_mode_file_is_refused_saying_why() {
    if !built() {
        return;
    }
    let d = Data::new();
    let c = rusqlite::Connection::open(d.path("wal.db")).unwrap();
    c.pragma_update(None, "journal_mode", "wal").unwrap();
    c.execute_batch("CREATE TABLE w(x); INSERT INTO w VALUES (1)")
        .unwrap();
    drop(c);
    let wal = || hex::encode(Sha256::digest(std::fs::read(d.path("wal.db")).unwrap()));
    let before = wal();
    let out = d.call(
        "query",
        "ro",
        json!({"db": "/data/wal.db", "sql": "SELECT x FROM w"}),
    );
    assert!(invalid(&out).contains("WAL mode"), "{}", out.stderr);
    let out = d.call(
        "execute",
        "rw",
        json!({"db": "/data/wal.db", "sql": "INSERT INTO w VALUES (2)"}),
    );
    assert!(invalid(&out).contains("WAL mode"), "{}", out.stderr);
    assert_eq!(wal(), before);
    assert_eq!(d.listing(), ["app.db", "wal.db"]);
    d.still_works();
}

#[test]
fn a_non_database_file_is_invalid_input() {
    if !built() {
        return;
    }
    let d = Data::new();
    std::fs::write(
        d.path("notes.db"),
        "plain text, not a database ".repeat(100),
    )
    .unwrap();
    let out = d.call(
        "query",
        "ro",
        json!({"db": "/data/notes.db", "sql": "SELECT 1 FROM sqlite_schema"}),
    );
    assert!(
        invalid(&out).contains("not a SQLite database"),
        "{}",
        out.stderr
    );
    d.still_works();
}

/// `examples/sales-db` as its README says, `longhand run
/// examples/sales-db`: the model's turns replayed from the cassette, the
/// schema and the queries run by the sqlite tool over `data/sales.db`
/// (the replay fails if any tool result differs from the recording). The
/// figures in the answer are checked against the same sums done here
/// from the raw tables, with the host's SQLite and Rust arithmetic.
#[test]
fn the_sales_db_example_answers_from_its_file() {
    if !built() {
        return;
    }
    use std::collections::BTreeMap;

    let home = Home::new();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/sales-db");
    let example = std::fs::canonicalize(&example).expect("examples/sales-db exists");
    let mut cmd = home.cmd(&["run", example.to_str().expect("utf-8 path")]);
    cmd.current_dir(home.path());
    let mut proc = crate::support::Proc::spawn(cmd);
    let guard = crate::example::RunDirGuard {
        out: example.join("out"),
        pid: proc.pid(),
    };
    let run = proc.finish();
    run.expect_code(0);
    assert!(
        run.stdout.iter().any(|l| l.starts_with("finished: ")),
        "{:?}",
        run.stdout
    );

    // The answer, from the raw tables: revenue in cents after discount,
    // per order, summed by region for July to September; units by product.
    let c = rusqlite::Connection::open_with_flags(
        example.join("data/sales.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut s = c
        .prepare(
            "SELECT o.day, r.name, p.name, o.units, p.unit_price_cents, o.discount_pct \
             FROM orders o, regions r, products p \
             WHERE r.id = o.region_id AND p.id = o.product_id",
        )
        .unwrap();
    let mut q3: BTreeMap<String, i64> = BTreeMap::new();
    let mut units: BTreeMap<String, i64> = BTreeMap::new();
    let rows = s
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (day, region, product, n, price, discount) = row.unwrap();
        *units.entry(product).or_default() += n;
        if ("2026-07-01".."2026-10-01").contains(&day.as_str()) {
            *q3.entry(region).or_default() += n * price * (100 - discount) / 100;
        }
    }
    let mut ranked: Vec<(String, i64)> = q3.into_iter().collect();
    ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
    let (top, sold) = units.iter().max_by_key(|(_, n)| **n).unwrap();
    let grouped = |whole: i64| {
        let digits = whole.to_string();
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(ch);
        }
        out
    };
    let money = |cents: i64| format!("{}.{:02}", grouped(cents / 100), cents % 100);

    let dirs = guard.dirs();
    assert_eq!(dirs.len(), 1, "one run directory: {dirs:?}");
    let answer = std::fs::read_to_string(dirs[0].join("answer.md")).expect("the answer");
    let lead = format!(
        "**{}** had the highest revenue from July to September: {}, ahead of {} ({}) by {}.",
        ranked[0].0,
        money(ranked[0].1),
        ranked[1].0,
        money(ranked[1].1),
        money(ranked[0].1 - ranked[1].1)
    );
    assert!(answer.contains(&lead), "expected {lead:?} in:\n{answer}");
    assert!(
        answer.contains(&format!("**{top}** ({} units)", grouped(*sold))),
        "{answer}"
    );
    for (region, revenue) in &ranked {
        assert!(
            answer.contains(&format!("| {region} | {} |", money(*revenue))),
            "{region}: {answer}"
        );
    }
}
