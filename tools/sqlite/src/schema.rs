//! `schema`: the tables and views of one file, read with the
//! introspection PRAGMAs the authorizer lets through.

use longhand_sdk::ToolError;
use longhand_sdk::sql::{Index, Table, TableColumn};

use crate::engine::Db;

/// `name` as a quoted SQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Every table and view of `main`, by name (SQLite's own `sqlite_*`
/// tables left out).
pub(crate) fn tables(db: &Db) -> Result<Vec<Table>, ToolError> {
    let err = |e| db.error(e);
    let mut stmt = db
        .conn
        .prepare(
            "SELECT name, type FROM sqlite_schema \
             WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
             ORDER BY name",
        )
        .map_err(err)?;
    let listed: Vec<(String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(err)?
        .collect::<Result<_, _>>()
        .map_err(err)?;
    listed
        .into_iter()
        .map(|(name, kind)| {
            // A view whose body does not compile any more (or calls what
            // this engine refuses) is still listed, without columns.
            let columns = match columns(db, &name) {
                Err(_) if kind == "view" => Vec::new(),
                other => other?,
            };
            Ok(Table {
                namespace: "main".to_owned(),
                columns,
                indexes: if kind == "table" {
                    indexes(db, &name)?
                } else {
                    Vec::new()
                },
                name,
                kind,
            })
        })
        .collect()
}

fn columns(db: &Db, table: &str) -> Result<Vec<TableColumn>, ToolError> {
    let err = |e| db.error(e);
    let mut stmt = db
        .conn
        .prepare(&format!("PRAGMA table_xinfo({})", ident(table)))
        .map_err(err)?;
    // cid, name, type, notnull, dflt_value, pk, hidden (1: a virtual
    // table's hidden column, left out; 2, 3: generated columns, kept).
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, bool>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, i64>(6)?,
            ))
        })
        .map_err(err)?;
    let mut out = Vec::new();
    for row in rows {
        let (name, type_, not_null, default_value, hidden) = row.map_err(err)?;
        if hidden == 1 {
            continue;
        }
        out.push(TableColumn {
            name,
            type_,
            nullable: !not_null,
            default_value,
        });
    }
    Ok(out)
}

fn indexes(db: &Db, table: &str) -> Result<Vec<Index>, ToolError> {
    let err = |e| db.error(e);
    let mut stmt = db
        .conn
        .prepare(&format!("PRAGMA index_list({})", ident(table)))
        .map_err(err)?;
    // seq, name, unique, origin, partial
    let listed: Vec<(String, bool)> = stmt
        .query_map([], |r| Ok((r.get(1)?, r.get(2)?)))
        .map_err(err)?
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let mut out = Vec::new();
    for (name, unique) in listed {
        let mut info = db
            .conn
            .prepare(&format!("PRAGMA index_info({})", ident(&name)))
            .map_err(err)?;
        // seqno, cid, name (null for an expression)
        let columns = info
            .query_map([], |r| {
                Ok(r.get::<_, Option<String>>(2)?
                    .unwrap_or_else(|| "<expression>".to_owned()))
            })
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        out.push(Index {
            name,
            columns,
            unique,
        });
    }
    Ok(out)
}
