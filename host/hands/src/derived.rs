//! Components written for other hosts: tools derived from the plain
//! functions a component exports, when it does not export our world.
//!
//! A component built for Wassette, for wasmtime's own examples or for any
//! host that calls exported functions exports `read-file: func(path:
//! string) -> result<string, string>` and no `longhand:tool/tools`. The
//! component model lets such a component run here too: every exported
//! function whose parameters and result are plain values becomes one tool,
//! its input schema derived from the WIT types, its result turned into
//! JSON. Nothing else changes: its imports are judged by the same table
//! ([`super::caps`]), each call gets a fresh instance with the same grants
//! and limits, and its input is validated against the derived schema
//! before the guest runs.
//!
//! Naming (the tool-name rules: 1-64 of `a-z`, `0-9`, `-`, `_`): a function
//! exported at the top level keeps its WIT name (`read-file`); function `f`
//! of an exported interface `ns:pkg/iface@1.0.0` is `iface_f` (`_` never
//! occurs in a WIT name, so the split is unambiguous). A name that breaks
//! the rules, or is taken already, skips the function, and says so.
//!
//! JSON forms (input and output are the same form):
//!
//! | WIT | JSON |
//! |---|---|
//! | `bool`, `string` | boolean, string |
//! | `u8`…`s64` | integer, with the type's range as `minimum`/`maximum` |
//! | `f32`, `f64` | number (NaN and infinities come out as `null`) |
//! | `char` | string of one character |
//! | `list<T>` (`list<u8>` too) | array of `T` |
//! | `tuple<A, B>` | array of exactly those items |
//! | `record` | object, every field required except `option` ones |
//! | `option<T>` | `T` or `null` (a parameter or field may be left out) |
//! | `enum` | one of its case names |
//! | `flags` | array of the names that are set |
//! | `variant` | a case without payload is its name; one with payload is `{"case": payload}` |
//! | `result<T, E>` inside a value | `{"ok": T}` or `{"err": E}` |
//!
//! `list<u8>` is an array of numbers, not base64: the model writes and reads
//! it without an encoding it would have to be told about, and nothing in
//! the WIT says the bytes are binary rather than small numbers.
//! `option<option<T>>` has no unambiguous JSON form and is refused.
//!
//! The function's result: `result<T, E>` at the top is the function's way
//! of failing, so `ok` is the output and `err` is a tool error the model
//! sees (`failed`, with `E` as text), never a trap. Any other result is the
//! output; no result is `null`.
//!
//! Refused, with the reason shown by `tool describe`: resources (`own`,
//! `borrow`: methods and constructors too), `future`, `stream`,
//! `error-context`, async functions, and multiple named results. A
//! component with no function left is refused at load with what it does
//! export and how to adapt it.
//!
//! The effect of a derived tool is not the component's to say: it is
//! `writes` unless the operator declares otherwise in `agent.toml`
//! (`effects`), which the agent's binding applies.
//!
//! What this module must not do: run anything but a call's function, or
//! decide grants.

use std::collections::HashMap;

use serde_json::{Map, Number, Value, json};
use wasmtime::Engine;
use wasmtime::component::types::{self, ComponentFunc, ComponentItem};
use wasmtime::component::{Component, ComponentExportIndex, InstancePre, Val};

use super::bindings::longhand::tool::types::ToolError;
use super::bound;
use super::call::CallState;
use super::info::{
    CapabilityRequests, ComponentInfo, Derivation, DerivedTool, Effect, SkippedExport, ToolSpec,
};
use super::schema::{InputSchema, SchemaLoader};

/// Deepest nesting of WIT types turned into a schema or a value: 24. Real
/// interfaces nest three or four deep; the schema loader refuses deeper
/// than 64 levels of JSON, and a type adds two or three.
const MAX_TYPE_DEPTH: usize = 24;

/// The interface our own world exports: a component exporting it is ours,
/// and a mismatch there is an error, not a reason to derive.
const OUR_INTERFACE: &str = "longhand:tool/tools@";

/// One derived tool's call: where the function is and its types.
pub(crate) struct DerivedFunc {
    pub(crate) export: ComponentExportIndex,
    params: Vec<(String, types::Type)>,
    result: Option<types::Type>,
}

/// A foreign component's callable functions, pre-linked.
pub(crate) struct Derived {
    pub(crate) pre: InstancePre<CallState>,
    pub(crate) funcs: HashMap<String, DerivedFunc>,
}

/// Whether the component exports our world's interface (any version):
/// then it is ours, and a failure to bind it is reported as such.
pub(crate) fn exports_our_world(engine: &Engine, component: &Component) -> bool {
    component
        .component_type()
        .exports(engine)
        .any(|(name, _)| name.starts_with(OUR_INTERFACE))
}

/// Derive tools from `component`'s exported functions. Refuses the
/// component when none can be called as a tool, naming what it exports.
pub(crate) fn derive(
    engine: &Engine,
    label: &str,
    component: &Component,
    pre: InstancePre<CallState>,
) -> Result<(ComponentInfo, HashMap<String, InputSchema>, Derived), String> {
    let mut derivation = Derivation::default();
    let mut funcs = HashMap::new();
    let mut specs = Vec::new();
    let mut validators = HashMap::new();
    let mut schemas = SchemaLoader::new();
    let mut exported = Vec::new();

    let mut consider = |name: String,
                        export: String,
                        index: Option<ComponentExportIndex>,
                        func: &ComponentFunc,
                        derivation: &mut Derivation| {
        let signature = signature(func);
        let skip = |reason: String, derivation: &mut Derivation| {
            derivation.skipped.push(SkippedExport {
                export: export.clone(),
                reason,
            });
        };
        let name_ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !name_ok {
            return skip(
                format!(
                    "its tool name `{}` is not 1-64 characters of a-z, 0-9, `-`, `_`",
                    bound::name(&name)
                ),
                derivation,
            );
        }
        if funcs.contains_key(&name) {
            return skip(
                format!("tool name `{name}` is taken by another export"),
                derivation,
            );
        }
        let Some(index) = index else {
            return skip(
                "wasmtime cannot find its export index".to_owned(),
                derivation,
            );
        };
        let (schema, params, result) = match function_types(func) {
            Ok(found) => found,
            Err(reason) => return skip(reason, derivation),
        };
        let text = schema.to_string();
        let validator = match schemas.compile(&text) {
            Ok(v) => v,
            Err(e) => return skip(format!("its derived schema is refused: {e}"), derivation),
        };
        validators.insert(name.clone(), validator);
        specs.push(ToolSpec {
            name: name.clone(),
            description: format!(
                "Calls `{export}`, a function of a component written for another host: \
                 {signature}. Input and output are derived from its WIT types."
            ),
            input_schema: schema,
            effect: Effect::Writes,
        });
        derivation.tools.push(DerivedTool {
            tool: name.clone(),
            export: export.clone(),
            signature,
        });
        funcs.insert(
            name,
            DerivedFunc {
                export: index,
                params,
                result,
            },
        );
    };

    let ty = component.component_type();
    for (name, item) in ty.exports(engine) {
        match item.ty {
            ComponentItem::ComponentFunc(func) => {
                exported.push(format!("function `{name}`"));
                let index = component.get_export_index(None, name);
                consider(
                    name.to_ascii_lowercase(),
                    name.to_owned(),
                    index,
                    &func,
                    &mut derivation,
                );
            }
            ComponentItem::ComponentInstance(instance) => {
                let iface = component.get_export_index(None, name);
                let short = short_name(name).to_ascii_lowercase();
                let mut names = Vec::new();
                for (fname, fitem) in instance.exports(engine) {
                    let ComponentItem::ComponentFunc(func) = fitem.ty else {
                        continue;
                    };
                    names.push(fname.to_owned());
                    let export = format!("{name}#{fname}");
                    if fname.starts_with('[') {
                        derivation.skipped.push(SkippedExport {
                            export,
                            reason: "a resource's constructor or method: resources have no \
                                     JSON form"
                                .to_owned(),
                        });
                        continue;
                    }
                    let index = iface
                        .as_ref()
                        .and_then(|i| component.get_export_index(Some(i), fname));
                    consider(
                        format!("{short}_{}", fname.to_ascii_lowercase()),
                        export,
                        index,
                        &func,
                        &mut derivation,
                    );
                }
                exported.push(format!(
                    "interface `{name}` (functions: {})",
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                ));
            }
            ComponentItem::Resource(_) | ComponentItem::Type(_) => {}
            ComponentItem::Component(_) => exported.push(format!("component `{name}`")),
            ComponentItem::Module(_) => exported.push(format!("core module `{name}`")),
            ComponentItem::CoreFunc(_) => exported.push(format!("core function `{name}`")),
        }
    }

    if specs.is_empty() {
        let exports = if exported.is_empty() {
            "nothing".to_owned()
        } else {
            exported.join("; ")
        };
        let skipped: Vec<String> = derivation
            .skipped
            .iter()
            .map(|s| format!("`{}`: {}", s.export, s.reason))
            .collect();
        let skipped = if skipped.is_empty() {
            String::new()
        } else {
            format!(" Functions left out: {}.", skipped.join("; "))
        };
        return Err(format!(
            "it exports no instance named `longhand:tool/tools@0.1.0` and no function that \
                 can be called as a tool. It exports: {exports}.{skipped} To adapt it, export \
                 plain functions whose parameters and result are WIT values (records, \
                 variants, lists, options; no resources, futures or streams), each becomes a \
                 tool; or export the `longhand:tool/tools` interface of wit/tool.wit (the \
                 longhand-sdk crate does this)"
        ));
    }

    let name = std::path::Path::new(label)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(label)
        .to_owned();
    let info = ComponentInfo {
        name,
        version: String::new(),
        description: "A component written for another host: it exports no longhand:tool \
                      world, so each function it exports is a tool, derived from its WIT \
                      signature."
            .to_owned(),
        tools: specs,
        requests: CapabilityRequests::default(),
        derived: Some(derivation),
    };
    Ok((info, validators, Derived { pre, funcs }))
}

/// The interface name of an export: `iface` of `ns:pkg/iface@1.0.0`, or
/// the plain name of an instance exported under one.
fn short_name(export: &str) -> &str {
    let no_version = export.split('@').next().unwrap_or(export);
    no_version.rsplit('/').next().unwrap_or(no_version)
}

/// What a function's types give a tool: its input schema, and the
/// parameter and result types its calls convert with.
type Typed = (Value, Vec<(String, types::Type)>, Option<types::Type>);

/// The input schema, parameter types and result type of `func`, or why it
/// cannot be a tool.
fn function_types(func: &ComponentFunc) -> Result<Typed, String> {
    if func.async_() {
        return Err(
            "an async function: this host does not enable the component model's \
                    async ABI"
                .to_owned(),
        );
    }
    let mut results = func.results();
    if results.len() > 1 {
        return Err("more than one result".to_owned());
    }
    let result = results.next();
    if let Some(ty) = &result {
        schema_of(ty, 0).map_err(|why| format!("its result {why}"))?;
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut params = Vec::new();
    for (name, ty) in func.params() {
        let schema = schema_of(&ty, 0).map_err(|why| format!("parameter `{name}` {why}"))?;
        if !matches!(ty, types::Type::Option(_)) {
            required.push(Value::String(name.to_owned()));
        }
        properties.insert(name.to_owned(), schema);
        params.push((name.to_owned(), ty));
    }
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    Ok((schema, params, result))
}

/// The JSON Schema of values of type `ty`, or why it has none ("takes a
/// resource"), to follow "parameter `x` ".
fn schema_of(ty: &types::Type, depth: usize) -> Result<Value, String> {
    use types::Type as T;
    if depth > MAX_TYPE_DEPTH {
        return Err(format!("nests types deeper than {MAX_TYPE_DEPTH} levels"));
    }
    let int = |min: i64, max: i64| json!({ "type": "integer", "minimum": min, "maximum": max });
    let next = depth + 1;
    Ok(match ty {
        T::Bool => json!({ "type": "boolean" }),
        T::S8 => int(i8::MIN.into(), i8::MAX.into()),
        T::U8 => int(0, u8::MAX.into()),
        T::S16 => int(i16::MIN.into(), i16::MAX.into()),
        T::U16 => int(0, u16::MAX.into()),
        T::S32 => int(i32::MIN.into(), i32::MAX.into()),
        T::U32 => int(0, u32::MAX.into()),
        // Exact bounds: as f64 they round outward, and the conversion
        // (`value_of`) refuses what does not fit.
        T::S64 => json!({ "type": "integer", "minimum": i64::MIN, "maximum": i64::MAX }),
        T::U64 => json!({ "type": "integer", "minimum": 0, "maximum": u64::MAX }),
        T::Float32 | T::Float64 => json!({ "type": "number" }),
        T::Char => json!({ "type": "string", "minLength": 1, "maxLength": 1 }),
        T::String => json!({ "type": "string" }),
        T::List(list) => json!({ "type": "array", "items": schema_of(&list.ty(), next)? }),
        T::FixedLengthList(list) => json!({
            "type": "array",
            "items": schema_of(&list.ty(), next)?,
            "minItems": list.len(),
            "maxItems": list.len(),
        }),
        T::Map(map) => {
            if !matches!(map.key(), T::String) {
                return Err("is a map whose keys are not strings (no JSON object form)".to_owned());
            }
            json!({ "type": "object", "additionalProperties": schema_of(&map.value(), next)? })
        }
        T::Record(record) => {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for field in record.fields() {
                if !matches!(field.ty, T::Option(_)) {
                    required.push(Value::String(field.name.to_owned()));
                }
                properties.insert(field.name.to_owned(), schema_of(&field.ty, next)?);
            }
            json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            })
        }
        T::Tuple(tuple) => {
            let items = tuple
                .types()
                .map(|t| schema_of(&t, next))
                .collect::<Result<Vec<_>, _>>()?;
            let n = items.len();
            json!({ "type": "array", "prefixItems": items, "items": false, "minItems": n, "maxItems": n })
        }
        T::Variant(variant) => {
            let mut cases = Vec::new();
            for case in variant.cases() {
                cases.push(match &case.ty {
                    None => json!({ "const": case.name }),
                    Some(ty) => tagged(case.name, schema_of(ty, next)?),
                });
            }
            json!({ "oneOf": cases })
        }
        T::Enum(e) => json!({ "type": "string", "enum": e.names().collect::<Vec<_>>() }),
        T::Flags(flags) => json!({
            "type": "array",
            "items": { "enum": flags.names().collect::<Vec<_>>() },
            "uniqueItems": true,
        }),
        T::Option(option) => {
            let inner = option.ty();
            if matches!(inner, T::Option(_)) {
                return Err("is an option of an option (no unambiguous JSON form)".to_owned());
            }
            json!({ "anyOf": [{ "type": "null" }, schema_of(&inner, next)?] })
        }
        T::Result(result) => {
            let side = |ty: Option<types::Type>| match ty {
                Some(ty) => schema_of(&ty, next),
                None => Ok(json!({ "type": "null" })),
            };
            json!({ "oneOf": [tagged("ok", side(result.ok())?), tagged("err", side(result.err())?)] })
        }
        T::Own(_) | T::Borrow(_) => {
            return Err("is a resource handle (no JSON form)".to_owned());
        }
        T::Future(_) | T::Stream(_) | T::ErrorContext => {
            return Err("is an async future, stream or error-context (no JSON form)".to_owned());
        }
    })
}

/// `{"name": payload}` with nothing else: a variant case with payload.
fn tagged(name: &str, payload: Value) -> Value {
    json!({
        "type": "object",
        "properties": { name: payload },
        "required": [name],
        "additionalProperties": false,
    })
}

/// A function's WIT signature, for `describe` and the tool description.
fn signature(func: &ComponentFunc) -> String {
    let params: Vec<String> = func
        .params()
        .map(|(name, ty)| format!("{name}: {}", wit_of(&ty, 0)))
        .collect();
    let results: Vec<String> = func.results().map(|ty| wit_of(&ty, 0)).collect();
    let arrow = match results.len() {
        0 => String::new(),
        1 => format!(" -> {}", results[0]),
        _ => format!(" -> ({})", results.join(", ")),
    };
    let sig = format!("func({}){arrow}", params.join(", "));
    bound::cut_str(&sig, 2048).into_owned()
}

/// A type written as WIT (records, variants, enums and flags spelled out,
/// since their names are not in the type).
fn wit_of(ty: &types::Type, depth: usize) -> String {
    use types::Type as T;
    if depth > 4 {
        return "…".to_owned();
    }
    let next = depth + 1;
    match ty {
        T::Bool => "bool".to_owned(),
        T::S8 => "s8".to_owned(),
        T::U8 => "u8".to_owned(),
        T::S16 => "s16".to_owned(),
        T::U16 => "u16".to_owned(),
        T::S32 => "s32".to_owned(),
        T::U32 => "u32".to_owned(),
        T::S64 => "s64".to_owned(),
        T::U64 => "u64".to_owned(),
        T::Float32 => "f32".to_owned(),
        T::Float64 => "f64".to_owned(),
        T::Char => "char".to_owned(),
        T::String => "string".to_owned(),
        T::List(l) => format!("list<{}>", wit_of(&l.ty(), next)),
        T::FixedLengthList(l) => format!("list<{}, {}>", wit_of(&l.ty(), next), l.len()),
        T::Map(m) => format!(
            "map<{}, {}>",
            wit_of(&m.key(), next),
            wit_of(&m.value(), next)
        ),
        T::Record(r) => format!(
            "record {{ {} }}",
            r.fields()
                .map(|f| format!("{}: {}", f.name, wit_of(&f.ty, next)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        T::Tuple(t) => format!(
            "tuple<{}>",
            t.types()
                .map(|t| wit_of(&t, next))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        T::Variant(v) => format!(
            "variant {{ {} }}",
            v.cases()
                .map(|c| match &c.ty {
                    Some(ty) => format!("{}({})", c.name, wit_of(ty, next)),
                    None => c.name.to_owned(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        T::Enum(e) => format!("enum {{ {} }}", e.names().collect::<Vec<_>>().join(", ")),
        T::Flags(f) => format!("flags {{ {} }}", f.names().collect::<Vec<_>>().join(", ")),
        T::Option(o) => format!("option<{}>", wit_of(&o.ty(), next)),
        T::Result(r) => {
            let side = |t: Option<types::Type>| t.map(|t| wit_of(&t, next));
            match (side(r.ok()), side(r.err())) {
                (None, None) => "result".to_owned(),
                (Some(ok), None) => format!("result<{ok}>"),
                (None, Some(err)) => format!("result<_, {err}>"),
                (Some(ok), Some(err)) => format!("result<{ok}, {err}>"),
            }
        }
        T::Own(_) => "own<resource>".to_owned(),
        T::Borrow(_) => "borrow<resource>".to_owned(),
        T::Future(_) => "future".to_owned(),
        T::Stream(_) => "stream".to_owned(),
        T::ErrorContext => "error-context".to_owned(),
    }
}

impl DerivedFunc {
    /// The arguments of a call, from its input object (already validated
    /// against the derived schema). `Err` names the parameter and what was
    /// wrong: a value for the model, never a trap.
    pub(crate) fn arguments(&self, input: &Value) -> Result<Vec<Val>, String> {
        let Value::Object(object) = input else {
            return Err("the input must be an object".to_owned());
        };
        if let Some(unknown) = object
            .keys()
            .find(|k| !self.params.iter().any(|(name, _)| name == *k))
        {
            return Err(format!("`{unknown}` is not a parameter of this function"));
        }
        self.params
            .iter()
            .map(|(name, ty)| match object.get(name) {
                Some(value) => value_of(ty, value, name, 0),
                None if matches!(ty, types::Type::Option(_)) => Ok(Val::Option(None)),
                None => Err(format!("`{name}` is required")),
            })
            .collect()
    }

    /// How many results the function returns (0 or 1).
    pub(crate) fn result_count(&self) -> usize {
        usize::from(self.result.is_some())
    }
}

/// The tool's output from the function's results: the `ok` of a top-level
/// `result` or the value itself, as JSON text; the `err` of a top-level
/// `result` is a tool error.
pub(crate) fn output(results: Vec<Val>) -> Result<String, ToolError> {
    let Some(value) = results.into_iter().next() else {
        return Ok("null".to_owned());
    };
    match value {
        Val::Result(Ok(ok)) => Ok(ok.map(|v| json_of(&v)).unwrap_or(Value::Null).to_string()),
        Val::Result(Err(err)) => Err(ToolError::Failed(match err.map(|v| json_of(&v)) {
            Some(Value::String(text)) => text,
            Some(other) => other.to_string(),
            None => "the function returned an error without a message".to_owned(),
        })),
        other => Ok(json_of(&other).to_string()),
    }
}

/// A JSON value as a WIT value of type `ty`, or what is wrong at `at`.
fn value_of(ty: &types::Type, value: &Value, at: &str, depth: usize) -> Result<Val, String> {
    use types::Type as T;
    if depth > MAX_TYPE_DEPTH {
        return Err(format!("`{at}` nests deeper than {MAX_TYPE_DEPTH} levels"));
    }
    let next = depth + 1;
    let wrong = |what: &str| format!("`{at}` must be {what}");
    let int = |value: &Value| -> Result<i128, String> {
        value
            .as_i64()
            .map(i128::from)
            .or_else(|| value.as_u64().map(i128::from))
            .ok_or_else(|| wrong("an integer"))
    };
    macro_rules! integer {
        ($variant:ident, $t:ty) => {{
            let n = int(value)?;
            Val::$variant(
                <$t>::try_from(n).map_err(|_| {
                    wrong(&format!("an integer from {} to {}", <$t>::MIN, <$t>::MAX))
                })?,
            )
        }};
    }
    Ok(match ty {
        T::Bool => Val::Bool(value.as_bool().ok_or_else(|| wrong("true or false"))?),
        T::S8 => integer!(S8, i8),
        T::U8 => integer!(U8, u8),
        T::S16 => integer!(S16, i16),
        T::U16 => integer!(U16, u16),
        T::S32 => integer!(S32, i32),
        T::U32 => integer!(U32, u32),
        T::S64 => integer!(S64, i64),
        T::U64 => integer!(U64, u64),
        T::Float32 => Val::Float32(value.as_f64().ok_or_else(|| wrong("a number"))? as f32),
        T::Float64 => Val::Float64(value.as_f64().ok_or_else(|| wrong("a number"))?),
        T::Char => {
            let text = value
                .as_str()
                .ok_or_else(|| wrong("a one-character string"))?;
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(wrong("a one-character string")),
            }
        }
        T::String => Val::String(value.as_str().ok_or_else(|| wrong("a string"))?.to_owned()),
        T::List(list) => {
            let items = value.as_array().ok_or_else(|| wrong("an array"))?;
            let ty = list.ty();
            Val::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| value_of(&ty, v, &format!("{at}[{i}]"), next))
                    .collect::<Result<_, _>>()?,
            )
        }
        T::FixedLengthList(list) => {
            let items = value.as_array().ok_or_else(|| wrong("an array"))?;
            if items.len() != list.len() as usize {
                return Err(wrong(&format!("an array of {} items", list.len())));
            }
            let ty = list.ty();
            Val::FixedLengthList(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, v)| value_of(&ty, v, &format!("{at}[{i}]"), next))
                    .collect::<Result<_, _>>()?,
            )
        }
        T::Map(map) => {
            let object = value.as_object().ok_or_else(|| wrong("an object"))?;
            let ty = map.value();
            Val::Map(
                object
                    .iter()
                    .map(|(k, v)| {
                        Ok((
                            Val::String(k.clone()),
                            value_of(&ty, v, &format!("{at}.{k}"), next)?,
                        ))
                    })
                    .collect::<Result<_, String>>()?,
            )
        }
        T::Record(record) => {
            let object = value.as_object().ok_or_else(|| wrong("an object"))?;
            if let Some(unknown) = object
                .keys()
                .find(|k| !record.fields().any(|f| f.name == k.as_str()))
            {
                return Err(format!("`{at}` has no field `{unknown}`"));
            }
            let mut fields = Vec::new();
            for field in record.fields() {
                let path = format!("{at}.{}", field.name);
                let v = match object.get(field.name) {
                    Some(v) => value_of(&field.ty, v, &path, next)?,
                    None if matches!(field.ty, T::Option(_)) => Val::Option(None),
                    None => return Err(format!("`{path}` is required")),
                };
                fields.push((field.name.to_owned(), v));
            }
            Val::Record(fields)
        }
        T::Tuple(tuple) => {
            let items = value.as_array().ok_or_else(|| wrong("an array"))?;
            if items.len() != tuple.types().len() {
                return Err(wrong(&format!("an array of {} items", tuple.types().len())));
            }
            Val::Tuple(
                tuple
                    .types()
                    .zip(items)
                    .enumerate()
                    .map(|(i, (t, v))| value_of(&t, v, &format!("{at}[{i}]"), next))
                    .collect::<Result<_, _>>()?,
            )
        }
        T::Variant(variant) => {
            let names = || {
                variant
                    .cases()
                    .map(|c| c.name.to_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let (case, payload) =
                one_case(value).ok_or_else(|| wrong(&format!("one of the cases {}", names())))?;
            let Some(found) = variant.cases().find(|c| c.name == case) else {
                return Err(format!("`{at}`: no case `{case}` (cases: {})", names()));
            };
            let payload = match (&found.ty, payload) {
                (None, None | Some(Value::Null)) => None,
                (Some(ty), Some(p)) => {
                    Some(Box::new(value_of(ty, p, &format!("{at}.{case}"), next)?))
                }
                (Some(_), None) => {
                    return Err(format!("`{at}`: case `{case}` needs {{\"{case}\": value}}"));
                }
                (None, Some(_)) => return Err(format!("`{at}`: case `{case}` has no payload")),
            };
            Val::Variant(case.to_owned(), payload)
        }
        T::Enum(e) => {
            let text = value.as_str().ok_or_else(|| wrong("a string"))?;
            if !e.names().any(|n| n == text) {
                return Err(wrong(&format!(
                    "one of {}",
                    e.names().collect::<Vec<_>>().join(", ")
                )));
            }
            Val::Enum(text.to_owned())
        }
        T::Flags(flags) => {
            let items = value
                .as_array()
                .ok_or_else(|| wrong("an array of flag names"))?;
            let mut set = Vec::new();
            for item in items {
                let name = item
                    .as_str()
                    .filter(|n| flags.names().any(|f| f == *n))
                    .ok_or_else(|| {
                        wrong(&format!(
                            "an array of flag names ({})",
                            flags.names().collect::<Vec<_>>().join(", ")
                        ))
                    })?;
                if !set.iter().any(|s: &String| s == name) {
                    set.push(name.to_owned());
                }
            }
            Val::Flags(set)
        }
        T::Option(option) => match value {
            Value::Null => Val::Option(None),
            v => Val::Option(Some(Box::new(value_of(&option.ty(), v, at, next)?))),
        },
        T::Result(result) => {
            let (side, payload) = one_case(value)
                .filter(|(side, _)| *side == "ok" || *side == "err")
                .ok_or_else(|| wrong("{\"ok\": value} or {\"err\": value}"))?;
            let ty = if side == "ok" {
                result.ok()
            } else {
                result.err()
            };
            let inner = match (ty, payload) {
                (None, None | Some(Value::Null)) => None,
                (Some(ty), Some(p)) => {
                    Some(Box::new(value_of(&ty, p, &format!("{at}.{side}"), next)?))
                }
                _ => return Err(format!("`{at}.{side}` does not fit its type")),
            };
            Val::Result(if side == "ok" { Ok(inner) } else { Err(inner) })
        }
        T::Own(_) | T::Borrow(_) | T::Future(_) | T::Stream(_) | T::ErrorContext => {
            return Err(format!("`{at}` has a type with no JSON form"));
        }
    })
}

/// A variant in JSON: `"case"` or `{"case": payload}`.
fn one_case(value: &Value) -> Option<(&str, Option<&Value>)> {
    match value {
        Value::String(name) => Some((name, None)),
        Value::Object(object) if object.len() == 1 => {
            object.iter().next().map(|(k, v)| (k.as_str(), Some(v)))
        }
        _ => None,
    }
}

/// A WIT value as JSON (the same forms [`value_of`] reads).
fn json_of(value: &Val) -> Value {
    let float = |f: f64| {
        Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    };
    match value {
        Val::Bool(b) => Value::Bool(*b),
        Val::S8(n) => (*n).into(),
        Val::U8(n) => (*n).into(),
        Val::S16(n) => (*n).into(),
        Val::U16(n) => (*n).into(),
        Val::S32(n) => (*n).into(),
        Val::U32(n) => (*n).into(),
        Val::S64(n) => (*n).into(),
        Val::U64(n) => (*n).into(),
        Val::Float32(f) => float(f64::from(*f)),
        Val::Float64(f) => float(*f),
        Val::Char(c) => Value::String(c.to_string()),
        Val::String(s) => Value::String(s.clone()),
        Val::List(items) | Val::Tuple(items) | Val::FixedLengthList(items) => {
            Value::Array(items.iter().map(json_of).collect())
        }
        Val::Map(pairs) => {
            if pairs.iter().all(|(k, _)| matches!(k, Val::String(_))) {
                Value::Object(
                    pairs
                        .iter()
                        .filter_map(|(k, v)| match k {
                            Val::String(k) => Some((k.clone(), json_of(v))),
                            _ => None,
                        })
                        .collect(),
                )
            } else {
                Value::Array(
                    pairs
                        .iter()
                        .map(|(k, v)| Value::Array(vec![json_of(k), json_of(v)]))
                        .collect(),
                )
            }
        }
        Val::Record(fields) => Value::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), json_of(v)))
                .collect(),
        ),
        Val::Variant(case, None) | Val::Enum(case) => Value::String(case.clone()),
        Val::Variant(case, Some(payload)) => json!({ case.as_str(): json_of(payload) }),
        Val::Option(None) => Value::Null,
        Val::Option(Some(v)) => json_of(v),
        Val::Result(Ok(v)) => json!({ "ok": v.as_deref().map(json_of) }),
        Val::Result(Err(v)) => json!({ "err": v.as_deref().map(json_of) }),
        Val::Flags(names) => Value::Array(names.iter().cloned().map(Value::String).collect()),
        Val::Resource(_) | Val::Future(_) | Val::Stream(_) | Val::ErrorContext(_) => {
            Value::String("<handle>".to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_short_names() {
        assert_eq!(short_name("docs:adder/add@0.1.0"), "add");
        assert_eq!(short_name("wasi:cli/run"), "run");
        assert_eq!(short_name("plain"), "plain");
    }

    #[test]
    fn values_come_out_in_the_form_they_go_in() {
        let v = Val::Record(vec![
            ("name".to_owned(), Val::String("a".to_owned())),
            ("kind".to_owned(), Val::Enum("file".to_owned())),
            ("size".to_owned(), Val::Option(None)),
            (
                "shape".to_owned(),
                Val::Variant("circle".to_owned(), Some(Box::new(Val::Float64(1.5)))),
            ),
            ("none".to_owned(), Val::Variant("empty".to_owned(), None)),
            (
                "bits".to_owned(),
                Val::Flags(vec!["read".to_owned(), "write".to_owned()]),
            ),
            (
                "pair".to_owned(),
                Val::Tuple(vec![Val::U8(1), Val::Char('x')]),
            ),
        ]);
        assert_eq!(
            json_of(&v),
            json!({
                "name": "a", "kind": "file", "size": null, "shape": { "circle": 1.5 },
                "none": "empty", "bits": ["read", "write"], "pair": [1, "x"],
            })
        );
    }

    #[test]
    fn a_top_level_result_is_output_or_tool_error() {
        let ok = output(vec![Val::Result(Ok(Some(Box::new(Val::List(vec![
            Val::String("[FILE] a".to_owned()),
        ])))))]);
        assert_eq!(ok.ok().as_deref(), Some(r#"["[FILE] a"]"#));
        match output(vec![Val::Result(Err(Some(Box::new(Val::String(
            "Failed to read file".to_owned(),
        )))))]) {
            Err(ToolError::Failed(message)) => assert_eq!(message, "Failed to read file"),
            other => panic!("{other:?}"),
        }
        assert_eq!(output(Vec::new()).ok().as_deref(), Some("null"));
        assert_eq!(output(vec![Val::U32(7)]).ok().as_deref(), Some("7"));
    }
}
