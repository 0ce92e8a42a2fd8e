//! `sqlite`: query a SQLite file in a granted directory, with the engine
//! itself running inside the component.
//!
//! Unlike `postgres`, nothing goes to the host: the file comes through a
//! `dirs` grant and SQLite (compiled into this component) reads it through
//! WASI. Every limit is the engine's, set before the model's statement is
//! compiled (`engine.rs`): `query` and `schema` open the file read-only and
//! refuse any statement the engine says can write; `execute` opens it
//! read-write, which a read-only grant refuses. An authorizer refuses
//! ATTACH, DETACH, PRAGMAs that set anything, and load_extension; the
//! file's own views and triggers are not trusted; a progress handler stops
//! a statement at the call's time limit. The answers have the shape the
//! `postgres` tool's have (`longhand_sdk::sql`).

mod engine;
mod run;
mod schema;

use std::time::Duration;

use longhand_sdk::sql;
use longhand_sdk::{Effect, Tool, ToolError, parse_timeout};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value as Json;

use crate::engine::{DEFAULT_TIMEOUT, Db, Mode};

fn default_max_rows() -> u32 {
    run::DEFAULT_MAX_ROWS
}

/// Input of `query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryInput {
    /// The database file: a guest path in a granted directory, e.g.
    /// `/data/app.db`.
    #[schemars(length(min = 1, max = 4096))]
    db: String,
    /// One SQL statement that reads; `?1`, `?2`… (or `?`) stand for
    /// `params`.
    #[schemars(length(min = 1, max = 100000))]
    sql: String,
    /// Values bound to `?1`, `?2`…: null, booleans, numbers, strings, or
    /// `{"base64": "…"}` for bytes.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    params: Vec<Json>,
    /// Rows to return at most (default 200, at most 10000); the rest are
    /// counted in `truncated_rows`.
    #[serde(default = "default_max_rows")]
    #[schemars(range(min = 1, max = 10000))]
    max_rows: u32,
    /// Time limit, e.g. `5s` or `500ms` (default and most: 20s).
    #[serde(default)]
    timeout: Option<String>,
}

/// Input of `execute`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecuteInput {
    /// The database file: a guest path in a directory granted read-write,
    /// e.g. `/data/app.db`. A missing file is created.
    #[schemars(length(min = 1, max = 4096))]
    db: String,
    /// One SQL statement; `?1`, `?2`… (or `?`) stand for `params`.
    #[schemars(length(min = 1, max = 100000))]
    sql: String,
    /// Values bound to `?1`, `?2`…, as for `query`.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    params: Vec<Json>,
    /// Time limit, e.g. `5s` or `500ms` (default and most: 20s).
    #[serde(default)]
    timeout: Option<String>,
}

/// Input of `schema`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SchemaInput {
    /// The database file: a guest path in a granted directory, e.g.
    /// `/data/app.db`.
    #[schemars(length(min = 1, max = 4096))]
    db: String,
}

/// The call's time limit: the input's, never above the default.
fn limit(timeout: Option<&str>) -> Result<Duration, ToolError> {
    Ok(timeout
        .map(parse_timeout)
        .transpose()?
        .map_or(DEFAULT_TIMEOUT, |t| t.min(DEFAULT_TIMEOUT)))
}

/// `query`: one statement that reads.
pub(crate) struct Query;

impl Tool for Query {
    const NAME: &'static str = "query";
    const DESCRIPTION: &'static str = "Run one read-only SQL statement on a SQLite file in a \
        granted directory, e.g. {\"db\": \"/data/app.db\", \"sql\": \"select id, name from users \
        where id = ?1\", \"params\": [7]}. The file is opened read-only and a statement that \
        can write is refused: use `execute` for that. One statement per call; ATTACH, \
        load_extension and PRAGMAs that set anything are refused. Returns {\"columns\", \
        \"rows\"}; bytes are {\"base64\": ...}; rows past `max_rows` (or past about 768 KiB) are \
        counted in `truncated_rows`: narrow the query or page with LIMIT/OFFSET. Stops at \
        `timeout` (default 20s).";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = QueryInput;
    type Output = Json;

    fn call(input: QueryInput) -> Result<Json, ToolError> {
        let params = sql::params_from_json(&input.params)?;
        let limit = limit(input.timeout.as_deref())?;
        let db = Db::open(&input.db, Mode::Read, limit)?;
        let rows = run::query(&db, &input.sql, &params, input.max_rows)?;
        Ok(sql::rows_to_json(&rows))
    }
}

/// `execute`: one statement that may write.
pub(crate) struct Execute;

impl Tool for Execute {
    const NAME: &'static str = "execute";
    const DESCRIPTION: &'static str = "Run one SQL statement that may write (INSERT, UPDATE, \
        DELETE, CREATE...) on a SQLite file in a directory granted read-write, e.g. {\"db\": \
        \"/data/app.db\", \"sql\": \"update users set name = ?1 where id = ?2\", \"params\": \
        [\"Ada\", 7]}. A missing file is created. It is committed when it succeeds. Returns \
        {\"changes\": rows changed, \"last_insert_rowid\"}. A directory granted read-only \
        refuses it: use `query` to read. One statement per call; ATTACH, VACUUM, \
        load_extension and PRAGMAs that set anything are refused.";
    const EFFECT: Effect = Effect::Writes;
    type Input = ExecuteInput;
    type Output = Json;

    fn call(input: ExecuteInput) -> Result<Json, ToolError> {
        let params = sql::params_from_json(&input.params)?;
        let limit = limit(input.timeout.as_deref())?;
        let db = Db::open(&input.db, Mode::Write, limit)?;
        let changed = run::execute(&db, &input.sql, &params)?;
        Ok(serde_json::json!({
            "changes": changed.changes,
            "last_insert_rowid": changed.last_insert_rowid,
        }))
    }
}

/// `schema`: the tables and views, their columns and indexes.
pub(crate) struct Schema;

impl Tool for Schema {
    const NAME: &'static str = "schema";
    const DESCRIPTION: &'static str = "List the tables and views of a SQLite file in a granted \
        directory, with their columns (name, declared type, nullable, default) and indexes, \
        e.g. {\"db\": \"/data/app.db\"}.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = SchemaInput;
    type Output = Json;

    fn call(input: SchemaInput) -> Result<Json, ToolError> {
        let db = Db::open(&input.db, Mode::Read, DEFAULT_TIMEOUT)?;
        let tables = schema::tables(&db)?;
        Ok(serde_json::json!({ "tables": sql::tables_to_json(&tables) }))
    }
}

longhand_sdk::export! {
    name: "sqlite",
    description: "Query SQLite files in granted directories with the engine inside the tool: read-only unless the directory is granted read-write.",
    tools: [Query, Execute, Schema],
    requests: {
        dirs: [("/data", read_write, "the SQLite files to query (read-only is enough for query and schema)")],
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_and_never_pass_the_default() {
        assert_eq!(limit(Some("1s")).unwrap(), Duration::from_secs(1));
        assert_eq!(limit(Some("500ms")).unwrap(), Duration::from_millis(500));
        assert_eq!(limit(Some("1h")).unwrap(), DEFAULT_TIMEOUT);
        assert_eq!(limit(None).unwrap(), DEFAULT_TIMEOUT);
        for bad in ["", "s", "-1s", "0s", "3 weeks"] {
            assert!(limit(Some(bad)).is_err(), "{bad}");
        }
    }
}

/// The engine's fence, natively (the same SQLite, a real file, no
/// sandbox): what each refusal is made of. The sandboxed path is tested
/// through the binary in `host/tests/all/sqlite.rs`.
#[cfg(test)]
mod engine_tests {
    use super::*;
    use serde_json::json;

    struct Dir {
        dir: tempfile::TempDir,
    }

    impl Dir {
        fn new() -> Self {
            let d = Self {
                dir: tempfile::TempDir::new().unwrap(),
            };
            let c = rusqlite::Connection::open(d.db()).unwrap();
            c.execute_batch(
                "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT 'x', b BLOB);
                 INSERT INTO t(name) VALUES ('a'), ('b');
                 CREATE INDEX t_name ON t(name);
                 CREATE VIEW v AS SELECT name FROM t;",
            )
            .unwrap();
            d
        }
        fn db(&self) -> String {
            self.dir.path().join("t.db").display().to_string()
        }
        fn query(&self, sql: &str) -> Result<Json, ToolError> {
            Query::call(serde_json::from_value(json!({"db": self.db(), "sql": sql})).unwrap())
        }
        fn execute(&self, sql: &str) -> Result<Json, ToolError> {
            Execute::call(serde_json::from_value(json!({"db": self.db(), "sql": sql})).unwrap())
        }
        fn count(&self) -> i64 {
            self.query("select count(*) from t").unwrap()["rows"][0][0]
                .as_i64()
                .unwrap()
        }
    }

    fn invalid(r: Result<Json, ToolError>) -> String {
        match r {
            Err(ToolError::InvalidInput(m)) => m,
            other => panic!("expected invalid-input, got {other:?}"),
        }
    }

    #[test]
    fn writes_in_disguise_are_refused_by_the_engine() {
        let d = Dir::new();
        for sql in [
            "WITH x AS (SELECT 1) DELETE FROM t",
            "/* hi */ DELETE FROM t",
            "-- x\nDELETE FROM t",
            "VACUUM",
            "ANALYZE",
        ] {
            let m = invalid(d.query(sql));
            assert!(m.contains("use `execute`"), "{sql}: {m}");
        }
        assert_eq!(d.count(), 2);
    }

    #[test]
    fn a_tail_is_refused_before_anything_runs() {
        let d = Dir::new();
        for sql in ["SELECT 1; DROP TABLE t", "COMMIT; DROP TABLE t"] {
            let m = invalid(d.query(sql));
            assert!(m.contains("statement"), "{sql}: {m}");
            let m = invalid(d.execute(sql));
            assert!(m.contains("statement"), "{sql}: {m}");
        }
        assert_eq!(d.count(), 2);
        // Blanks and comments after the statement are no tail.
        assert_eq!(
            d.query("SELECT 1; -- done\n ").unwrap()["rows"],
            json!([[1]])
        );
    }

    #[test]
    fn attach_vacuum_into_and_write_pragmas_are_refused() {
        let d = Dir::new();
        let other = d.dir.path().join("o.db").display().to_string();
        for sql in [
            format!("ATTACH '{other}' AS o"),
            format!("VACUUM INTO '{other}'"),
            "VACUUM".to_owned(),
            "PRAGMA writable_schema=1".to_owned(),
            "PRAGMA journal_mode=OFF".to_owned(),
            "PRAGMA user_version=7".to_owned(),
            "BEGIN".to_owned(),
        ] {
            let m = invalid(d.execute(&sql));
            eprintln!("{sql}: {m}");
            if sql.starts_with("ATTACH") || sql.starts_with("VACUUM") {
                assert!(m.contains("ATTACH"), "{sql}: {m}");
            }
        }
        let m = invalid(d.query(&format!("ATTACH '{other}' AS o")));
        assert!(m.contains("ATTACH"), "{m}");
        assert!(!d.dir.path().join("o.db").exists());
        assert_eq!(
            d.query("PRAGMA user_version").unwrap()["rows"],
            json!([[0]])
        );
        let m = invalid(d.query("SELECT load_extension('x')"));
        eprintln!("load_extension: {m}");
    }

    #[test]
    fn a_hostile_view_cannot_call_unsafe_functions() {
        let d = Dir::new();
        let c = rusqlite::Connection::open(d.db()).unwrap();
        c.execute_batch("CREATE VIEW evil AS SELECT sqlite_log(1, 'x') AS l")
            .unwrap();
        drop(c);
        let m = invalid(d.query("SELECT * FROM evil"));
        assert!(m.contains("unsafe use"), "{m}");
    }

    #[test]
    fn rows_values_and_types() {
        let d = Dir::new();
        let out = Query::call(
            serde_json::from_value(json!({
                "db": d.db(),
                "sql": "select ?1 as i, ?2 as r, ?3 as s, ?4 as n, ?5 as b, name from t order by id",
                "params": [7, 1.5, "é", null, {"base64": "AAE="}],
                "max_rows": 1,
            }))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({
                "columns": [
                    {"name": "i", "type": "integer"}, {"name": "r", "type": "real"},
                    {"name": "s", "type": "text"}, {"name": "n", "type": ""},
                    {"name": "b", "type": "blob"}, {"name": "name", "type": "TEXT"}],
                "rows": [[7, 1.5, "é", null, {"base64": "AAE="}, "a"]],
                "truncated_rows": 1,
            })
        );
    }

    #[test]
    fn execute_and_schema() {
        let d = Dir::new();
        let out = Execute::call(
            serde_json::from_value(
                json!({"db": d.db(), "sql": "insert into t(name) values ($1)", "params": ["c"]}),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(out, json!({"changes": 1, "last_insert_rowid": 3}));
        let s = Schema::call(serde_json::from_value(json!({"db": d.db()})).unwrap()).unwrap();
        assert_eq!(s["tables"][0]["name"], "t");
        assert_eq!(
            s["tables"][0]["columns"][1],
            json!({"name": "name", "type": "TEXT", "nullable": false, "default": "'x'"})
        );
        assert_eq!(
            s["tables"][0]["indexes"],
            json!([{"name": "t_name", "columns": ["name"], "unique": false}])
        );
        assert_eq!(s["tables"][1]["kind"], "view");
    }

    #[test]
    fn a_runaway_statement_stops_at_the_time_limit() {
        let d = Dir::new();
        let started = std::time::Instant::now();
        let r = Query::call(
            serde_json::from_value(json!({
                "db": d.db(),
                "sql": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT count(*) FROM r",
                "timeout": "300ms",
            }))
            .unwrap(),
        );
        assert!(
            matches!(&r, Err(ToolError::Failed(m)) if m.contains("time limit")),
            "{r:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        let started = std::time::Instant::now();
        let out = d
            .query("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT i, randomblob(1000) FROM r")
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(4));
        assert_eq!(out["rows"].as_array().unwrap().len(), 200);
        assert!(
            out["truncated_rows"].as_u64().unwrap() > 1000,
            "{}",
            out["truncated_rows"]
        );
        assert_eq!(out["truncated_exact"], false);
    }
}
