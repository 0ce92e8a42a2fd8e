//! `json`: jq queries over a JSON value (`query`) or a JSON file
//! (`query_file`), using jaq, a pure-Rust implementation of jq.
//!
//! This crate owns three translations: serde JSON into jaq values, jaq's
//! lexer, parser and compiler errors into messages that point at the column
//! of the filter, and jaq values back into JSON. Two jaq behaviours are
//! deliberately not inherited:
//!
//! * `halt` / `halt_error` do not exit the process (jaq's `unwrap_valr` would
//!   call `std::process::exit`, which in a component traps the whole call);
//!   `halt` ends the output, a non-zero exit code is an `invalid-input` error.
//! * Values JSON cannot express are mapped the way jq prints them: NaN is
//!   `null`, infinities are ±`f64::MAX`, byte strings become (lossy) text and
//!   non-string object keys become their jq text.
//!
//! Module imports (`import "x" as y;`) cannot load anything: the loader has no
//! file reader, so a filter only ever sees its input.

mod prelude;

use std::fs;

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Ctx, Vars, compile, data, load};
use jaq_json::{Num, Val};
use longhand_sdk::{Effect, IoResultExt, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

const DEFAULT_MAX_RESULTS: u64 = 1000;

/// Largest file `query_file` reads.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

fn default_max_results() -> u64 {
    DEFAULT_MAX_RESULTS
}

/// Input of `query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryInput {
    /// A jq filter, e.g. `.items[] | select(.price > 10) | .name`.
    filter: String,
    /// The JSON value the filter runs on.
    input: serde_json::Value,
    /// Most results to return; `truncated` is set if the filter produced
    /// more. Default: 1000.
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1, max = 1_000_000))]
    max_results: u64,
}

/// Input of `query_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryFileInput {
    /// A jq filter, e.g. `.dependencies | keys`.
    filter: String,
    /// A file holding one JSON value: a guest path, or a path relative to
    /// `/workspace`.
    path: String,
    /// Most results to return; `truncated` is set if the filter produced
    /// more. Default: 1000.
    #[serde(default = "default_max_results")]
    #[schemars(range(min = 1, max = 1_000_000))]
    max_results: u64,
}

/// Output of both tools.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct QueryOutput {
    /// Every value the filter produced, in order.
    results: Vec<serde_json::Value>,
    truncated: bool,
}

/// The `query` tool.
pub(crate) struct Query;

impl Tool for Query {
    const NAME: &'static str = "query";
    const DESCRIPTION: &'static str = "Run a jq filter over a JSON value and return all the \
        values it produces, e.g. filter `.items[] | .name` on `{\"items\": [{\"name\": \"a\"}]}` \
        gives `[\"a\"]`. Supports jq's language and standard library (map, select, group_by, \
        to_entries, test, ...).";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = QueryInput;
    type Output = QueryOutput;

    fn call(input: QueryInput) -> Result<QueryOutput, ToolError> {
        let value: Val = serde_json::from_value(input.input)
            .map_err(|e| ToolError::invalid_input(format!("`input`: {e}")))?;
        run(&input.filter, value, input.max_results)
    }
}

/// The `query_file` tool.
pub(crate) struct QueryFile;

impl Tool for QueryFile {
    const NAME: &'static str = "query_file";
    const DESCRIPTION: &'static str = "Run a jq filter over the JSON value in a file (up to 64 \
        MiB) and return all the values it produces. Cheaper than reading a large JSON file \
        whole: only the results come back.";
    const EFFECT: Effect = Effect::ReadOnly;
    type Input = QueryFileInput;
    type Output = QueryOutput;

    fn call(input: QueryFileInput) -> Result<QueryOutput, ToolError> {
        if input.path.is_empty() {
            return Err(ToolError::invalid_input("`path` is empty"));
        }
        let path = std::path::Path::new("/workspace").join(&input.path);
        let label = path.display().to_string();
        let meta = fs::metadata(&path).for_resource(&label)?;
        if meta.is_dir() {
            return Err(ToolError::invalid_input(format!("{label} is a directory")));
        }
        if meta.len() > MAX_FILE_BYTES {
            return Err(ToolError::invalid_input(format!(
                "{label} is {} bytes; `query_file` reads at most {MAX_FILE_BYTES}",
                meta.len()
            )));
        }
        let bytes = fs::read(&path).for_resource(&label)?;
        let value: Val = serde_json::from_slice(&bytes)
            .map_err(|e| ToolError::invalid_input(format!("{label} is not JSON: {e}")))?;
        run(&input.filter, value, input.max_results)
    }
}

/// Parses, compiles and runs `filter` on `input`, with the prelude
/// definitions and native filters it can reach (see [`prelude`]).
fn run(filter: &str, input: Val, max_results: u64) -> Result<QueryOutput, ToolError> {
    let (defs, names) = prelude::reachable(filter);
    // A filter that names nothing (`.`, `.a[0]`) calls no native filter, and
    // building jaq's table of them is most of what such a filter costs.
    let funs = (!names.is_empty())
        .then(|| {
            jaq_core::funs()
                .chain(jaq_std::funs())
                .chain(jaq_json::funs())
                .filter(|(name, ..)| names.contains(name))
        })
        .into_iter()
        .flatten();
    let arena = Arena::default();
    let modules = Loader::new(defs)
        .load(
            &arena,
            File {
                code: filter,
                path: (),
            },
        )
        .map_err(|errors| load_error(filter, errors))?;
    let compiled = jaq_core::Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(compile_error)?;

    let ctx = Ctx::<data::JustLut<Val>>::new(&compiled.lut, Vars::new([]));
    let mut results = Vec::new();
    let mut truncated = false;
    for item in compiled.id.run((ctx, input)) {
        let value = match item {
            Ok(value) => value,
            Err(exn) => match exn.get_err() {
                Ok(error) => {
                    return Err(ToolError::invalid_input(format!("`filter`: {error}")));
                }
                Err(exn) => match exn.get_halt() {
                    Ok(0) => break,
                    Ok(code) => {
                        return Err(ToolError::invalid_input(format!(
                            "`filter` halted with exit code {code}"
                        )));
                    }
                    Err(_) => {
                        return Err(ToolError::failed(
                            "jaq leaked internal control flow out of the filter",
                        ));
                    }
                },
            },
        };
        if results.len() as u64 >= max_results {
            truncated = true;
            break;
        }
        results.push(to_json(&value));
    }
    Ok(QueryOutput { results, truncated })
}

/// Lexer and parser errors, with the column (in characters) they point at.
fn load_error(code: &str, errors: load::Errors<&str, ()>) -> ToolError {
    let column = |at: &str| {
        // jaq's error slices borrow from `code`; their offset is the position.
        let offset = (at.as_ptr() as usize).saturating_sub(code.as_ptr() as usize);
        code.get(..offset.min(code.len()))
            .map_or(0, |before| before.chars().count())
            + 1
    };
    let mut messages = Vec::new();
    for (_file, error) in errors {
        match error {
            load::Error::Io(errs) => {
                messages.extend(errs.into_iter().map(|(path, e)| {
                    format!("cannot import {path:?}: {e} (imports are not supported)")
                }));
            }
            load::Error::Lex(errs) => {
                messages.extend(errs.into_iter().map(|(expect, at)| {
                    format!(
                        "expected {} at column {}",
                        lex_expectation(&expect),
                        column(at)
                    )
                }));
            }
            load::Error::Parse(errs) => {
                messages.extend(errs.into_iter().map(|(expect, at)| {
                    let found = if at.is_empty() {
                        "the end of the filter".to_owned()
                    } else {
                        format!("`{at}`")
                    };
                    format!(
                        "expected {} at column {}, found {found}",
                        expect.as_str(),
                        column(at)
                    )
                }));
            }
        }
    }
    ToolError::invalid_input(format!("`filter` does not parse: {}", messages.join("; ")))
}

/// What the lexer wanted. Written out here because jaq's own `as_str`
/// panics on delimiters it does not expect.
fn lex_expectation(expect: &load::lex::Expect<&str>) -> String {
    use load::lex::Expect as E;
    match expect {
        E::Digit => "a digit".to_owned(),
        E::Ident => "an identifier".to_owned(),
        E::Delim(open) => format!("the closing delimiter for `{open}`"),
        E::Escape => "a string escape sequence".to_owned(),
        E::Unicode => "a 4-digit hexadecimal code point".to_owned(),
        E::Token => "a token".to_owned(),
        other => format!("{other:?}"),
    }
}

/// Undefined names, as jq reports them (`foo/1` for a filter of arity 1).
fn compile_error(errors: compile::Errors<&str, ()>) -> ToolError {
    let messages: Vec<String> = errors
        .into_iter()
        .flat_map(|(_file, errs)| errs)
        .map(|(name, undefined)| match undefined {
            compile::Undefined::Filter(arity) => format!("undefined filter `{name}/{arity}`"),
            other => format!("undefined {} `{name}`", other.as_str()),
        })
        .collect();
    ToolError::invalid_input(format!("`filter`: {}", messages.join("; ")))
}

/// A jaq value as JSON, mapping what JSON cannot hold the way jq prints it.
fn to_json(value: &Val) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Val::Null => J::Null,
        Val::Bool(b) => J::Bool(*b),
        Val::Num(n) => number(n),
        Val::TStr(s) | Val::BStr(s) => J::String(String::from_utf8_lossy(s).into_owned()),
        Val::Arr(items) => J::Array(items.iter().map(to_json).collect()),
        Val::Obj(map) => J::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Val::TStr(s) | Val::BStr(s) => String::from_utf8_lossy(s).into_owned(),
                        other => other.to_string(),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
    }
}

fn number(n: &Num) -> serde_json::Value {
    let float = |f: f64| {
        let f = if f.is_infinite() {
            f64::MAX.copysign(f)
        } else {
            f
        };
        serde_json::Number::from_f64(f).map_or(serde_json::Value::Null, Into::into)
    };
    match n {
        Num::Int(i) => serde_json::Value::from(*i as i64),
        Num::Float(f) => float(*f),
        // Big integers and decimal literals: their text is valid JSON; serde
        // keeps what fits in 64 bits and rounds the rest to a float.
        other => serde_json::from_str(&other.to_string()).unwrap_or(serde_json::Value::Null),
    }
}

longhand_sdk::export! {
    name: "json",
    description: "Query JSON with jq filters.",
    tools: [Query, QueryFile],
    requests: {
        dirs: [("/workspace", read_only, "JSON files for query_file")],
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn query(filter: &str, input: serde_json::Value) -> Result<QueryOutput, ToolError> {
        Query::call(QueryInput {
            filter: filter.into(),
            input,
            max_results: 100,
        })
    }

    fn results(filter: &str, input: serde_json::Value) -> Vec<serde_json::Value> {
        query(filter, input).unwrap().results
    }

    #[test]
    fn runs_jq_filters() {
        let input = json!({"items": [{"name": "a", "n": 1}, {"name": "b", "n": 5}]});
        assert_eq!(
            results(".items[] | .name", input.clone()),
            [json!("a"), json!("b")]
        );
        assert_eq!(
            results("[.items[] | select(.n > 2) | .name]", input.clone()),
            [json!(["b"])]
        );
        assert_eq!(
            results("map_values(length)", input.clone()),
            [json!({"items": 2})]
        );
        assert_eq!(results(".items | map(.n) | add", input), [json!(6)]);
        assert_eq!(
            results(r#"[.[] | test("^a")]"#, json!(["ab", "ba"])),
            [json!([true, false])]
        );
    }

    #[test]
    fn maps_values_json_cannot_hold() {
        assert_eq!(results("nan", json!(null)), [json!(null)]);
        assert_eq!(results("infinite", json!(null)), [json!(f64::MAX)]);
        assert_eq!(results("1.5", json!(null)), [json!(1.5)]);
        assert_eq!(results("100000000000000000000", json!(null)), [json!(1e20)]);
    }

    #[test]
    fn caps_results() {
        let out = Query::call(QueryInput {
            filter: "range(10)".into(),
            input: json!(null),
            max_results: 3,
        })
        .unwrap();
        assert_eq!(out.results, [json!(0), json!(1), json!(2)]);
        assert!(out.truncated);
        // An infinite stream stops at the cap too.
        let out = Query::call(QueryInput {
            filter: "repeat(1)".into(),
            input: json!(null),
            max_results: 2,
        })
        .unwrap();
        assert!(out.truncated);
    }

    #[test]
    fn errors_point_at_the_filter() {
        let err = query(".a | ", json!({})).unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidInput(m) if m.contains("does not parse") && m.contains("column")),
            "{err}"
        );
        let err = query("nosuchfn(1)", json!({})).unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidInput(m) if m.contains("undefined filter `nosuchfn/1`")),
            "{err}"
        );
        let err = query(".a.b", json!({"a": 1})).unwrap_err();
        assert!(
            matches!(&err, ToolError::InvalidInput(m) if m.starts_with("`filter`: ")),
            "{err}"
        );
        let err = query("\"unclosed", json!({})).unwrap_err();
        assert!(matches!(&err, ToolError::InvalidInput(_)), "{err}");
    }

    #[test]
    fn halt_ends_the_output() {
        assert_eq!(results("1, halt, 2", json!(null)), [json!(1)]);
        assert!(query("halt_error", json!("bye")).is_err());
    }

    #[test]
    fn queries_files() {
        let dir = std::env::temp_dir().join(format!("longhand-tool-json-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let file = dir.join("package.json");
        fs::write(&file, r#"{"dependencies": {"b": "1", "a": "2"}}"#).unwrap();
        let out = QueryFile::call(QueryFileInput {
            filter: ".dependencies | keys".into(),
            path: file.to_str().unwrap().into(),
            max_results: 10,
        })
        .unwrap();
        assert_eq!(out.results, [json!(["a", "b"])]);
        fs::write(&file, "{not json").unwrap();
        let err = QueryFile::call(QueryFileInput {
            filter: ".".into(),
            path: file.to_str().unwrap().into(),
            max_results: 10,
        })
        .unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("is not JSON")));
        fs::remove_dir_all(&dir).unwrap();
    }

    /// 101 filters over the whole language (std definitions, formats,
    /// regexes, dates, paths, errors, undefined names, `halt`, imports),
    /// each with the output the tool gave before the prelude was loaded per
    /// filter (recorded from that build; see `prelude`).
    #[test]
    fn filters_give_the_recorded_outputs() {
        let cases = include_str!("../testdata/filters.jsonl");
        let mut failures = Vec::new();
        for line in cases.lines() {
            let case: serde_json::Value = serde_json::from_str(line).unwrap();
            let filter = case["filter"].as_str().unwrap();
            let got = match Query::call(QueryInput {
                filter: filter.into(),
                input: case["input"].clone(),
                max_results: case["max_results"].as_u64().unwrap_or(100),
            }) {
                Ok(out) => json!({"results": out.results, "truncated": out.truncated}),
                Err(e) => json!({"error": e.to_string()}),
            };
            // Compared as read back from text, like the expectation:
            // serde_json's default float parsing may be one ulp off, and
            // this way both sides are parsed from the same digits.
            let got: serde_json::Value = serde_json::from_str(&got.to_string()).unwrap();
            if got != case["expect"] {
                failures.push(format!(
                    "{filter}\n  expected {}\n  got      {got}",
                    case["expect"]
                ));
            }
        }
        assert_eq!(cases.lines().count(), 101);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
