//! Running the model's one statement: compiling it (one statement, no
//! tail), binding its parameters, and reading its rows within the caps.
//!
//! The caps, and why:
//!
//! * **Rows**: `max_rows` (default 200, at most 10 000).
//! * **Bytes**: 768 KiB of row data as JSON, so the answer stays under the
//!   host's default output limit (1 MiB) with room for the rest. The row
//!   that would pass it is left out and counted, like those after it.
//! * **One value**: a text longer than 16 KiB is cut there, ending with a
//!   marker saying how long it was; a blob longer than 12 KiB (16 KiB of
//!   base64) is replaced by a text marker with its length. Both markers
//!   say to read the value in parts with `substr()`.
//! * **Counting what was left out**: the statement keeps running without
//!   reading values, for at most 200 ms and 100 000 rows (and never past
//!   the call's deadline); when counting stops early,
//!   `truncated_exact` is false.

use std::time::Duration;

use longhand_sdk::ToolError;
use longhand_sdk::sql::{Column, Rows, Value};
use rusqlite::types::ValueRef;
use rusqlite::{ErrorCode, Statement};

use crate::engine::Db;

/// Rows returned when the input names no `max_rows`.
pub(crate) const DEFAULT_MAX_ROWS: u32 = 200;
/// The most rows one call may ask for.
pub(crate) const MAX_ROWS: u32 = 10_000;
/// Row data returned at most, counted as JSON bytes.
const MAX_BYTES: usize = 768 << 10;
/// A longer text value is cut; a longer blob (as base64) is replaced.
const MAX_VALUE_BYTES: usize = 16 << 10;
/// How long the rows past the caps are counted, at most.
/// Short: the host's fuel limit (20e9 units by default, about a second
/// and a half of SQLite's work) must not run out while counting.
const COUNT_TIME: Duration = Duration::from_millis(200);
/// How many rows past the caps are counted, at most.
const COUNT_ROWS: u64 = 100_000;

/// Compile `sql`: exactly one statement.
///
/// rusqlite's `prepare` compiles the first statement and then the rest of
/// the text: when the rest holds another statement it returns
/// `MultipleStatement` (nothing has run: compiling executes nothing); when
/// it is only blanks and comments, the first statement is returned.
fn prepare<'c>(db: &'c Db, sql: &str) -> Result<Statement<'c>, ToolError> {
    db.conn.prepare(sql).map_err(|e| match e {
        rusqlite::Error::Empty => {
            ToolError::invalid_input("`sql` holds no statement (only blanks or comments)")
        }
        e => db.error(e),
    })
}

/// Bind `params` to the statement's placeholders. `?` takes the next
/// value; `?N` and `$N` take value N (1-based), so text written for the
/// `postgres` tool binds the same way. Named placeholders are refused.
fn bind(stmt: &mut Statement<'_>, params: &[Value]) -> Result<(), ToolError> {
    let count = stmt.parameter_count();
    let mut highest = 0;
    for index in 1..=count {
        let number =
            match stmt.parameter_name(index) {
                None => index,
                Some(name) => {
                    let digits = name.strip_prefix(['?', '$']).unwrap_or("");
                    digits.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ToolError::invalid_input(format!(
                        "placeholder {name} is named: write ?1, ?2... (or ?) and pass `params` \
                         in that order"
                    ))
                })?
                }
            };
        let value = params.get(number - 1).ok_or_else(|| {
            ToolError::invalid_input(format!(
                "the statement uses parameter {number} but `params` has {} value(s)",
                params.len()
            ))
        })?;
        highest = highest.max(number);
        let bound = match value {
            Value::Null => stmt.raw_bind_parameter(index, rusqlite::types::Null),
            Value::Boolean(b) => stmt.raw_bind_parameter(index, i64::from(*b)),
            Value::Integer(i) => stmt.raw_bind_parameter(index, *i),
            Value::Real(r) => stmt.raw_bind_parameter(index, *r),
            Value::Text(t) => stmt.raw_bind_parameter(index, t.as_str()),
            Value::Bytes(b) => stmt.raw_bind_parameter(index, b.as_slice()),
        };
        bound.map_err(|e| ToolError::invalid_input(format!("`params[{}]`: {e}", number - 1)))?;
    }
    if params.len() > highest {
        return Err(ToolError::invalid_input(format!(
            "`params` has {} value(s) but the statement uses {highest}",
            params.len()
        )));
    }
    Ok(())
}

/// One value as the model sees it, and its size as JSON.
fn value_of(v: ValueRef<'_>) -> (Value, usize) {
    match v {
        ValueRef::Null => (Value::Null, 4),
        ValueRef::Integer(i) => (Value::Integer(i), 20),
        ValueRef::Real(r) => (Value::Real(r), 24),
        ValueRef::Text(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            let text = if text.len() > MAX_VALUE_BYTES {
                let mut cut = MAX_VALUE_BYTES;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                format!(
                    "{}…[cut: {} bytes in all; read the rest with substr()]",
                    &text[..cut],
                    text.len()
                )
            } else {
                text.into_owned()
            };
            let size = json_len(&text);
            (Value::Text(text), size)
        }
        ValueRef::Blob(bytes) => {
            if bytes.len().div_ceil(3) * 4 > MAX_VALUE_BYTES {
                let text = format!(
                    "[blob of {} bytes, too large to return: read it in parts with \
                     substr(), or its length()]",
                    bytes.len()
                );
                let size = json_len(&text);
                (Value::Text(text), size)
            } else {
                (
                    Value::Bytes(bytes.to_vec()),
                    bytes.len().div_ceil(3) * 4 + 14,
                )
            }
        }
    }
}

/// The length of `text` as a JSON string.
fn json_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The storage class of a value, for a column with no declared type.
fn storage_class(v: &Value) -> Option<&'static str> {
    match v {
        Value::Null => None,
        Value::Boolean(_) | Value::Integer(_) => Some("integer"),
        Value::Real(_) => Some("real"),
        Value::Text(_) => Some("text"),
        Value::Bytes(_) => Some("blob"),
    }
}

fn interrupted(e: &rusqlite::Error) -> bool {
    e.sqlite_error_code() == Some(ErrorCode::OperationInterrupted)
}

/// `query`: run one read-only statement and read its rows within the caps.
pub(crate) fn query(
    db: &Db,
    sql: &str,
    params: &[Value],
    max_rows: u32,
) -> Result<Rows, ToolError> {
    let mut stmt = prepare(db, sql)?;
    // The engine's own answer to "can this statement write?", whatever
    // its text looks like (a CTE in front, comments, odd case).
    if !stmt.readonly() {
        return Err(ToolError::invalid_input(
            "`query` runs only statements that read, and this one can write: use `execute` \
             (which needs the directory granted read-write)",
        ));
    }
    bind(&mut stmt, params)?;
    let max_rows = usize::try_from(max_rows.clamp(1, MAX_ROWS)).unwrap_or(usize::MAX);
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let declared: Vec<Option<String>> = stmt
        .columns()
        .map(|c| c.decl_type().map(str::to_owned))
        .collect();
    let width = names.len();

    let mut kept: Vec<Vec<Value>> = Vec::new();
    let mut bytes = 0usize;
    let mut cut: u64 = 0;
    let mut exact = true;
    let mut counting = false;
    let mut rows = stmt.raw_query();
    loop {
        match rows.next() {
            Ok(Some(row)) => {
                if !counting {
                    let mut values = Vec::with_capacity(width);
                    let mut size = 2 + width;
                    for i in 0..width {
                        let v = row.get_ref(i).map_err(|e| db.error(e))?;
                        let (value, n) = value_of(v);
                        size += n;
                        values.push(value);
                    }
                    if kept.len() < max_rows && bytes + size <= MAX_BYTES {
                        bytes += size;
                        kept.push(values);
                        continue;
                    }
                    counting = true;
                    db.clock.shorten(COUNT_TIME);
                }
                cut += 1;
                if cut >= COUNT_ROWS {
                    exact = false;
                    break;
                }
            }
            Ok(None) => break,
            Err(e) if counting && interrupted(&e) => {
                exact = false;
                break;
            }
            Err(e) => return Err(db.error(e)),
        }
    }
    let columns = names
        .into_iter()
        .zip(declared)
        .enumerate()
        .map(|(i, (name, declared))| Column {
            name,
            type_: declared.unwrap_or_else(|| {
                kept.iter()
                    .find_map(|r| r.get(i).and_then(storage_class))
                    .unwrap_or("")
                    .to_owned()
            }),
        })
        .collect();
    Ok(Rows {
        columns,
        rows: kept,
        truncated_rows: cut,
        truncated_exact: exact,
    })
}

/// What `execute` changed.
pub(crate) struct Changed {
    pub(crate) changes: u64,
    pub(crate) last_insert_rowid: i64,
}

/// `execute`: run one statement to its end (rows it returns, as from
/// `RETURNING`, are stepped through and dropped).
pub(crate) fn execute(db: &Db, sql: &str, params: &[Value]) -> Result<Changed, ToolError> {
    let mut stmt = prepare(db, sql)?;
    bind(&mut stmt, params)?;
    let mut rows = stmt.raw_query();
    while rows.next().map_err(|e| db.error(e))?.is_some() {}
    drop(rows);
    Ok(Changed {
        changes: db.conn.changes(),
        last_insert_rowid: db.conn.last_insert_rowid(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_length_counts_escapes() {
        assert_eq!(json_len("ab"), 4);
        assert_eq!(json_len("a\"b"), 6);
        assert_eq!(json_len("\n"), 8);
        assert_eq!(
            json_len("é"),
            serde_json::to_string("é").map(|s| s.len()).unwrap_or(0)
        );
    }

    #[test]
    fn a_long_text_is_cut_with_a_marker_and_a_long_blob_replaced() {
        let long = "x".repeat(MAX_VALUE_BYTES + 10);
        let (Value::Text(t), _) = value_of(ValueRef::Text(long.as_bytes())) else {
            panic!("text stays text");
        };
        assert!(t.starts_with(&long[..MAX_VALUE_BYTES]));
        assert!(t.contains(&format!("{} bytes in all", long.len())), "{t}");
        let blob = vec![7u8; MAX_VALUE_BYTES];
        let (Value::Text(t), _) = value_of(ValueRef::Blob(&blob)) else {
            panic!("a long blob becomes a marker");
        };
        assert!(t.contains(&format!("blob of {} bytes", blob.len())), "{t}");
        let (v, n) = value_of(ValueRef::Blob(&[1, 2, 3]));
        assert!(matches!(v, Value::Bytes(b) if b == [1, 2, 3]));
        assert_eq!(n, 4 + 14);
    }
}
