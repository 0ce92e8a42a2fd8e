//! `postgres`: query a PostgreSQL database the operator granted by name.
//!
//! This crate owns the tool's shape for the model — its input, its output,
//! its messages — and nothing of the connection: the host holds the URL,
//! the credentials, the read-only transaction, the timeout and the caps
//! (`longhand:tool/sql`). The guest names a database (`app`) and never sees
//! where it is or who it logs in as.

use longhand_sdk::sql;
use longhand_sdk::{Effect, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value as Json;

/// Rows returned when the input names no `max_rows`.
const DEFAULT_MAX_ROWS: u32 = 200;
/// The most rows one call may ask for (the host also caps their bytes).
const MAX_ROWS: u32 = 10_000;

fn default_max_rows() -> u32 {
    DEFAULT_MAX_ROWS
}

/// Input of `query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryInput {
    /// The database's name as the operator granted it, e.g. `app`.
    #[schemars(length(min = 1, max = 64))]
    database: String,
    /// One SQL statement; `$1`, `$2`… stand for `params`.
    #[schemars(length(min = 1, max = 100000))]
    sql: String,
    /// Values bound to `$1`, `$2`…: null, booleans, numbers, strings, or
    /// `{"base64": "…"}` for bytes.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    params: Vec<Json>,
    /// Rows to return at most (default 200, at most 10000); the rest are
    /// counted in `truncated_rows`.
    #[serde(default = "default_max_rows")]
    #[schemars(range(min = 1, max = 10000))]
    max_rows: u32,
}

/// Input of `execute`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecuteInput {
    /// The database's name as the operator granted it, e.g. `app`.
    #[schemars(length(min = 1, max = 64))]
    database: String,
    /// One SQL statement; `$1`, `$2`… stand for `params`.
    #[schemars(length(min = 1, max = 100000))]
    sql: String,
    /// Values bound to `$1`, `$2`…, as for `query`.
    #[serde(default)]
    #[schemars(length(max = 1000))]
    params: Vec<Json>,
}

/// Input of `schema`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SchemaInput {
    /// The database's name as the operator granted it, e.g. `app`.
    #[schemars(length(min = 1, max = 64))]
    database: String,
}

/// `query`: one read-only statement.
pub(crate) struct Query;

impl Tool for Query {
    const NAME: &'static str = "query";
    const DESCRIPTION: &'static str = "Run one read-only SQL statement on a PostgreSQL database \
        the operator granted, e.g. {\"database\": \"app\", \"sql\": \"select id, name from users \
        where id = $1\", \"params\": [7]}. It runs in a read-only transaction: a statement that \
        writes is refused by the server. One statement per call. Returns {\"columns\", \"rows\"}; \
        rows past `max_rows` (or past the byte cap) are counted in `truncated_rows`: narrow the \
        query or page with LIMIT/OFFSET.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = QueryInput;
    type Output = Json;

    fn call(input: QueryInput) -> Result<Json, ToolError> {
        let params = sql::params_from_json(&input.params)?;
        let max_rows = input.max_rows.clamp(1, MAX_ROWS);
        let rows = sql::query(&input.database, &input.sql, &params, max_rows)?;
        Ok(sql::rows_to_json(&rows))
    }
}

/// `execute`: one statement that may write.
pub(crate) struct Execute;

impl Tool for Execute {
    const NAME: &'static str = "execute";
    const DESCRIPTION: &'static str = "Run one SQL statement that may write (INSERT, UPDATE, \
        DELETE, DDL) on a PostgreSQL database the operator granted read-write, e.g. \
        {\"database\": \"app\", \"sql\": \"update users set name = $1 where id = $2\", \
        \"params\": [\"Ada\", 7]}. It is committed when it succeeds. Returns {\"changes\": rows \
        changed}. A database granted read-only refuses it: use `query` to read.";
    const EFFECT: Effect = Effect::Writes;
    type Input = ExecuteInput;
    type Output = Json;

    fn call(input: ExecuteInput) -> Result<Json, ToolError> {
        let params = sql::params_from_json(&input.params)?;
        let changes = sql::execute(&input.database, &input.sql, &params)?;
        Ok(serde_json::json!({ "changes": changes.changes }))
    }
}

/// `schema`: the tables and views, their columns and indexes.
pub(crate) struct Schema;

impl Tool for Schema {
    const NAME: &'static str = "schema";
    const DESCRIPTION: &'static str = "List the tables and views of a PostgreSQL database the \
        operator granted, with their columns (name, type, nullable, default) and indexes, e.g. \
        {\"database\": \"app\"}. System schemas are left out.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = SchemaInput;
    type Output = Json;

    fn call(input: SchemaInput) -> Result<Json, ToolError> {
        let tables = sql::schema(&input.database)?;
        Ok(serde_json::json!({ "tables": sql::tables_to_json(&tables) }))
    }
}

longhand_sdk::export! {
    name: "postgres",
    description: "Query PostgreSQL databases the operator granted by name (read-only unless granted mode=rw); the host holds the connection and its credentials.",
    tools: [Query, Execute, Schema],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_parameter_is_named_before_anything_is_sent() {
        let input = QueryInput {
            database: "app".into(),
            sql: "select $1".into(),
            params: vec![Json::from(1), serde_json::json!([1, 2])],
            max_rows: 10,
        };
        match Query::call(input) {
            Err(ToolError::InvalidInput(m)) => assert!(m.contains("params[1]"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn off_wasm_no_database_is_there() {
        let input = SchemaInput {
            database: "app".into(),
        };
        assert!(matches!(
            Schema::call(input),
            Err(ToolError::AccessDenied { .. })
        ));
    }
}
