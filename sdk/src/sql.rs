//! Query a database the operator granted by name, and the one JSON shape
//! every database tool answers in.
//!
//! A thin wrapper over the `longhand:tool/sql` import: the host holds the
//! connection and its credentials (`databases = ["app=DATABASE_URL"]`), the
//! tool names the database `app` and nothing more. Every [`query`] runs in
//! a read-only transaction with a statement timeout, one statement with its
//! parameters bound; [`execute`] is refused unless the grant says
//! `mode=rw`.
//!
//! The JSON helpers ([`value_to_json`], [`value_from_json`],
//! [`rows_to_json`]) are the shape the model sees from the built-in
//! `postgres` and `sqlite` tools alike: a row is an array of JSON values,
//! bytes are `{"base64": "…"}`, and a cut result says how many rows were
//! left out.
//!
//! ```no_run
//! use longhand_sdk::sql::{self, Value};
//!
//! # fn main() -> Result<(), longhand_sdk::ToolError> {
//! let rows = sql::query("app", "select name from users where id = $1", &[Value::Integer(7)], 10)?;
//! println!("{}", sql::rows_to_json(&rows));
//! # Ok(())
//! # }
//! ```

use base64::Engine as _;
use serde_json::{Map, Value as Json, json};

use crate::ToolError;
use crate::bindings::longhand::tool::sql as wit;

pub use wit::{Changes, Column, Index, Rows, Table, TableColumn, Value};

/// Bytes as the model sees them: `{"base64": "…"}`.
const BYTES_KEY: &str = "base64";

/// One value as JSON: `null`, a boolean, a number, a string, or
/// `{"base64": "…"}` for bytes. A real that JSON cannot hold (NaN,
/// infinities) becomes its name as a string.
pub fn value_to_json(value: &Value) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => Json::from(*i),
        Value::Real(r) => serde_json::Number::from_f64(*r)
            .map(Json::Number)
            .unwrap_or_else(|| Json::String(r.to_string())),
        Value::Text(t) => Json::String(t.clone()),
        Value::Bytes(b) => {
            json!({ BYTES_KEY: base64::engine::general_purpose::STANDARD.encode(b) })
        }
    }
}

/// One bound parameter from JSON: the inverse of [`value_to_json`]. An
/// array or any other object is refused, saying what to write instead.
pub fn value_from_json(value: &Json) -> Result<Value, String> {
    Ok(match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Integer(i),
            None => Value::Real(n.as_f64().ok_or("a number too large for a real")?),
        },
        Json::String(s) => Value::Text(s.clone()),
        Json::Object(o) => match (o.len(), o.get(BYTES_KEY)) {
            (1, Some(Json::String(text))) => Value::Bytes(
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .map_err(|e| format!("`base64` is not base64 ({e})"))?,
            ),
            _ => {
                return Err(
                    "an object parameter must be {\"base64\": \"...\"} (bytes); pass other \
                     structured values as JSON text"
                        .to_owned(),
                );
            }
        },
        Json::Array(_) => {
            return Err(
                "an array is not a parameter value; pass it as JSON text, or one parameter per \
                 element"
                    .to_owned(),
            );
        }
    })
}

/// Every parameter of an input's `params`, or `invalid-input` naming the
/// first that does not fit.
pub fn params_from_json(params: &[Json]) -> Result<Vec<Value>, ToolError> {
    params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            value_from_json(p).map_err(|e| ToolError::invalid_input(format!("`params[{i}]`: {e}")))
        })
        .collect()
}

/// A query's answer as the model sees it: `{"columns": [{"name", "type"}],
/// "rows": [[…]]}`, with `truncated_rows` (and `truncated_exact: false`
/// when counting them stopped early) when rows were left out.
pub fn rows_to_json(rows: &Rows) -> Json {
    let mut out = Map::new();
    out.insert(
        "columns".into(),
        rows.columns
            .iter()
            .map(|c| json!({ "name": c.name, "type": c.type_ }))
            .collect(),
    );
    out.insert(
        "rows".into(),
        rows.rows
            .iter()
            .map(|row| row.iter().map(value_to_json).collect::<Json>())
            .collect(),
    );
    if rows.truncated_rows > 0 || !rows.truncated_exact {
        out.insert("truncated_rows".into(), Json::from(rows.truncated_rows));
        if !rows.truncated_exact {
            out.insert("truncated_exact".into(), Json::Bool(false));
        }
    }
    Json::Object(out)
}

/// A database's tables as the model sees them.
pub fn tables_to_json(tables: &[Table]) -> Json {
    tables
        .iter()
        .map(|t| {
            json!({
                "schema": t.namespace,
                "name": t.name,
                "kind": t.kind,
                "columns": t.columns.iter().map(|c| {
                    let mut col = json!({ "name": c.name, "type": c.type_, "nullable": c.nullable });
                    if let Some(d) = &c.default_value {
                        col["default"] = Json::String(d.clone());
                    }
                    col
                }).collect::<Json>(),
                "indexes": t.indexes.iter().map(|i| json!({
                    "name": i.name, "columns": i.columns, "unique": i.unique,
                })).collect::<Json>(),
            })
        })
        .collect()
}

/// Off wasm32 there is no host: every call is refused, so a tool's native
/// unit tests see what a tool granted no database sees.
fn no_host(database: &str) -> ToolError {
    ToolError::access_denied(database, "no host to hold databases outside a component")
}

/// Run one read-only statement on the granted database `database`.
pub fn query(
    database: &str,
    statement: &str,
    params: &[Value],
    max_rows: u32,
) -> Result<Rows, ToolError> {
    if !cfg!(target_arch = "wasm32") {
        return Err(no_host(database));
    }
    Ok(wit::query(database, statement, params, max_rows)?)
}

/// Run one statement that may write, committed when it succeeds; refused
/// unless the grant says `mode=rw`.
pub fn execute(database: &str, statement: &str, params: &[Value]) -> Result<Changes, ToolError> {
    if !cfg!(target_arch = "wasm32") {
        return Err(no_host(database));
    }
    Ok(wit::execute(database, statement, params)?)
}

/// The tables and views of the granted database `database`.
pub fn schema(database: &str) -> Result<Vec<Table>, ToolError> {
    if !cfg!(target_arch = "wasm32") {
        return Err(no_host(database));
    }
    Ok(wit::schema(database)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_go_to_json_and_back() {
        for v in [
            Value::Null,
            Value::Boolean(true),
            Value::Integer(-7),
            Value::Real(1.5),
            Value::Text("é".into()),
            Value::Bytes(vec![0, 255, 10]),
        ] {
            let back = value_from_json(&value_to_json(&v)).unwrap();
            assert_eq!(format!("{back:?}"), format!("{v:?}"));
        }
        assert_eq!(
            value_to_json(&Value::Real(f64::NAN)),
            Json::String("NaN".into())
        );
        assert!(value_from_json(&json!([1])).unwrap_err().contains("array"));
        assert!(
            value_from_json(&json!({"a": 1}))
                .unwrap_err()
                .contains("base64")
        );
        assert!(value_from_json(&json!({"base64": "!!"})).is_err());
    }

    #[test]
    fn a_cut_result_says_how_much_was_cut() {
        let rows = Rows {
            columns: vec![Column {
                name: "n".into(),
                type_: "int8".into(),
            }],
            rows: vec![vec![Value::Integer(1)]],
            truncated_rows: 4,
            truncated_exact: false,
        };
        assert_eq!(
            rows_to_json(&rows),
            json!({"columns": [{"name": "n", "type": "int8"}], "rows": [[1]],
                   "truncated_rows": 4, "truncated_exact": false})
        );
        let whole = Rows {
            truncated_rows: 0,
            truncated_exact: true,
            ..rows
        };
        assert!(rows_to_json(&whole).get("truncated_rows").is_none());
    }
}
