//! `sqlite`: query a SQLite file in a granted directory (being written).

use longhand_sdk::{Effect, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

/// Input of `schema`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SchemaInput {
    /// The database file, a guest path.
    db: String,
}

/// `schema`.
pub(crate) struct Schema;

impl Tool for Schema {
    const NAME: &'static str = "schema";
    const DESCRIPTION: &'static str = "List tables.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = SchemaInput;
    type Output = String;

    fn call(input: SchemaInput) -> Result<String, ToolError> {
        let c = rusqlite::Connection::open_with_flags(
            &input.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(|e| ToolError::failed(e.to_string()))?;
        let n: i64 = c
            .query_row("select count(*) from sqlite_schema", [], |r| r.get(0))
            .map_err(|e| ToolError::failed(e.to_string()))?;
        Ok(format!("{n} entries"))
    }
}

longhand_sdk::export! {
    name: "sqlite",
    description: "Query SQLite files in granted directories.",
    tools: [Schema],
}
