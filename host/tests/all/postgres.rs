//! The built-in `postgres` tool against a real PostgreSQL server, through
//! the binary: `longhand tool call postgres … --database app=VAR` and an
//! agent with `databases = [...]`.
//!
//! The known ways read-only database tools have been broken — a CTE
//! delete, a comment before a write, two statements, `COMMIT; DROP`,
//! `SET TRANSACTION READ WRITE`, side effects called from a SELECT,
//! `COPY … TO PROGRAM`, a huge result, a query that never ends — are each
//! refused or bounded by the server's own rules, and the next call works.
//! The role's password is a canary: it appears in nothing Longhand prints.
//!
//! Needs `LONGHAND_TEST_PG_AGENT` and `LONGHAND_TEST_PG_SUPER` (see
//! `.ci/setup-postgres.sh`); without them each test says it was skipped,
//! and fails instead under `LONGHAND_REQUIRE_EXTERNAL=1`.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use longhand_session::Event;

use crate::support::{Ended, Home, blob, block_on, call, of_kind, text_turn, tool_turn, write};

/// The agent role's password (`.ci/setup-postgres.sh`).
const CANARY: &str = "pw-canary-7Qz3Lm9Xv2";
/// The superuser's password.
const SUPER_CANARY: &str = "su-canary-4Hk8Rt1Wd6";

/// An environment variable, or `None` after saying the test is skipped.
fn external(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => Some(v),
        _ if std::env::var("LONGHAND_REQUIRE_EXTERNAL").is_ok_and(|v| v == "1") => panic!(
            "LONGHAND_REQUIRE_EXTERNAL=1 but {var} is not set: run \
             `eval \"$(.ci/setup-postgres.sh)\"` first"
        ),
        _ => {
            eprintln!("skipped: set {var} (eval \"$(.ci/setup-postgres.sh)\")");
            None
        }
    }
}

/// Run `sql` (simple protocol, several statements) as the role of `url`.
fn admin(url: &str, sql: &str) {
    block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect as the test role");
        let task = tokio::spawn(conn);
        client.batch_execute(sql).await.expect(sql);
        drop(client);
        let _ = task.await;
    });
}

/// One value of `sql` as the role of `url`.
fn scalar(url: &str, sql: &str) -> i64 {
    block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect as the test role");
        let task = tokio::spawn(conn);
        let v: i64 = client.query_one(sql, &[]).await.expect(sql).get(0);
        drop(client);
        let _ = task.await;
        v
    })
}

/// A fresh schema `name` owned by the agent role, with a table `t` of
/// three rows, a sequence and an index.
fn fresh_schema(url: &str, name: &str) {
    admin(
        url,
        &format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}; \
             CREATE TABLE {name}.t (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2), \
               seen date DEFAULT '2026-01-02', data bytea, tags jsonb); \
             CREATE INDEX t_name ON {name}.t (lower(name)); \
             CREATE SEQUENCE {name}.s; \
             INSERT INTO {name}.t VALUES (1, 'apple', 1.50, '2026-12-06', '\\x00ff', '{{\"a\": 1}}'), \
               (2, 'pear', 2.25, NULL, NULL, NULL), (3, 'fig', NULL, NULL, NULL, NULL);"
        ),
    );
}

/// `longhand tool call postgres <tool> --database <grant> --input <input>`
/// with `DB_URL` (and nothing else of the test's environment) set.
fn pg(home: &Home, url: &str, grant: &str, tool: &str, input: Value, extra: &[&str]) -> Ended {
    let input = input.to_string();
    let mut args = vec![
        "tool",
        "call",
        "postgres",
        tool,
        "--database",
        grant,
        "--input",
        &input,
    ];
    args.extend_from_slice(extra);
    let mut cmd = home.cmd(&args);
    cmd.env("DB_URL", url).env("RUST_LOG", "debug");
    crate::support::run(cmd)
}

fn output(ended: &Ended) -> Value {
    ended.expect_code(0);
    serde_json::from_str(&ended.stdout_text())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", ended.stdout_text()))
}

/// Everything a call printed, for canary checks.
fn printed(ended: &Ended) -> String {
    format!("{}\n{}", ended.stdout_text(), ended.stderr)
}

const GRANT: &str = "app=DB_URL,allow=127.0.0.1";

#[test]
fn query_reads_rows_of_every_common_type_with_bound_parameters() {
    let Some(url) = external("LONGHAND_TEST_PG_AGENT") else {
        return;
    };
    fresh_schema(&url, "db_types");
    let home = Home::new();
    let out = output(&pg(
        &home,
        &url,
        GRANT,
        "query",
        json!({"database": "app",
               "sql": "select id, name, price, seen, data, tags, price > $1 as dear \
                       from db_types.t where name <> $2 order by id",
               "params": [2, "fig"]}),
        &[],
    ));
    assert_eq!(
        out["rows"],
        json!([
            [1, "apple", "1.50", "2026-12-06", {"base64": "AP8="}, "{\"a\": 1}", false],
            [2, "pear", "2.25", null, null, null, true],
        ]),
        "{out}"
    );
    let types: Vec<&str> = out["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["int4", "text", "numeric", "date", "bytea", "jsonb", "bool"]
    );
    assert!(out.get("truncated_rows").is_none(), "{out}");

    // Text parameters are parsed by the server for the column's type.
    let out = output(&pg(
        &home,
        &url,
        GRANT,
        "query",
        json!({"database": "app", "sql": "select count(*) from db_types.t where seen = $1",
               "params": ["2026-12-06"]}),
        &[],
    ));
    assert_eq!(out["rows"], json!([[1]]));

    // A type the tool does not decode is named, with the cast that reads it.
    let ended = pg(
        &home,
        &url,
        GRANT,
        "query",
        json!({"database": "app", "sql": "select point(1, 2) as p"}),
        &[],
    );
    ended.expect_code(1);
    assert!(ended.stderr.contains("::text"), "{}", ended.stderr);

    // schema: the table, its columns and its indexes.
    let out = output(&pg(
        &home,
        &url,
        GRANT,
        "schema",
        json!({"database": "app"}),
        &[],
    ));
    let t = out["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["schema"] == "db_types" && t["name"] == "t")
        .unwrap_or_else(|| panic!("db_types.t missing: {out}"));
    assert_eq!(t["kind"], "table");
    assert_eq!(
        t["columns"][1],
        json!({"name": "name", "type": "text", "nullable": false})
    );
    assert_eq!(t["columns"][3]["default"], "'2026-01-02'::date");
    let indexes = t["indexes"].as_array().unwrap();
    assert!(
        indexes
            .iter()
            .any(|i| i["name"] == "t_name" && i["columns"] == json!(["lower(name)"])),
        "{indexes:?}"
    );
    assert!(
        indexes
            .iter()
            .any(|i| i["name"] == "t_pkey" && i["unique"] == true),
        "{indexes:?}"
    );
}

/// Each known bypass: what the tool says, and the table unchanged.
#[test]
fn every_known_read_only_bypass_is_refused_by_the_server_and_the_next_call_works() {
    let Some(url) = external("LONGHAND_TEST_PG_AGENT") else {
        return;
    };
    let owner = external("LONGHAND_TEST_PG").expect("LONGHAND_TEST_PG beside the agent role");
    fresh_schema(&url, "db_bypass");
    // A function that writes, called from a SELECT.
    admin(
        &url,
        "CREATE FUNCTION db_bypass.wipe() RETURNS int LANGUAGE sql AS \
         'DELETE FROM db_bypass.t RETURNING 1';",
    );
    let marker = std::env::temp_dir().join(format!("longhand-copy-program-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    // A session of another role, for pg_terminate_backend to aim at.
    let other_pid = std::sync::Arc::new(std::sync::Mutex::new(0i32));
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let owner = owner.clone();
        let other_pid = other_pid.clone();
        std::thread::spawn(move || {
            block_on(async move {
                let (client, conn) = tokio_postgres::connect(&owner, tokio_postgres::NoTls)
                    .await
                    .expect("connect as the owner");
                let task = tokio::spawn(conn);
                let pid: i32 = client
                    .query_one("select pg_backend_pid()", &[])
                    .await
                    .unwrap()
                    .get(0);
                *other_pid.lock().unwrap() = pid;
                let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
                let alive: i32 = client
                    .query_one("select 1", &[])
                    .await
                    .expect("still alive")
                    .get(0);
                assert_eq!(alive, 1);
                drop(client);
                let _ = task.await;
            });
        })
    };
    while *other_pid.lock().unwrap() == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = *other_pid.lock().unwrap();
    let home = Home::new();
    let cases: Vec<(String, &[&str])> = vec![
        // Without RETURNING a write returns no rows: not run at all. With
        // it, it runs, and the read-only transaction refuses the write.
        (
            "WITH x AS (SELECT 1) DELETE FROM db_bypass.t".into(),
            &["return rows"],
        ),
        (
            "WITH x AS (SELECT 1) DELETE FROM db_bypass.t RETURNING id".into(),
            &["read-only", "25006"],
        ),
        ("/* hi */ DELETE FROM db_bypass.t".into(), &["return rows"]),
        (
            "/* hi */ DELETE FROM db_bypass.t RETURNING id".into(),
            &["read-only", "25006"],
        ),
        (
            "-- hi\nUPDATE db_bypass.t SET name = 'x' RETURNING id".into(),
            &["read-only", "25006"],
        ),
        (
            "WITH d AS (DELETE FROM db_bypass.t RETURNING id) SELECT count(*) FROM d".into(),
            &["read-only", "25006"],
        ),
        (
            "SELECT 1; DROP TABLE db_bypass.t".into(),
            &["one statement per call"],
        ),
        (
            "COMMIT; DROP TABLE db_bypass.t".into(),
            &["one statement per call"],
        ),
        ("COMMIT".into(), &["return rows"]),
        ("SET TRANSACTION READ WRITE".into(), &["return rows"]),
        ("SET ROLE longhand".into(), &["return rows"]),
        (
            "SELECT nextval('db_bypass.s')".into(),
            &["read-only", "nextval"],
        ),
        ("SELECT db_bypass.wipe()".into(), &["read-only", "25006"]),
        (
            "EXPLAIN ANALYZE DELETE FROM db_bypass.t".into(),
            &["read-only", "25006"],
        ),
        (
            format!("SELECT pg_terminate_backend({pid})"),
            &["access denied", "42501"],
        ),
        (
            "SELECT lo_export(0, '/tmp/longhand-lo-export')".into(),
            &["42501"],
        ),
        ("SELECT lo_import('/etc/hostname')".into(), &["42501"]),
        (
            "SELECT dblink_exec('dbname=longhand', 'DROP TABLE db_bypass.t')".into(),
            &["does not exist", "42883"],
        ),
        (
            format!("COPY db_bypass.t TO PROGRAM 'touch {}'", marker.display()),
            &["return rows"],
        ),
        ("COPY (SELECT 1) TO STDOUT".into(), &["return rows"]),
        (
            "DO $$ BEGIN DELETE FROM db_bypass.t; END $$".into(),
            &["return rows"],
        ),
        (
            "CREATE TABLE db_bypass.u AS SELECT 1".into(),
            &["return rows"],
        ),
    ];
    for (sql, says) in &cases {
        let ended = pg(
            &home,
            &url,
            GRANT,
            "query",
            json!({"database": "app", "sql": sql}),
            &[],
        );
        assert_ne!(ended.code, Some(0), "{sql} ran:\n{}", ended.stdout_text());
        let text = ended.stderr.to_lowercase();
        for s in *says {
            assert!(
                text.contains(&s.to_lowercase()),
                "{sql}: expected {s:?} in:\n{}",
                ended.stderr
            );
        }
        assert!(!printed(&ended).contains(CANARY), "{sql}: canary printed");
        // Nothing changed, and the next call works.
        assert_eq!(scalar(&url, "select count(*) from db_bypass.t"), 3, "{sql}");
        let next = output(&pg(
            &home,
            &url,
            GRANT,
            "query",
            json!({"database": "app", "sql": "select count(*) as n from db_bypass.t"}),
            &[],
        ));
        assert_eq!(next["rows"], json!([[3]]), "after {sql}");
    }
    assert_eq!(scalar(&url, "select last_value from db_bypass.s"), 1);
    assert_eq!(
        scalar(&url, "select count(*) from pg_largeobject_metadata"),
        0,
        "lo_import made a large object"
    );
    assert!(!marker.exists(), "COPY … TO PROGRAM ran");
    assert_eq!(
        scalar(
            &url,
            "select count(*) from information_schema.tables where table_schema = 'db_bypass'"
        ),
        1,
        "a table was created or dropped"
    );
    stop_tx.send(()).unwrap();
    holder
        .join()
        .expect("the other role's session was not ended");
}

#[test]
fn a_huge_result_and_a_query_that_never_ends_are_bounded() {
    let Some(url) = external("LONGHAND_TEST_PG_AGENT") else {
        return;
    };
    let home = Home::new();
    // About 10 GB if it were all produced: 10 million rows of 1 KB.
    let started = Instant::now();
    let out = output(&pg(
        &home,
        &url,
        GRANT,
        "query",
        json!({"database": "app",
               "sql": "select g, repeat('x', 1000) as pad from generate_series(1, 10000000) g"}),
        &[],
    ));
    let took = started.elapsed();
    assert_eq!(
        out["rows"].as_array().unwrap().len(),
        200,
        "default max_rows"
    );
    let cut = out["truncated_rows"]
        .as_u64()
        .expect("rows cut are counted");
    assert!(cut >= 1000, "{cut}");
    assert_eq!(out["truncated_exact"], false);
    assert!(took < Duration::from_secs(20), "took {took:?}");

    // The byte cap holds whatever max_rows asks: 10000 rows of 1 KB do not
    // fit in a 64 KiB output limit.
    let out = output(&pg(
        &home,
        &url,
        GRANT,
        "query",
        json!({"database": "app", "max_rows": 10000,
               "sql": "select repeat('y', 1000) from generate_series(1, 10000)"}),
        &["--max-output", "65536"],
    ));
    let kept = out["rows"].as_array().unwrap().len();
    assert!((50..=65).contains(&kept), "{kept}");
    assert_eq!(
        out["truncated_rows"].as_u64().unwrap() as usize,
        10000 - kept
    );

    // A query that never ends stops at the call's time limit, and says so.
    let started = Instant::now();
    let ended = pg(
        &home,
        &url,
        GRANT,
        "query",
        json!({"database": "app",
               "sql": "select count(*) from generate_series(1, 1000000000000::bigint)"}),
        &["--timeout", "2s"],
    );
    let took = started.elapsed();
    ended.expect_code(1);
    assert!(ended.stderr.contains("time limit"), "{}", ended.stderr);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // The server is not still running it.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        scalar(
            &url,
            "select count(*) from pg_stat_activity where query like 'select count(*) from \
             generate_series(1, 1000000000000%' and state = 'active'"
        ),
        0
    );
    let next = output(&pg(
        &home,
        &url,
        GRANT,
        "query",
        json!({"database": "app", "sql": "select 1 as one"}),
        &[],
    ));
    assert_eq!(next["rows"], json!([[1]]));
}

/// A result of huge rows is fetched a row at a time: the host never holds
/// a batch of them. 200 rows of 20 MB (4 GB) come back cut, and the
/// `longhand` process's peak memory stays far below one batch's worth.
#[test]
fn a_result_of_huge_rows_is_never_held_a_batch_at_a_time() {
    let Some(url) = external("LONGHAND_TEST_PG_AGENT") else {
        return;
    };
    let home = Home::new();
    let input = json!({"database": "app",
                       "sql": "select g, repeat('x', 20000000) as pad from generate_series(1, 200) g"})
    .to_string();
    // Started from a small Python process, whose children's peak RSS is the
    // command's own (a child of this test binary would inherit its mark).
    let mut cmd = std::process::Command::new("python3");
    cmd.args([
        "-c",
        "import resource, subprocess, sys\n\
         r = subprocess.run(sys.argv[1:], capture_output=True)\n\
         sys.stderr.write(r.stderr.decode(errors='replace'))\n\
         print(r.returncode)\n\
         print(r.stdout.decode(errors='replace').replace('\\n', ' '))\n\
         print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
        crate::support::BIN,
        "tool",
        "call",
        "postgres",
        "query",
        "--database",
        GRANT,
        "--input",
        &input,
    ])
    .env_clear()
    .env("LONGHAND_HOME", home.path())
    .env("DB_URL", &url)
    .env("PATH", std::env::var("PATH").unwrap_or_default());
    let ended = crate::support::run(cmd);
    ended.expect_code(0);
    assert_eq!(ended.stdout[0], "0", "{}", ended.stderr);
    let out: Value = serde_json::from_str(&ended.stdout[1]).expect("the tool's JSON");
    assert_eq!(out["rows"], json!([]), "a 20 MB row does not fit 1 MiB");
    assert!(out["truncated_rows"].as_u64().unwrap() >= 1, "{out}");
    let peak_kib: u64 = ended.stdout[2].trim().parse().unwrap();
    assert!(
        peak_kib < 400 << 10,
        "peak RSS {} MiB: a batch of huge rows was held",
        peak_kib >> 10
    );
}

#[test]
fn execute_needs_a_read_write_grant_and_commits_one_statement() {
    let Some(url) = external("LONGHAND_TEST_PG_AGENT") else {
        return;
    };
    fresh_schema(&url, "db_exec");
    let home = Home::new();
    let insert = json!({"database": "app",
                        "sql": "insert into db_exec.t (id, name) values ($1, $2)",
                        "params": [4, "kiwi"]});
    let ended = pg(&home, &url, GRANT, "execute", insert.clone(), &[]);
    ended.expect_code(3);
    assert!(ended.stderr.contains("mode=rw"), "{}", ended.stderr);
    assert_eq!(scalar(&url, "select count(*) from db_exec.t"), 3);

    let rw = "app=DB_URL,allow=127.0.0.1,mode=rw";
    let out = output(&pg(&home, &url, rw, "execute", insert, &[]));
    assert_eq!(out, json!({"changes": 1}));
    assert_eq!(scalar(&url, "select count(*) from db_exec.t"), 4);
    // One statement, even read-write.
    let ended = pg(
        &home,
        &url,
        rw,
        "execute",
        json!({"database": "app", "sql": "delete from db_exec.t; drop table db_exec.t"}),
        &[],
    );
    assert_ne!(ended.code, Some(0));
    assert!(
        ended.stderr.contains("one statement per call"),
        "{}",
        ended.stderr
    );
    assert_eq!(scalar(&url, "select count(*) from db_exec.t"), 4);
    // A failing statement is rolled back whole.
    let ended = pg(
        &home,
        &url,
        rw,
        "execute",
        json!({"database": "app", "sql": "insert into db_exec.t (id, name) values (5, 'a'), (1, 'dup')"}),
        &[],
    );
    ended.expect_code(1);
    assert!(ended.stderr.contains("23505"), "{}", ended.stderr);
    assert_eq!(scalar(&url, "select count(*) from db_exec.t"), 4);
}

#[test]
fn the_database_server_passes_the_address_rules_and_tls_as_the_url_asks() {
    let Some(url) = external("LONGHAND_TEST_PG_AGENT") else {
        return;
    };
    let home = Home::new();
    let input = json!({"database": "app", "sql": "select 1 as one"});
    for grant in [
        "app=DB_URL",
        "app=DB_URL,allow=127.0.0.2",
        "app=DB_URL,allow=127.0.0.1:5999",
    ] {
        let ended = pg(&home, &url, grant, "query", input.clone(), &[]);
        ended.expect_code(3);
        assert!(
            ended.stderr.contains("allow=ADDRESS"),
            "{grant}: {}",
            ended.stderr
        );
    }
    let ca = external("LONGHAND_TEST_PG_TLS_CA").expect("the test CA");
    let tls_url = format!("{url}?sslmode=verify-full&sslrootcert={ca}");
    let out = output(&pg(
        &home,
        &tls_url,
        GRANT,
        "query",
        json!({"database": "app",
        "sql": "select ssl::int from pg_stat_ssl where pid = pg_backend_pid()"}),
        &[],
    ));
    assert_eq!(out["rows"], json!([[1]]), "the connection is encrypted");
    // A certificate that does not verify: told by kind, nothing of the URL.
    // The public CAs did not sign the test server's certificate.
    let bad_url = format!("{url}?sslmode=verify-full&sslrootcert=system");
    let ended = pg(&home, &bad_url, GRANT, "query", input, &[]);
    ended.expect_code(1);
    assert!(
        ended.stderr.contains("TLS handshake failed"),
        "{}",
        ended.stderr
    );
    assert!(!printed(&ended).contains(CANARY));
}

#[test]
fn a_superuser_login_is_refused_unless_the_grant_says_so() {
    let Some(url) = external("LONGHAND_TEST_PG_SUPER") else {
        return;
    };
    let home = Home::new();
    let ended = pg(
        &home,
        &url,
        GRANT,
        "query",
        json!({"database": "app", "sql": "select 1"}),
        &[],
    );
    ended.expect_code(3);
    assert!(ended.stderr.contains("superuser"), "{}", ended.stderr);
    assert!(!printed(&ended).contains(SUPER_CANARY));
    // Granted on purpose: still no program runs from `query`.
    let marker = std::env::temp_dir().join(format!("longhand-su-program-{}", std::process::id()));
    let ended = pg(
        &home,
        &url,
        "app=DB_URL,allow=127.0.0.1,superuser=yes",
        "query",
        json!({"database": "app",
               "sql": format!("COPY (SELECT 1) TO PROGRAM 'touch {}'", marker.display())}),
        &[],
    );
    assert_ne!(ended.code, Some(0));
    assert!(ended.stderr.contains("return rows"), "{}", ended.stderr);
    assert!(!marker.exists(), "COPY … TO PROGRAM ran");
    assert!(!printed(&ended).contains(SUPER_CANARY));
}

#[test]
fn the_password_appears_in_no_output_error_log_or_receipt() {
    let Some(url) = external("LONGHAND_TEST_PG_AGENT") else {
        return;
    };
    fresh_schema(&url, "db_canary");
    let home = Home::new();
    let wrong_password = url.replace(CANARY, &format!("{CANARY}-wrong"));
    let missing_db = url.replace("/longhand", &format!("/{CANARY}"));
    let cases = [
        (url.clone(), "select name from db_canary.t order by id"),
        (url.clone(), "select * from db_canary.missing"),
        (url.clone(), "select current_setting('no.such_setting')"),
        (wrong_password, "select 1"),
        (missing_db, "select 1"),
    ];
    for (u, sql) in cases {
        let ended = pg(
            &home,
            &u,
            GRANT,
            "query",
            json!({"database": "app", "sql": sql}),
            &["--json"],
        );
        let all = printed(&ended);
        assert!(!all.contains(CANARY), "{sql}: canary in:\n{all}");
        assert!(!all.contains("longhand_agent"), "{sql}: user in:\n{all}");
        assert!(!all.contains("127.0.0.1:5432"), "{sql}: address in:\n{all}");
    }
    // A bad URL is refused at start by its variable's name, never its text.
    let ended = pg(
        &home,
        &format!("{url}?sslmode=sometimes"),
        GRANT,
        "query",
        json!({"database": "app", "sql": "select 1"}),
        &[],
    );
    ended.expect_code(2);
    assert!(ended.stderr.contains("DB_URL"), "{}", ended.stderr);
    assert!(!printed(&ended).contains(CANARY));
}

/// An agent asks a question of a PostgreSQL database through `postgres`:
/// it reads the schema, queries with a parameter, and answers; `execute`
/// is not offered on a read-only grant; the password is nowhere in the
/// session's log.
#[test]
fn an_agent_answers_from_a_granted_database() {
    let Some(url) = external("LONGHAND_TEST_PG_AGENT") else {
        return;
    };
    fresh_schema(&url, "db_agent");
    let home = Home::new();
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        &dir.path().join("agent.toml"),
        r#"name = "db-answers"
instructions = "Answer from the database."
goal = "How many fruits cost more than 2?"

[model]
provider = "replay"
model = "script"
cassette = "unused-cassette.json"

[[tools]]
component = "postgres"
databases = ["app=SALES_DB_URL,allow=127.0.0.1"]
"#,
    );
    let responses = [
        tool_turn(
            "Looking at the tables.",
            vec![call("s", "postgres__schema", json!({"database": "app"}))],
            10,
            5,
        ),
        tool_turn(
            "Counting.",
            vec![
                call(
                    "q",
                    "postgres__query",
                    json!({"database": "app",
                           "sql": "select count(*) as n from db_agent.t where price > $1",
                           "params": [2]}),
                ),
                call(
                    "x",
                    "postgres__execute",
                    json!({"database": "app", "sql": "delete from db_agent.t"}),
                ),
            ],
            10,
            5,
        ),
        text_turn("One fruit costs more than 2.", 10, 5),
    ];
    let script = dir.path().join("script.json");
    write(&script, &json!({"responses": responses}).to_string());
    let run = {
        let mut cmd = home.cmd(&[
            "run",
            dir.path().to_str().unwrap(),
            "--script",
            script.to_str().unwrap(),
            "--json",
        ]);
        cmd.env("SALES_DB_URL", &url);
        crate::support::run(cmd)
    };
    run.expect_code(0);
    let session = crate::support::session_of_json(&run.stdout[0]);
    let log = home.log(&session);
    let text = serde_json::to_string(&log).unwrap();
    assert!(!text.contains(CANARY), "the password is in the log");
    assert!(!printed(&run).contains(CANARY));
    let result = |id: &str| -> (bool, String) {
        let finished = of_kind(&log, "tool_finished");
        let r = finished
            .iter()
            .find(|r| matches!(&r.event, Event::ToolFinished { call_id, .. } if call_id == id))
            .unwrap_or_else(|| panic!("call {id} did not finish"));
        let Event::ToolFinished { ok, result, .. } = &r.event else {
            unreachable!()
        };
        let text = String::from_utf8(blob(&home, result)).expect("utf-8");
        assert!(!text.contains(CANARY), "the password is in a result");
        (*ok, text)
    };
    let (ok, schema) = result("s");
    assert!(ok && schema.contains("db_agent"), "{schema}");
    let (ok, count) = result("q");
    assert!(ok && count.contains("[[1]]"), "{count}");
    let (ok, refused) = result("x");
    assert!(!ok, "execute ran on a read-only grant: {refused}");
    assert!(refused.contains("postgres__execute"), "{refused}");
    assert_eq!(scalar(&url, "select count(*) from db_agent.t"), 3);
}
