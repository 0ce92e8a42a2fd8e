//! Tool input schemas: a tool's own JSON Schema is hostile input.
//!
//! A component's `describe` hands the host a JSON Schema per tool, and the
//! host checks every call's input against it before the guest runs. Both
//! steps run in the host, outside every limit a call has (time, fuel,
//! memory), so both are bounded here:
//!
//! * **At load**, [`SchemaLoader::compile`] parses the schema under fixed
//!   bounds (text size, nesting, subschema count, regex size, only local
//!   `$ref`s, no in-place `$ref` cycles, and at most
//!   [`MAX_IN_PLACE_EVALUATIONS`] subschemas evaluated at one input location)
//!   and compiles it into an arena of nodes with every `$ref` resolved to a
//!   node index. A schema over a bound is refused with a [`SchemaError`]
//!   naming the bound and the JSON pointer where it was crossed.
//! * **Per call**, [`InputSchema::validate`] walks that arena charging every
//!   subschema evaluation and every unit of keyword work (characters
//!   counted, bytes matched by a regex, values compared) to a budget of
//!   [`STEP_BUDGET`] steps, with recursion bounded by [`MAX_EVAL_DEPTH`].
//!   Memory is the recursion plus the errors kept (at most [`MAX_ERRORS`]),
//!   plus one hash per item for `uniqueItems`.
//!
//! Why our own validator rather than a JSON Schema crate: the general ones
//! (we used `jsonschema`) expand `$ref`s and combinators without a bound, so
//! a chain of `anyOf` pairs through `$defs` cost gigabytes and tens of
//! seconds (issue 6), and none can be stopped mid-validation. What is
//! implemented is draft 2020-12 validation (with draft-07 spellings); what
//! is not (`unevaluated*`, dynamic references, non-root `$id`, anchors) is
//! refused at load by name, never silently ignored. Regexes are the Rust
//! `regex` dialect (linear time: no look-around, no backreferences), with
//! ECMA-262's ASCII `\d`, `\w`, `\b` and `.` kept. The numbers and the
//! reasoning behind them are in `docs/security.md` ("Tool input schemas").
//!
//! What this module must not do: run guests, know about grants, or fetch
//! anything. A `$ref` that is not local is refused, never resolved.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use regex::{Regex, RegexBuilder};
use serde_json::{Map, Number, Value};

/// Largest schema text accepted, per tool: 256 KiB. The schemas our SDK
/// generates are 0.3-3 KiB; a hundred times that is still a small document.
pub const MAX_SCHEMA_BYTES: usize = 256 << 10;
/// Largest total schema text of one component (all its tools): 1 MiB. It
/// bounds what a component's schemas can cost the host in memory, whatever
/// the number of tools.
pub const MAX_COMPONENT_SCHEMA_BYTES: usize = 1 << 20;
/// Deepest nesting of arrays and objects in the schema text: 64 levels (a
/// struct nested inside another adds two).
pub const MAX_NESTING: usize = 64;
/// Most subschemas compiled from one schema: 10,000.
pub const MAX_NODES: usize = 10_000;
/// Most subschemas evaluated at one input location without descending into
/// it, counting every path through `$ref`, `allOf`, `anyOf`, `oneOf`, `not`,
/// `if`/`then`/`else` and `dependentSchemas`: 1,000. This is the bound that
/// refuses a chain of `anyOf` pairs through `$defs` (2^n evaluations for n
/// links) at load; real schemas stay under 50.
pub const MAX_IN_PLACE_EVALUATIONS: u64 = 1_000;
/// Longest chain of in-place subschemas (a `$ref` to a `$ref` to an
/// `allOf`...): 32. It keeps the validator's recursion per input level
/// small, so deep inputs hit [`MAX_EVAL_DEPTH`] late.
pub const MAX_IN_PLACE_DEPTH: u32 = 32;
/// Longest `pattern` or `patternProperties` regex text: 1 KiB.
pub const MAX_PATTERN_BYTES: usize = 1 << 10;
/// Compiled size limit of one regex (the `regex` crate's `size_limit`), and
/// the cap on its lazy DFA cache: 256 KiB each.
pub const MAX_REGEX_PROGRAM_BYTES: usize = 256 << 10;
/// Most distinct regexes in one component's schemas: 64 (identical patterns
/// are compiled once).
pub const MAX_REGEXES: usize = 64;
/// Steps one validation may take: 1,000,000. A step is one subschema
/// evaluated, one keyword checked, or one unit of keyword work (32 bytes of
/// a string counted or compared, a value visited in a comparison, 8 bytes
/// times NFA states of a regex match). One full budget takes 5-50 ms in a
/// release build (see `docs/security.md`); a normal input costs tens to
/// thousands of steps.
pub const STEP_BUDGET: u64 = 1_000_000;
/// Deepest recursion of one validation (subschemas inside subschemas,
/// descending into the input or not): 256.
pub const MAX_EVAL_DEPTH: u32 = 256;
/// Violations reported per call; validation stops at the third.
pub const MAX_ERRORS: usize = 3;

/// Bytes of string work that cost one step.
const BYTES_PER_STEP: usize = 32;
/// Bytes matched times NFA states that cost one step. Measured worst case
/// (`time_full_budget`): 6.4 ns per byte per state, when a hostile pattern
/// and input make the lazy DFA give way to the PikeVM; so one step of
/// regex work is at most ~50 ns, and a full budget of it ~50 ms.
const STATE_BYTES_PER_STEP: u64 = 8;
/// Longest rendering of an input value or property name in a message.
const MAX_SHOWN: usize = 64;

/// Why a schema was refused at load. The tool's author fixes the schema;
/// the same schema is refused the same way every time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The text is larger than [`MAX_SCHEMA_BYTES`], or the component's
    /// schemas together are larger than [`MAX_COMPONENT_SCHEMA_BYTES`].
    #[error("the schema is {bytes} bytes, over the bound of {limit} bytes{scope}")]
    TooLarge {
        /// Its size (or the component's running total).
        bytes: usize,
        /// The bound.
        limit: usize,
        /// Empty, or which total it is.
        scope: &'static str,
    },
    /// Arrays and objects nest deeper than [`MAX_NESTING`].
    #[error(
        "the schema nests deeper than the bound of {MAX_NESTING} levels (at line {line}, column {column})"
    )]
    TooDeep {
        /// 1-based line of the first bracket past the bound.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// The text is not JSON.
    #[error("the schema is not JSON: {0}")]
    NotJson(String),
    /// More than [`MAX_NODES`] subschemas.
    #[error("the schema has more than the bound of {MAX_NODES} subschemas (at {at})")]
    TooManyNodes {
        /// JSON pointer of the subschema that crossed the bound.
        at: String,
    },
    /// Too many subschemas evaluated at one input location.
    #[error(
        "the subschema at {at} evaluates {count} subschemas at one input location \
         (through $ref, allOf, anyOf, oneOf, not, if/then/else, dependentSchemas), \
         over the bound of {MAX_IN_PLACE_EVALUATIONS}"
    )]
    InPlaceEvaluations {
        /// JSON pointer of the first (innermost) subschema over the bound.
        at: String,
        /// How many it evaluates (exact: its children are all within the bound).
        count: u64,
    },
    /// In-place subschemas chain deeper than [`MAX_IN_PLACE_DEPTH`].
    #[error(
        "the subschema at {at} chains more than the bound of {MAX_IN_PLACE_DEPTH} subschemas \
         at one input location (through $ref and the combinators)"
    )]
    InPlaceDepth {
        /// JSON pointer of the first subschema over the bound.
        at: String,
    },
    /// A `$ref` leads back to itself without descending into the input
    /// (`{"$ref": "#"}` at the root, or `a -> b -> a` through `allOf`).
    #[error("the subschema at {at} refers back to itself without descending into the input")]
    RefCycle {
        /// JSON pointer of a subschema on the cycle.
        at: String,
    },
    /// A `$ref` is not a local JSON pointer.
    #[error(
        "`$ref` {reference:?} at {at} is not a local reference; only `#` and JSON pointers \
         such as `#/$defs/name` are followed, and nothing is ever fetched"
    )]
    NonLocalRef {
        /// JSON pointer of the schema holding the `$ref`.
        at: String,
        /// The reference as written (cut to 200 characters).
        reference: String,
    },
    /// A local `$ref` points nowhere, or at something that is not a schema.
    #[error("`$ref` {reference:?} at {at} {problem}")]
    BadRef {
        /// JSON pointer of the schema holding the `$ref`.
        at: String,
        /// The reference as written (cut to 200 characters).
        reference: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A keyword that changes validation but is not implemented.
    #[error("keyword `{keyword}` at {at} is not supported: {why}")]
    Unsupported {
        /// The keyword.
        keyword: &'static str,
        /// JSON pointer of the schema using it.
        at: String,
        /// What to use instead.
        why: &'static str,
    },
    /// A keyword's value is malformed.
    #[error("keyword `{keyword}` at {at} is invalid: {problem}")]
    Invalid {
        /// The keyword.
        keyword: String,
        /// JSON pointer of the schema using it.
        at: String,
        /// What is wrong.
        problem: String,
    },
    /// A regex is too long, too big compiled, uses syntax the linear-time
    /// engine lacks, or is one too many.
    #[error("regex in `{keyword}` at {at} is refused: {problem}")]
    Regex {
        /// `pattern` or `patternProperties`.
        keyword: &'static str,
        /// JSON pointer of the schema using it.
        at: String,
        /// Which bound, or the parser's complaint.
        problem: String,
    },
}

/// Why an input was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The input violates the schema: up to [`MAX_ERRORS`] messages, each
    /// naming where (`input: ...` or `field /a/0: ...`).
    Invalid(Vec<String>),
    /// Checking the input took more than [`STEP_BUDGET`] steps or recursed
    /// deeper than [`MAX_EVAL_DEPTH`]; the message names the bound.
    Limit(String),
}

/// Compiles the schemas of one component, keeping the component-wide
/// bounds ([`MAX_COMPONENT_SCHEMA_BYTES`], [`MAX_REGEXES`]) across its tools.
#[derive(Debug, Default)]
pub struct SchemaLoader {
    text_bytes: usize,
    regexes: HashMap<String, Arc<Regex>>,
}

/// A compiled, bounded input schema, ready to validate inputs.
#[derive(Debug)]
pub struct InputSchema {
    nodes: Vec<Node>,
    regexes: Vec<Pattern>,
    /// Seeds the `uniqueItems` hashes, so colliding items cannot be crafted.
    hash_seed: std::collections::hash_map::RandomState,
}

type NodeId = u32;
type RegexId = u32;

/// The root is always node 0.
const ROOT: NodeId = 0;
/// Placeholder for a `$ref` not yet resolved; never left after compiling.
const UNRESOLVED: NodeId = NodeId::MAX;

#[derive(Debug)]
struct Pattern {
    regex: Arc<Regex>,
    /// The pattern as written, for messages.
    source: String,
    /// States of its NFA: the worst-case work per byte matched.
    states: u64,
}

#[derive(Debug)]
enum Node {
    /// `true` accepts everything, `false` nothing.
    Bool(bool),
    /// An object schema's keywords, `type` first.
    Keywords(Vec<Kw>),
}

/// Type bits of the `type` keyword.
mod ty {
    pub const NULL: u8 = 1;
    pub const BOOLEAN: u8 = 2;
    pub const OBJECT: u8 = 4;
    pub const ARRAY: u8 = 8;
    pub const NUMBER: u8 = 16;
    pub const STRING: u8 = 32;
    pub const INTEGER: u8 = 64;
    pub const NAMES: [(&str, u8); 7] = [
        ("null", NULL),
        ("boolean", BOOLEAN),
        ("object", OBJECT),
        ("array", ARRAY),
        ("number", NUMBER),
        ("string", STRING),
        ("integer", INTEGER),
    ];
}

/// A number as JSON Schema compares it: by value, 1 == 1.0.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

#[derive(Debug)]
enum Kw {
    Ref(NodeId),
    Type(u8),
    Enum(Vec<Value>),
    Const(Value),
    MultipleOf(Num),
    Minimum(Num, bool),
    Maximum(Num, bool),
    MinLength(u64),
    MaxLength(u64),
    Pattern(RegexId),
    MinItems(u64),
    MaxItems(u64),
    UniqueItems,
    Contains {
        node: NodeId,
        min: u64,
        max: Option<u64>,
    },
    Items {
        prefix: Vec<NodeId>,
        rest: Option<NodeId>,
    },
    MinProperties(u64),
    MaxProperties(u64),
    Required(Vec<String>),
    DependentRequired(Vec<(String, Vec<String>)>),
    Properties {
        /// Sorted by name, for binary search.
        named: Vec<(String, NodeId)>,
        patterns: Vec<(RegexId, NodeId)>,
        additional: Option<NodeId>,
    },
    PropertyNames(NodeId),
    AllOf(Vec<NodeId>),
    AnyOf(Vec<NodeId>),
    OneOf(Vec<NodeId>),
    Not(NodeId),
    If {
        test: NodeId,
        then: Option<NodeId>,
        otherwise: Option<NodeId>,
    },
    DependentSchemas(Vec<(String, NodeId)>),
}

impl Kw {
    /// Subschemas evaluated at the same input location as this keyword.
    fn in_place(&self, out: &mut Vec<NodeId>) {
        match self {
            Kw::Ref(n) | Kw::Not(n) => out.push(*n),
            Kw::AllOf(v) | Kw::AnyOf(v) | Kw::OneOf(v) => out.extend(v),
            Kw::If {
                test,
                then,
                otherwise,
            } => {
                out.push(*test);
                out.extend(then.iter().chain(otherwise));
            }
            Kw::DependentSchemas(v) => out.extend(v.iter().map(|(_, n)| *n)),
            _ => {}
        }
    }
}

/// Keywords that change validation but that we do not implement.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "unevaluatedProperties",
        "use `additionalProperties` (it sees only `properties` and `patternProperties` beside it)",
    ),
    (
        "unevaluatedItems",
        "use `items` (after `prefixItems`) instead",
    ),
    (
        "$dynamicRef",
        "use `$ref` to a JSON pointer such as `#/$defs/name`",
    ),
    (
        "$recursiveRef",
        "use `$ref` to a JSON pointer such as `#/$defs/name`",
    ),
];

impl SchemaLoader {
    /// A loader for one component's schemas.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse and compile one tool's input schema under the bounds above.
    pub fn compile(&mut self, text: &str) -> Result<InputSchema, SchemaError> {
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(SchemaError::TooLarge {
                bytes: text.len(),
                limit: MAX_SCHEMA_BYTES,
                scope: "",
            });
        }
        self.text_bytes += text.len();
        if self.text_bytes > MAX_COMPONENT_SCHEMA_BYTES {
            return Err(SchemaError::TooLarge {
                bytes: self.text_bytes,
                limit: MAX_COMPONENT_SCHEMA_BYTES,
                scope: " for all of the component's schemas together",
            });
        }
        // Depth first, on the text: it bounds every recursion below (the
        // parser's own limit is 128 and would not name ours).
        check_nesting(text)?;
        let root: Value =
            serde_json::from_str(text).map_err(|e| SchemaError::NotJson(e.to_string()))?;
        let mut compiler = Compiler {
            root: &root,
            root_id: root.get("$id").and_then(Value::as_str),
            nodes: Vec::new(),
            sources: Vec::new(),
            memo: HashMap::new(),
            pending: Vec::new(),
            patterns: Vec::new(),
            pattern_ids: HashMap::new(),
            loader: self,
        };
        let root_node = compiler.node(&root)?;
        debug_assert_eq!(root_node, ROOT);
        compiler.resolve_refs()?;
        compiler.check_in_place()?;
        Ok(InputSchema {
            nodes: compiler.nodes,
            regexes: compiler.patterns,
            hash_seed: std::collections::hash_map::RandomState::new(),
        })
    }
}

/// Refuse text whose brackets nest deeper than [`MAX_NESTING`], saying where.
fn check_nesting(text: &str) -> Result<(), SchemaError> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let (mut line, mut column) = (1usize, 0usize);
    for c in text.chars() {
        column += 1;
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(SchemaError::TooDeep { line, column });
                }
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            '\n' => {
                line += 1;
                column = 0;
            }
            _ => {}
        }
    }
    Ok(())
}

struct Compiler<'a, 'l> {
    root: &'a Value,
    root_id: Option<&'a str>,
    nodes: Vec<Node>,
    /// The JSON each node was compiled from; its address is its identity.
    sources: Vec<&'a Value>,
    memo: HashMap<*const Value, NodeId>,
    /// `$ref`s to patch: node, keyword index, the reference.
    pending: Vec<(NodeId, usize, &'a str)>,
    patterns: Vec<Pattern>,
    pattern_ids: HashMap<&'a str, RegexId>,
    loader: &'l mut SchemaLoader,
}

impl<'a> Compiler<'a, '_> {
    /// JSON pointer (as a URI fragment) of `target` inside the document.
    /// Only computed for messages, so nodes carry no paths.
    fn pointer_of(&self, target: &Value) -> String {
        fn find(v: &Value, target: *const Value, path: &mut Vec<String>) -> bool {
            if std::ptr::eq(v, target) {
                return true;
            }
            match v {
                Value::Object(map) => map.iter().any(|(k, child)| {
                    path.push(k.replace('~', "~0").replace('/', "~1"));
                    let found = find(child, target, path);
                    if !found {
                        path.pop();
                    }
                    found
                }),
                Value::Array(items) => items.iter().enumerate().any(|(i, child)| {
                    path.push(i.to_string());
                    let found = find(child, target, path);
                    if !found {
                        path.pop();
                    }
                    found
                }),
                _ => false,
            }
        }
        let mut path = Vec::new();
        find(self.root, target, &mut path);
        let mut out = String::from("#");
        for token in path {
            out.push('/');
            out.push_str(&token);
        }
        shorten(&out, 200)
    }

    fn at(&self, node: NodeId) -> String {
        self.pointer_of(self.sources[node as usize])
    }

    /// Compile `schema` (memoized by address), descending into every
    /// subschema keyword; `$ref`s are queued for [`Self::resolve_refs`].
    fn node(&mut self, schema: &'a Value) -> Result<NodeId, SchemaError> {
        if let Some(&id) = self.memo.get(&std::ptr::from_ref(schema)) {
            return Ok(id);
        }
        if self.nodes.len() >= MAX_NODES {
            return Err(SchemaError::TooManyNodes {
                at: self.pointer_of(schema),
            });
        }
        let id = NodeId::try_from(self.nodes.len()).unwrap_or(UNRESOLVED);
        self.memo.insert(std::ptr::from_ref(schema), id);
        self.sources.push(schema);
        let map = match schema {
            Value::Bool(b) => {
                self.nodes.push(Node::Bool(*b));
                return Ok(id);
            }
            Value::Object(map) => map,
            _ => {
                return Err(SchemaError::Invalid {
                    keyword: "schema".to_owned(),
                    at: self.pointer_of(schema),
                    problem: "a schema must be an object or a boolean".to_owned(),
                });
            }
        };
        self.nodes.push(Node::Keywords(Vec::new()));
        let kws = self.keywords(id, schema, map)?;
        self.nodes[id as usize] = Node::Keywords(kws);
        Ok(id)
    }

    fn invalid(&self, schema: &Value, keyword: &str, problem: impl Into<String>) -> SchemaError {
        SchemaError::Invalid {
            keyword: keyword.to_owned(),
            at: self.pointer_of(schema),
            problem: problem.into(),
        }
    }

    fn keywords(
        &mut self,
        id: NodeId,
        schema: &'a Value,
        map: &'a Map<String, Value>,
    ) -> Result<Vec<Kw>, SchemaError> {
        for (keyword, why) in UNSUPPORTED {
            if map.contains_key(*keyword) {
                return Err(SchemaError::Unsupported {
                    keyword,
                    at: self.pointer_of(schema),
                    why,
                });
            }
        }
        if map.contains_key("$id") && !std::ptr::eq(schema, self.root) {
            return Err(SchemaError::Unsupported {
                keyword: "$id",
                at: self.pointer_of(schema),
                why: "only the root schema may have an `$id`; refer to subschemas by JSON pointer",
            });
        }

        let mut kws = Vec::new();
        let count = |this: &Self, key: &str| -> Result<Option<u64>, SchemaError> {
            map.get(key)
                .map(|v| {
                    as_count(v)
                        .ok_or_else(|| this.invalid(schema, key, "must be a non-negative integer"))
                })
                .transpose()
        };
        let number = |this: &Self, key: &str| -> Result<Option<Num>, SchemaError> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(Some(num(n))),
                // Draft 4's boolean `exclusiveMinimum`/`exclusiveMaximum` are
                // read with `minimum`/`maximum` below.
                Some(Value::Bool(_)) if key.starts_with("exclusive") => Ok(None),
                Some(_) => Err(this.invalid(schema, key, "must be a number")),
            }
        };

        if let Some(t) = map.get("type") {
            let bits = |v: &Value| -> Option<u8> {
                let name = v.as_str()?;
                ty::NAMES.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
            };
            let set = match t {
                Value::Array(names) => names.iter().try_fold(0u8, |acc, v| Some(acc | bits(v)?)),
                v => bits(v),
            };
            let set = set.ok_or_else(|| {
                self.invalid(
                    schema,
                    "type",
                    "must be one of null, boolean, object, array, number, string, integer, or an array of them",
                )
            })?;
            kws.push(Kw::Type(set));
        }
        if let Some(v) = map.get("enum") {
            let values = v
                .as_array()
                .ok_or_else(|| self.invalid(schema, "enum", "must be an array"))?;
            kws.push(Kw::Enum(values.clone()));
        }
        if let Some(v) = map.get("const") {
            kws.push(Kw::Const(v.clone()));
        }
        if let Some(m) = number(self, "multipleOf")? {
            let positive = match m {
                Num::Int(i) => i > 0,
                Num::Float(f) => f > 0.0 && f.is_finite(),
            };
            if !positive {
                return Err(self.invalid(schema, "multipleOf", "must be greater than 0"));
            }
            kws.push(Kw::MultipleOf(m));
        }
        let draft4_exclusive = |key: &str| map.get(key).and_then(Value::as_bool).unwrap_or(false);
        if let Some(n) = number(self, "minimum")? {
            kws.push(Kw::Minimum(n, draft4_exclusive("exclusiveMinimum")));
        }
        if let Some(n) = number(self, "exclusiveMinimum")? {
            kws.push(Kw::Minimum(n, true));
        }
        if let Some(n) = number(self, "maximum")? {
            kws.push(Kw::Maximum(n, draft4_exclusive("exclusiveMaximum")));
        }
        if let Some(n) = number(self, "exclusiveMaximum")? {
            kws.push(Kw::Maximum(n, true));
        }
        if let Some(n) = count(self, "minLength")? {
            kws.push(Kw::MinLength(n));
        }
        if let Some(n) = count(self, "maxLength")? {
            kws.push(Kw::MaxLength(n));
        }
        if let Some(v) = map.get("pattern") {
            let text = v
                .as_str()
                .ok_or_else(|| self.invalid(schema, "pattern", "must be a string"))?;
            kws.push(Kw::Pattern(self.regex(schema, "pattern", text)?));
        }
        if let Some(n) = count(self, "minItems")? {
            kws.push(Kw::MinItems(n));
        }
        if let Some(n) = count(self, "maxItems")? {
            kws.push(Kw::MaxItems(n));
        }
        match map.get("uniqueItems") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => kws.push(Kw::UniqueItems),
            Some(_) => return Err(self.invalid(schema, "uniqueItems", "must be a boolean")),
        }
        if let Some(v) = map.get("contains") {
            let node = self.node(v)?;
            let min = count(self, "minContains")?.unwrap_or(1);
            let max = count(self, "maxContains")?;
            kws.push(Kw::Contains { node, min, max });
        }
        // `items` as an array is draft-07's `prefixItems`, with
        // `additionalItems` for the rest; as a schema it follows `prefixItems`.
        let mut prefix = Vec::new();
        let mut rest = None;
        if let Some(v) = map.get("prefixItems") {
            let list = v.as_array().ok_or_else(|| {
                self.invalid(schema, "prefixItems", "must be an array of schemas")
            })?;
            for s in list {
                prefix.push(self.node(s)?);
            }
        }
        match map.get("items") {
            Some(Value::Array(list)) => {
                if map.contains_key("prefixItems") {
                    return Err(self.invalid(
                        schema,
                        "items",
                        "an array of schemas (draft-07) cannot stand beside `prefixItems`",
                    ));
                }
                for s in list {
                    prefix.push(self.node(s)?);
                }
                if let Some(v) = map.get("additionalItems") {
                    rest = Some(self.node(v)?);
                }
            }
            Some(v) => rest = Some(self.node(v)?),
            None => {}
        }
        if !prefix.is_empty() || rest.is_some() {
            kws.push(Kw::Items { prefix, rest });
        }
        if let Some(n) = count(self, "minProperties")? {
            kws.push(Kw::MinProperties(n));
        }
        if let Some(n) = count(self, "maxProperties")? {
            kws.push(Kw::MaxProperties(n));
        }
        if let Some(v) = map.get("required") {
            kws.push(Kw::Required(self.names(schema, "required", v)?));
        }
        let mut dependent_required = Vec::new();
        let mut dependent_schemas = Vec::new();
        for key in ["dependencies", "dependentRequired", "dependentSchemas"] {
            let Some(v) = map.get(key) else { continue };
            let deps = v
                .as_object()
                .ok_or_else(|| self.invalid(schema, key, "must be an object"))?;
            for (name, dep) in deps {
                // Draft-07's `dependencies` holds either form.
                if dep.is_array() && key != "dependentSchemas" {
                    dependent_required.push((name.clone(), self.names(schema, key, dep)?));
                } else if key != "dependentRequired" {
                    dependent_schemas.push((name.clone(), self.node(dep)?));
                } else {
                    return Err(self.invalid(schema, key, "each value must be an array of names"));
                }
            }
        }
        if !dependent_required.is_empty() {
            kws.push(Kw::DependentRequired(dependent_required));
        }
        let mut named = Vec::new();
        if let Some(v) = map.get("properties") {
            let props = v.as_object().ok_or_else(|| {
                self.invalid(schema, "properties", "must be an object of schemas")
            })?;
            for (name, s) in props {
                named.push((name.clone(), self.node(s)?));
            }
            named.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let mut patterns = Vec::new();
        if let Some(v) = map.get("patternProperties") {
            let props = v.as_object().ok_or_else(|| {
                self.invalid(schema, "patternProperties", "must be an object of schemas")
            })?;
            for (pattern, s) in props {
                let regex = self.regex(schema, "patternProperties", pattern)?;
                patterns.push((regex, self.node(s)?));
            }
        }
        let additional = map
            .get("additionalProperties")
            .map(|v| self.node(v))
            .transpose()?;
        if !named.is_empty() || !patterns.is_empty() || additional.is_some() {
            kws.push(Kw::Properties {
                named,
                patterns,
                additional,
            });
        }
        if let Some(v) = map.get("propertyNames") {
            kws.push(Kw::PropertyNames(self.node(v)?));
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            let Some(v) = map.get(key) else { continue };
            let list = v
                .as_array()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| self.invalid(schema, key, "must be a non-empty array of schemas"))?;
            let mut ids = Vec::with_capacity(list.len());
            for s in list {
                ids.push(self.node(s)?);
            }
            kws.push(match key {
                "allOf" => Kw::AllOf(ids),
                "anyOf" => Kw::AnyOf(ids),
                _ => Kw::OneOf(ids),
            });
        }
        if let Some(v) = map.get("not") {
            kws.push(Kw::Not(self.node(v)?));
        }
        if let Some(v) = map.get("if") {
            let test = self.node(v)?;
            let then = map.get("then").map(|v| self.node(v)).transpose()?;
            let otherwise = map.get("else").map(|v| self.node(v)).transpose()?;
            kws.push(Kw::If {
                test,
                then,
                otherwise,
            });
        }
        if !dependent_schemas.is_empty() {
            kws.push(Kw::DependentSchemas(dependent_schemas));
        }
        if let Some(v) = map.get("$ref") {
            let reference = v
                .as_str()
                .ok_or_else(|| self.invalid(schema, "$ref", "must be a string"))?;
            self.pending.push((id, kws.len(), reference));
            kws.push(Kw::Ref(UNRESOLVED));
        }
        Ok(kws)
    }

    fn names(&self, schema: &Value, key: &str, v: &Value) -> Result<Vec<String>, SchemaError> {
        v.as_array()
            .and_then(|l| l.iter().map(|n| n.as_str().map(str::to_owned)).collect())
            .ok_or_else(|| self.invalid(schema, key, "must be an array of strings"))
    }

    fn regex(
        &mut self,
        schema: &Value,
        keyword: &'static str,
        text: &'a str,
    ) -> Result<RegexId, SchemaError> {
        if let Some(&id) = self.pattern_ids.get(text) {
            return Ok(id);
        }
        let refuse = |this: &Self, problem: String| SchemaError::Regex {
            keyword,
            at: this.pointer_of(schema),
            problem,
        };
        if text.len() > MAX_PATTERN_BYTES {
            return Err(refuse(
                self,
                format!(
                    "it is {} bytes, over the bound of {MAX_PATTERN_BYTES} bytes",
                    text.len()
                ),
            ));
        }
        let regex = match self.loader.regexes.get(text) {
            Some(r) => r.clone(),
            None => {
                if self.loader.regexes.len() >= MAX_REGEXES {
                    return Err(refuse(
                        self,
                        format!(
                            "the component's schemas have more than the bound of {MAX_REGEXES} distinct regexes"
                        ),
                    ));
                }
                let translated = ecma_to_rust(text);
                let regex = RegexBuilder::new(&translated)
                    .size_limit(MAX_REGEX_PROGRAM_BYTES)
                    .dfa_size_limit(MAX_REGEX_PROGRAM_BYTES)
                    .build()
                    .map_err(|e| {
                        let why = match e {
                            regex::Error::CompiledTooBig(_) => format!(
                                "compiled, it is over the bound of {} KiB",
                                MAX_REGEX_PROGRAM_BYTES >> 10
                            ),
                            other => shorten(&other.to_string(), 300),
                        };
                        refuse(self, why)
                    })?;
                let regex = Arc::new(regex);
                self.loader.regexes.insert(text.to_owned(), regex.clone());
                regex
            }
        };
        let id = RegexId::try_from(self.patterns.len()).unwrap_or(UNRESOLVED);
        let states = nfa_states(&ecma_to_rust(text))
            .ok_or_else(|| refuse(self, "its automaton could not be sized".to_owned()))?;
        self.patterns.push(Pattern {
            regex,
            source: text.to_owned(),
            states,
        });
        self.pattern_ids.insert(text, id);
        Ok(id)
    }

    /// Resolve every queued `$ref` to a node, compiling targets that were
    /// not reached as subschemas (such as `$defs` entries).
    fn resolve_refs(&mut self) -> Result<(), SchemaError> {
        while let Some((node, index, reference)) = self.pending.pop() {
            let at = || self.at(node);
            let target = self.resolve(reference).map_err(|problem| match problem {
                None => SchemaError::NonLocalRef {
                    at: at(),
                    reference: shorten(reference, 200),
                },
                Some(problem) => SchemaError::BadRef {
                    at: at(),
                    reference: shorten(reference, 200),
                    problem,
                },
            })?;
            if !(target.is_object() || target.is_boolean()) {
                return Err(SchemaError::BadRef {
                    at: self.at(node),
                    reference: shorten(reference, 200),
                    problem: "points at a value that is not a schema",
                });
            }
            let target = self.node(target)?;
            if let Node::Keywords(kws) = &mut self.nodes[node as usize]
                && let Some(Kw::Ref(slot)) = kws.get_mut(index)
            {
                *slot = target;
            }
        }
        Ok(())
    }

    /// The value a `$ref` points at. `Err(None)`: not local (refused, never
    /// fetched); `Err(Some(why))`: local but unusable.
    fn resolve(&self, reference: &str) -> Result<&'a Value, Option<&'static str>> {
        let fragment = if reference.is_empty() {
            ""
        } else if let Some(f) = reference.strip_prefix('#') {
            f
        } else {
            // An absolute reference to the root's own `$id` is still local.
            let id = self.root_id.map(|id| id.trim_end_matches('#'));
            match id.and_then(|id| reference.strip_prefix(id)) {
                Some("") => "",
                Some(rest) if rest.starts_with('#') => &rest[1..],
                _ => return Err(None),
            }
        };
        let decoded = percent_decode(fragment).ok_or(Some("has a malformed percent-escape"))?;
        if !decoded.is_empty() && !decoded.starts_with('/') {
            return Err(Some(
                "names an anchor; `$anchor` references are not supported, use a JSON pointer \
                 such as `#/$defs/name`",
            ));
        }
        self.root
            .pointer(&decoded)
            .ok_or(Some("points at nothing in this schema"))
    }

    /// Refuse in-place cycles, chains deeper than [`MAX_IN_PLACE_DEPTH`] and
    /// nodes that evaluate more than [`MAX_IN_PLACE_EVALUATIONS`] subschemas
    /// at one input location. Iterative, so a long `$ref` chain cannot
    /// overflow the stack.
    fn check_in_place(&self) -> Result<(), SchemaError> {
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            New,
            Open,
            Done,
        }
        let n = self.nodes.len();
        let mut edges: Vec<Vec<NodeId>> = vec![Vec::new(); n];
        for (id, node) in self.nodes.iter().enumerate() {
            if let Node::Keywords(kws) = node {
                for kw in kws {
                    kw.in_place(&mut edges[id]);
                }
            }
        }
        let mut mark = vec![Mark::New; n];
        let mut count = vec![0u64; n];
        let mut depth = vec![0u32; n];
        for start in 0..n {
            if mark[start] != Mark::New {
                continue;
            }
            // (node, next edge to follow)
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            mark[start] = Mark::Open;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(&child) = edges[node].get(*next) {
                    *next += 1;
                    let child = child as usize;
                    match mark[child] {
                        Mark::Open => {
                            return Err(SchemaError::RefCycle {
                                at: self.at(child as NodeId),
                            });
                        }
                        Mark::New => {
                            mark[child] = Mark::Open;
                            stack.push((child, 0));
                        }
                        Mark::Done => {}
                    }
                    continue;
                }
                stack.pop();
                mark[node] = Mark::Done;
                let children = &edges[node];
                let c = children
                    .iter()
                    .fold(1u64, |acc, &ch| acc.saturating_add(count[ch as usize]));
                let d = 1 + children
                    .iter()
                    .map(|&ch| depth[ch as usize])
                    .max()
                    .unwrap_or(0);
                if c > MAX_IN_PLACE_EVALUATIONS {
                    return Err(SchemaError::InPlaceEvaluations {
                        at: self.at(node as NodeId),
                        count: c,
                    });
                }
                if d > MAX_IN_PLACE_DEPTH {
                    return Err(SchemaError::InPlaceDepth {
                        at: self.at(node as NodeId),
                    });
                }
                count[node] = c;
                depth[node] = d;
            }
        }
        Ok(())
    }
}

/// A keyword's count: a non-negative integer (2020-12 allows `2.0`).
fn as_count(v: &Value) -> Option<u64> {
    let n = v.as_number()?;
    n.as_u64().or_else(|| {
        let f = n.as_f64()?;
        // The cast saturates at u64::MAX.
        (f >= 0.0 && f.fract() == 0.0).then_some(f as u64)
    })
}

fn num(n: &Number) -> Num {
    if let Some(i) = n.as_i64() {
        Num::Int(i128::from(i))
    } else if let Some(u) = n.as_u64() {
        Num::Int(i128::from(u))
    } else {
        Num::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        (Num::Float(f), Num::Int(i)) => cmp_float_int(f, i),
        (Num::Int(i), Num::Float(f)) => cmp_float_int(f, i).reverse(),
    }
}

/// Exact comparison of a float with an integer: integral floats are
/// compared as integers (the cast saturates), others cannot be equal, and
/// their magnitude is under 2^52, where the integer's rounding cannot
/// change which side it is on.
fn cmp_float_int(f: f64, i: i128) -> Ordering {
    if f.fract() == 0.0 {
        (f as i128).cmp(&i)
    } else {
        f.partial_cmp(&(i as f64)).unwrap_or(Ordering::Equal)
    }
}

fn is_integer(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

fn is_multiple(x: Num, m: Num) -> bool {
    match (x, m) {
        (Num::Int(x), Num::Int(m)) => m != 0 && x % m == 0,
        _ => {
            let (x, m) = (as_f64(x), as_f64(m));
            let q = x / m;
            // Decimal multiples are inexact in binary (0.3 / 0.1); a few
            // ulps of slack accept them.
            q.is_finite() && (q - q.round()).abs() <= f64::EPSILON * q.abs().max(1.0) * 4.0
        }
    }
}

fn as_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Translate an ECMA-262 pattern to the `regex` crate's syntax where the two
/// read the same text differently: `\d`, `\w` and `\b` are ASCII in
/// ECMA-262 but Unicode in `regex`, `.` excludes every line terminator, an
/// unescaped `[` inside a class is a literal, and so is a `{` that starts
/// no quantifier (Annex B). Anything else is left to
/// the `regex` parser, which refuses what it does not know (look-around,
/// backreferences) with a message the author can act on.
fn ecma_to_rust(pattern: &str) -> String {
    const DIGIT: &str = "0-9";
    const WORD: &str = "0-9A-Za-z_";
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push('\\');
                    break;
                };
                match (e, in_class) {
                    ('d', false) => write!(out, "[{DIGIT}]"),
                    ('D', false) => write!(out, "[^{DIGIT}]"),
                    ('w', false) => write!(out, "[{WORD}]"),
                    ('W', false) => write!(out, "[^{WORD}]"),
                    ('d', true) => write!(out, "{DIGIT}"),
                    ('w', true) => write!(out, "{WORD}"),
                    ('D', true) => write!(out, "[^{DIGIT}]"),
                    ('W', true) => write!(out, "[^{WORD}]"),
                    ('b', false) => write!(out, "(?-u:\\b)"),
                    ('B', false) => write!(out, "(?-u:\\B)"),
                    ('b', true) => write!(out, "\\x08"),
                    (e, _) => write!(out, "\\{e}"),
                }
                .unwrap_or(());
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                // A leading `^` negates; a `]` right after is a literal in
                // `regex` but closes an empty class in ECMA-262, which
                // matches nothing: rare enough to leave to the parser.
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
            }
            '[' => out.push_str("\\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            // Set operators of `regex` classes are plain characters in ECMA.
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '.' if !in_class => out.push_str("[^\\n\\r\\x{2028}\\x{2029}]"),
            // Annex B: a `{` that does not start a quantifier is a literal.
            '{' if !in_class && !starts_quantifier(chars.clone()) => out.push_str("\\{"),
            c => out.push(c),
        }
    }
    out
}

/// Whether the text after a `{` is `n}`, `n,}` or `n,m}`.
fn starts_quantifier(mut rest: impl Iterator<Item = char>) -> bool {
    let mut digits = 0;
    let mut comma = false;
    for c in rest.by_ref() {
        match c {
            '0'..='9' => digits += 1,
            ',' if !comma && digits > 0 => comma = true,
            '}' => return digits > 0,
            _ => return false,
        }
    }
    false
}

/// The worst-case work per byte of a regex match: its NFA's state count.
///
/// The `regex` crate matches in time linear in the input, but the factor is
/// the size of its NFA: its lazy DFA is fast until a hostile pattern and
/// input make it thrash, and then the PikeVM (or the bounded backtracker)
/// visits every NFA state per byte. So a match is charged the worst case
/// (see [`STATE_BYTES_PER_STEP`]), from the state count of the NFA the
/// crate builds; `None` if it cannot be built (the `regex` crate just built
/// it, so never in practice).
fn nfa_states(translated: &str) -> Option<u64> {
    use regex_automata::nfa::thompson;
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().nfa_size_limit(Some(MAX_REGEX_PROGRAM_BYTES)))
        .build(translated)
        .ok()?;
    Some(nfa.states().len() as u64)
}

/// `s` cut to `max` characters, with `…` when cut.
fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((at, _)) => format!("{}…", &s[..at]),
    }
}

/// A JSON value shown in a message: at most [`MAX_SHOWN`] characters, and
/// never more work than that, whatever the value's size.
fn show(v: &Value) -> String {
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let room = (MAX_SHOWN * 4).saturating_sub(self.0.len());
            if room == 0 {
                return Err(std::io::Error::other("enough"));
            }
            let n = buf.len().min(room);
            self.0.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Capped(Vec::new());
    let _ = serde_json::to_writer(&mut out, v);
    shorten(&String::from_utf8_lossy(&out.0), MAX_SHOWN)
}

fn show_str(s: &str) -> String {
    show_quoted(&shorten(s, MAX_SHOWN))
}

fn show_quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Where the validator stopped early.
#[derive(Debug)]
enum Stop {
    /// [`STEP_BUDGET`] spent.
    Budget,
    /// [`MAX_EVAL_DEPTH`] reached.
    Depth,
    /// [`MAX_ERRORS`] violations found: nothing more to report.
    Enough,
}

#[derive(Debug, Clone, Copy)]
enum Seg<'v> {
    Key(&'v str),
    Index(usize),
}

/// One validation: its step count, recursion depth, path and errors.
struct Eval<'s, 'v> {
    schema: &'s InputSchema,
    steps: u64,
    depth: u32,
    path: Vec<Seg<'v>>,
    errors: Vec<String>,
}

type Step = Result<bool, Stop>;

impl InputSchema {
    /// Check `input`. At most [`STEP_BUDGET`] steps and [`MAX_EVAL_DEPTH`]
    /// levels of recursion, whatever the schema and input.
    pub fn validate(&self, input: &Value) -> Result<(), Rejection> {
        self.validate_counting(input).1
    }

    /// [`Self::validate`], also returning the steps it took.
    fn validate_counting(&self, input: &Value) -> (u64, Result<(), Rejection>) {
        let mut eval = Eval {
            schema: self,
            steps: 0,
            depth: 0,
            path: Vec::new(),
            errors: Vec::new(),
        };
        let result = match eval.eval(ROOT, input, true) {
            Ok(true) => Ok(()),
            Ok(false) | Err(Stop::Enough) => {
                if eval.errors.is_empty() {
                    eval.errors
                        .push("input: does not match the schema".to_owned());
                }
                Err(Rejection::Invalid(eval.errors))
            }
            Err(Stop::Budget) => Err(Rejection::Limit(format!(
                "checking the input against the tool's schema took more than the budget of \
                 {STEP_BUDGET} steps"
            ))),
            Err(Stop::Depth) => Err(Rejection::Limit(format!(
                "checking the input against the tool's schema nested deeper than the bound of \
                 {MAX_EVAL_DEPTH} levels"
            ))),
        };
        (eval.steps, result)
    }
}

impl<'s, 'v> Eval<'s, 'v> {
    fn charge(&mut self, steps: u64) -> Result<(), Stop> {
        self.steps = self.steps.saturating_add(steps);
        if self.steps > STEP_BUDGET {
            Err(Stop::Budget)
        } else {
            Ok(())
        }
    }

    fn charge_bytes(&mut self, bytes: usize) -> Result<(), Stop> {
        self.charge((bytes / BYTES_PER_STEP) as u64 + 1)
    }

    fn enter(&mut self) -> Result<(), Stop> {
        self.depth += 1;
        if self.depth > MAX_EVAL_DEPTH {
            Err(Stop::Depth)
        } else {
            Ok(())
        }
    }

    /// Record a violation at the current path (collect mode only). Stops
    /// the walk once [`MAX_ERRORS`] are kept.
    fn report(&mut self, message: String) -> Result<(), Stop> {
        let mut at = String::new();
        for seg in &self.path {
            at.push('/');
            match seg {
                Seg::Key(k) => at.push_str(&k.replace('~', "~0").replace('/', "~1")),
                Seg::Index(i) => {
                    let _ = write!(at, "{i}");
                }
            }
        }
        let at = if at.is_empty() {
            "input".to_owned()
        } else {
            format!("field {}", shorten(&at, 200))
        };
        self.errors.push(format!("{at}: {message}"));
        if self.errors.len() >= MAX_ERRORS {
            Err(Stop::Enough)
        } else {
            Ok(())
        }
    }

    /// Evaluate `node` at `v`. In collect mode violations are reported and
    /// evaluation goes on; otherwise the first one answers `false`.
    fn eval(&mut self, node: NodeId, v: &'v Value, collect: bool) -> Step {
        self.charge(1)?;
        self.enter()?;
        let result = self.keywords(node, v, collect);
        self.depth -= 1;
        result
    }

    /// Evaluate `node` at `v` for a yes or no, reporting nothing.
    fn test(&mut self, node: NodeId, v: &'v Value) -> Step {
        self.eval(node, v, false)
    }

    /// Descend into a child of the instance.
    fn child(&mut self, node: NodeId, seg: Seg<'v>, v: &'v Value, collect: bool) -> Step {
        if !collect {
            return self.test(node, v);
        }
        // `additionalProperties: false` and the like say which key, not
        // that "false" failed somewhere below.
        if let Node::Bool(false) = self.schema.nodes[node as usize] {
            self.charge(1)?;
            let what = match seg {
                Seg::Key(k) => format!("property {} is not allowed", show_str(k)),
                Seg::Index(i) => format!("item {i} is not allowed"),
            };
            self.report(what)?;
            return Ok(false);
        }
        self.path.push(seg);
        let result = self.eval(node, v, true);
        self.path.pop();
        result
    }

    fn keywords(&mut self, node: NodeId, v: &'v Value, collect: bool) -> Step {
        let schema = self.schema;
        let kws = match &schema.nodes[node as usize] {
            Node::Bool(true) => return Ok(true),
            Node::Bool(false) => {
                if collect {
                    self.report("no value is allowed here (the schema is `false`)".to_owned())?;
                }
                return Ok(false);
            }
            Node::Keywords(kws) => kws,
        };
        let mut valid = true;
        for kw in kws {
            self.charge(1)?;
            let ok = self.keyword(kw, v, collect)?;
            if !ok {
                if !collect {
                    return Ok(false);
                }
                valid = false;
            }
        }
        Ok(valid)
    }

    /// Fail a keyword: report in collect mode, then answer `false`.
    fn fail(&mut self, collect: bool, message: impl FnOnce() -> String) -> Step {
        if collect {
            self.report(message())?;
        }
        Ok(false)
    }

    fn keyword(&mut self, kw: &'s Kw, v: &'v Value, collect: bool) -> Step {
        match kw {
            Kw::Ref(target) => self.eval(*target, v, collect),
            Kw::Type(set) => {
                let ok = match v {
                    Value::Null => set & ty::NULL != 0,
                    Value::Bool(_) => set & ty::BOOLEAN != 0,
                    Value::Object(_) => set & ty::OBJECT != 0,
                    Value::Array(_) => set & ty::ARRAY != 0,
                    Value::String(_) => set & ty::STRING != 0,
                    Value::Number(n) => {
                        set & ty::NUMBER != 0 || (set & ty::INTEGER != 0 && is_integer(n))
                    }
                };
                if ok {
                    return Ok(true);
                }
                self.fail(collect, || {
                    let names: Vec<String> = ty::NAMES
                        .iter()
                        .filter(|(_, b)| set & b != 0)
                        .map(|(n, _)| format!("{n:?}"))
                        .collect();
                    let word = if names.len() == 1 { "type" } else { "types" };
                    format!("{} is not of {word} {}", show(v), names.join(", "))
                })
            }
            Kw::Enum(values) => {
                for candidate in values {
                    if self.equal(candidate, v, 0)? {
                        return Ok(true);
                    }
                }
                self.fail(collect, || {
                    let list: Vec<String> = values.iter().take(8).map(show).collect();
                    let more = if values.len() > 8 { ", …" } else { "" };
                    format!("{} is not one of [{}{more}]", show(v), list.join(", "))
                })
            }
            Kw::Const(c) => {
                if self.equal(c, v, 0)? {
                    return Ok(true);
                }
                self.fail(collect, || format!("{} is not {}", show(v), show(c)))
            }
            Kw::MultipleOf(m) => {
                let Value::Number(n) = v else { return Ok(true) };
                if is_multiple(num(n), *m) {
                    return Ok(true);
                }
                self.fail(collect, || {
                    format!("{n} is not a multiple of {}", show_num(*m))
                })
            }
            Kw::Minimum(limit, exclusive) => {
                let Value::Number(n) = v else { return Ok(true) };
                let order = cmp_num(num(n), *limit);
                if order == Ordering::Greater || (!exclusive && order == Ordering::Equal) {
                    return Ok(true);
                }
                self.fail(collect, || {
                    let how = if *exclusive {
                        "less than or equal to"
                    } else {
                        "less than"
                    };
                    format!("{n} is {how} the minimum of {}", show_num(*limit))
                })
            }
            Kw::Maximum(limit, exclusive) => {
                let Value::Number(n) = v else { return Ok(true) };
                let order = cmp_num(num(n), *limit);
                if order == Ordering::Less || (!exclusive && order == Ordering::Equal) {
                    return Ok(true);
                }
                self.fail(collect, || {
                    let how = if *exclusive {
                        "greater than or equal to"
                    } else {
                        "greater than"
                    };
                    format!("{n} is {how} the maximum of {}", show_num(*limit))
                })
            }
            Kw::MinLength(min) => {
                let Value::String(s) = v else { return Ok(true) };
                // Between len/4 and len characters: count only when that
                // does not decide.
                if (s.len() as u64).div_ceil(4) >= *min {
                    return Ok(true);
                }
                if (s.len() as u64) >= *min {
                    self.charge_bytes(s.len())?;
                    if s.chars().count() as u64 >= *min {
                        return Ok(true);
                    }
                }
                self.fail(collect, || {
                    format!(
                        "{} is shorter than {min} character{}",
                        show(v),
                        plural(*min)
                    )
                })
            }
            Kw::MaxLength(max) => {
                let Value::String(s) = v else { return Ok(true) };
                if s.len() as u64 <= *max {
                    return Ok(true);
                }
                if (s.len() as u64).div_ceil(4) <= *max {
                    self.charge_bytes(s.len())?;
                    if s.chars().count() as u64 <= *max {
                        return Ok(true);
                    }
                }
                self.fail(collect, || {
                    format!("{} is longer than {max} character{}", show(v), plural(*max))
                })
            }
            Kw::Pattern(id) => {
                let Value::String(s) = v else { return Ok(true) };
                if self.matches(*id, s)? {
                    return Ok(true);
                }
                self.fail(collect, || {
                    format!(
                        "{} does not match the pattern {}",
                        show(v),
                        show_str(&self.schema.regexes[*id as usize].source)
                    )
                })
            }
            Kw::MinItems(min) => {
                let Value::Array(items) = v else {
                    return Ok(true);
                };
                if items.len() as u64 >= *min {
                    return Ok(true);
                }
                self.fail(collect, || {
                    format!(
                        "has {} item{}, fewer than {min}",
                        items.len(),
                        plural(items.len() as u64)
                    )
                })
            }
            Kw::MaxItems(max) => {
                let Value::Array(items) = v else {
                    return Ok(true);
                };
                if items.len() as u64 <= *max {
                    return Ok(true);
                }
                self.fail(collect, || {
                    format!("has {} items, more than {max}", items.len())
                })
            }
            Kw::UniqueItems => {
                let Value::Array(items) = v else {
                    return Ok(true);
                };
                match self.duplicate(items)? {
                    None => Ok(true),
                    Some((a, b)) => self.fail(collect, || {
                        format!("items {a} and {b} are equal; items must be unique")
                    }),
                }
            }
            Kw::Contains { node, min, max } => {
                let Value::Array(items) = v else {
                    return Ok(true);
                };
                if *min == 0 && max.is_none() {
                    return Ok(true);
                }
                let mut found = 0u64;
                for item in items {
                    if self.test(*node, item)? {
                        found += 1;
                        // Past the upper bound nothing can change.
                        if max.is_some_and(|m| found > m) {
                            break;
                        }
                        if max.is_none() && found >= *min {
                            return Ok(true);
                        }
                    }
                }
                if found < *min {
                    return self.fail(collect, || {
                        format!(
                            "contains {found} matching item{}, fewer than {min}",
                            plural(found)
                        )
                    });
                }
                if let Some(m) = max
                    && found > *m
                {
                    return self.fail(collect, || {
                        format!("contains more than {m} matching item{}", plural(*m))
                    });
                }
                Ok(true)
            }
            Kw::Items { prefix, rest } => {
                let Value::Array(items) = v else {
                    return Ok(true);
                };
                let mut valid = true;
                for (i, item) in items.iter().enumerate() {
                    let Some(node) = prefix.get(i).or(rest.as_ref()) else {
                        break;
                    };
                    if !self.child(*node, Seg::Index(i), item, collect)? {
                        if !collect {
                            return Ok(false);
                        }
                        valid = false;
                    }
                }
                Ok(valid)
            }
            Kw::MinProperties(min) => {
                let Value::Object(map) = v else {
                    return Ok(true);
                };
                if map.len() as u64 >= *min {
                    return Ok(true);
                }
                self.fail(collect, || {
                    format!(
                        "has {} propert{}, fewer than {min}",
                        map.len(),
                        ies(map.len())
                    )
                })
            }
            Kw::MaxProperties(max) => {
                let Value::Object(map) = v else {
                    return Ok(true);
                };
                if map.len() as u64 <= *max {
                    return Ok(true);
                }
                self.fail(collect, || {
                    format!("has {} properties, more than {max}", map.len())
                })
            }
            Kw::Required(names) => {
                let Value::Object(map) = v else {
                    return Ok(true);
                };
                let mut valid = true;
                for name in names {
                    self.charge(1)?;
                    if !map.contains_key(name) {
                        self.fail(collect, || {
                            format!("{} is a required property", show_str(name))
                        })?;
                        if !collect {
                            return Ok(false);
                        }
                        valid = false;
                    }
                }
                Ok(valid)
            }
            Kw::DependentRequired(deps) => {
                let Value::Object(map) = v else {
                    return Ok(true);
                };
                let mut valid = true;
                for (name, needs) in deps {
                    self.charge(1)?;
                    if !map.contains_key(name) {
                        continue;
                    }
                    for need in needs {
                        self.charge(1)?;
                        if !map.contains_key(need) {
                            self.fail(collect, || {
                                format!(
                                    "{} is required when {} is present",
                                    show_str(need),
                                    show_str(name)
                                )
                            })?;
                            if !collect {
                                return Ok(false);
                            }
                            valid = false;
                        }
                    }
                }
                Ok(valid)
            }
            Kw::Properties {
                named,
                patterns,
                additional,
            } => {
                let Value::Object(map) = v else {
                    return Ok(true);
                };
                let mut valid = true;
                for (key, value) in map {
                    self.charge(1)?;
                    let mut seen = false;
                    if let Ok(i) = named.binary_search_by(|(n, _)| n.as_str().cmp(key)) {
                        seen = true;
                        valid &= self.child(named[i].1, Seg::Key(key), value, collect)?;
                    }
                    for (regex, node) in patterns {
                        if !collect && !valid {
                            break;
                        }
                        if self.matches(*regex, key)? {
                            seen = true;
                            valid &= self.child(*node, Seg::Key(key), value, collect)?;
                        }
                    }
                    if !seen && let Some(node) = additional {
                        valid &= self.child(*node, Seg::Key(key), value, collect)?;
                    }
                    if !collect && !valid {
                        return Ok(false);
                    }
                }
                Ok(valid)
            }
            Kw::PropertyNames(node) => {
                let Value::Object(map) = v else {
                    return Ok(true);
                };
                for key in map.keys() {
                    self.charge_bytes(key.len())?;
                    // The name is not part of the input; test it in a
                    // scratch evaluation that shares this one's budget.
                    let name = Value::String(key.clone());
                    let mut scratch = Eval {
                        schema: self.schema,
                        steps: self.steps,
                        depth: self.depth,
                        path: Vec::new(),
                        errors: Vec::new(),
                    };
                    let ok = scratch.test(*node, &name);
                    self.steps = scratch.steps;
                    if !ok? {
                        return self.fail(collect, || {
                            format!(
                                "property name {} is not allowed by propertyNames",
                                show_str(key)
                            )
                        });
                    }
                }
                Ok(true)
            }
            Kw::AllOf(nodes) => {
                let mut valid = true;
                for node in nodes {
                    if !self.eval(*node, v, collect)? {
                        if !collect {
                            return Ok(false);
                        }
                        valid = false;
                    }
                }
                Ok(valid)
            }
            Kw::AnyOf(nodes) => {
                for node in nodes {
                    if self.test(*node, v)? {
                        return Ok(true);
                    }
                }
                self.fail(collect, || {
                    format!("{} does not match any of the schemas in anyOf", show(v))
                })
            }
            Kw::OneOf(nodes) => {
                let mut first = None;
                for (i, node) in nodes.iter().enumerate() {
                    if self.test(*node, v)? {
                        if let Some(j) = first {
                            return self.fail(collect, || {
                                format!(
                                    "{} matches more than one of the schemas in oneOf ({j} and {i})",
                                    show(v)
                                )
                            });
                        }
                        first = Some(i);
                    }
                }
                if first.is_some() {
                    return Ok(true);
                }
                self.fail(collect, || {
                    format!("{} does not match any of the schemas in oneOf", show(v))
                })
            }
            Kw::Not(node) => {
                if !self.test(*node, v)? {
                    return Ok(true);
                }
                self.fail(collect, || format!("{} matches the schema in not", show(v)))
            }
            Kw::If {
                test,
                then,
                otherwise,
            } => {
                if then.is_none() && otherwise.is_none() {
                    return Ok(true);
                }
                let branch = if self.test(*test, v)? {
                    then
                } else {
                    otherwise
                };
                match branch {
                    Some(node) => self.eval(*node, v, collect),
                    None => Ok(true),
                }
            }
            Kw::DependentSchemas(deps) => {
                let Value::Object(map) = v else {
                    return Ok(true);
                };
                let mut valid = true;
                for (name, node) in deps {
                    self.charge(1)?;
                    if map.contains_key(name) && !self.eval(*node, v, collect)? {
                        if !collect {
                            return Ok(false);
                        }
                        valid = false;
                    }
                }
                Ok(valid)
            }
        }
    }

    fn matches(&mut self, id: RegexId, s: &str) -> Step {
        let pattern = &self.schema.regexes[id as usize];
        self.charge(1 + (s.len() as u64).saturating_mul(pattern.states) / STATE_BYTES_PER_STEP)?;
        Ok(pattern.regex.is_match(s))
    }

    /// JSON Schema equality (numbers by value, objects unordered), charged
    /// per value visited and per [`BYTES_PER_STEP`] bytes of string.
    fn equal(&mut self, a: &Value, b: &Value, depth: u32) -> Step {
        self.charge(1)?;
        if self.depth + depth > MAX_EVAL_DEPTH {
            return Err(Stop::Depth);
        }
        Ok(match (a, b) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(x), Value::Bool(y)) => x == y,
            (Value::Number(x), Value::Number(y)) => cmp_num(num(x), num(y)) == Ordering::Equal,
            (Value::String(x), Value::String(y)) => {
                if x.len() != y.len() {
                    return Ok(false);
                }
                self.charge_bytes(x.len())?;
                x == y
            }
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return Ok(false);
                }
                for (p, q) in x.iter().zip(y) {
                    if !self.equal(p, q, depth + 1)? {
                        return Ok(false);
                    }
                }
                true
            }
            (Value::Object(x), Value::Object(y)) => {
                if x.len() != y.len() {
                    return Ok(false);
                }
                for (k, p) in x {
                    self.charge(1)?;
                    let Some(q) = y.get(k) else { return Ok(false) };
                    if !self.equal(p, q, depth + 1)? {
                        return Ok(false);
                    }
                }
                true
            }
            _ => false,
        })
    }

    /// The first pair of equal items, by seeded hash then comparison.
    fn duplicate(&mut self, items: &'v [Value]) -> Result<Option<(usize, usize)>, Stop> {
        let mut hashes = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            hashes.push((self.hash(item, 0)?, i));
        }
        let n = items.len() as u64;
        self.charge(n.saturating_mul(u64::from(64 - n.leading_zeros())))?;
        hashes.sort_unstable();
        let mut first = None;
        for (k, &(h, i)) in hashes.iter().enumerate() {
            for &(h2, j) in &hashes[k + 1..] {
                if h2 != h {
                    break;
                }
                if self.equal(&items[i], &items[j], 0)? {
                    let pair = (i.min(j), i.max(j));
                    if first.is_none_or(|f| pair < f) {
                        first = Some(pair);
                    }
                }
            }
        }
        Ok(first)
    }

    /// A hash consistent with [`Self::equal`]: integral floats hash as
    /// integers, and object entries are combined in any order.
    fn hash(&mut self, v: &Value, depth: u32) -> Result<u64, Stop> {
        self.charge(1)?;
        if self.depth + depth > MAX_EVAL_DEPTH {
            return Err(Stop::Depth);
        }
        let mut h = self.schema.hash_seed.build_hasher();
        match v {
            Value::Null => 0u8.hash(&mut h),
            Value::Bool(b) => (1u8, b).hash(&mut h),
            Value::Number(n) => match num(n) {
                Num::Int(i) => (2u8, i).hash(&mut h),
                Num::Float(f) if f.fract() == 0.0 && f.abs() < 1e38 => {
                    (2u8, f as i128).hash(&mut h)
                }
                Num::Float(f) => (3u8, f.to_bits()).hash(&mut h),
            },
            Value::String(s) => {
                self.charge_bytes(s.len())?;
                (4u8, s).hash(&mut h);
            }
            Value::Array(items) => {
                5u8.hash(&mut h);
                for item in items {
                    self.hash(item, depth + 1)?.hash(&mut h);
                }
            }
            Value::Object(map) => {
                let mut sum = 0u64;
                for (k, item) in map {
                    self.charge_bytes(k.len())?;
                    let entry = (k, self.hash(item, depth + 1)?);
                    sum = sum.wrapping_add(self.schema.hash_seed.hash_one(entry));
                }
                (6u8, sum).hash(&mut h);
            }
        }
        Ok(h.finish())
    }
}

fn show_num(n: Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => f.to_string(),
    }
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn ies(n: usize) -> &'static str {
    if n == 1 { "y" } else { "ies" }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compile(schema: &Value) -> Result<InputSchema, SchemaError> {
        SchemaLoader::new().compile(&schema.to_string())
    }

    #[track_caller]
    fn schema(schema: Value) -> InputSchema {
        compile(&schema)
            .unwrap_or_else(|e| panic!("{} was refused: {e}", shorten(&schema.to_string(), 300)))
    }

    #[track_caller]
    fn refused(schema: &Value) -> String {
        match compile(schema) {
            Ok(_) => panic!("{schema} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    /// The messages of an invalid input; panics if it is accepted or hits a limit.
    #[track_caller]
    fn errors(s: &InputSchema, input: Value) -> Vec<String> {
        match s.validate(&input) {
            Err(Rejection::Invalid(e)) => e,
            other => panic!("{input}: expected invalid, got {other:?}"),
        }
    }

    /// Every `(schema, valid inputs, invalid inputs with a word of the message)`.
    #[track_caller]
    fn check(s: Value, good: &[Value], bad: &[(Value, &str)]) {
        let compiled = schema(s.clone());
        for input in good {
            assert_eq!(
                compiled.validate(input),
                Ok(()),
                "{s} should accept {input}"
            );
        }
        for (input, word) in bad {
            let errs = errors(&compiled, input.clone());
            assert!(
                errs.iter().any(|e| e.contains(word)),
                "{s} on {input}: {errs:?} should mention {word:?}"
            );
        }
    }

    #[test]
    fn type_single_and_list() {
        check(
            json!({ "type": "string" }),
            &[json!("x")],
            &[(json!(7), "is not of type \"string\"")],
        );
        check(
            json!({ "type": ["integer", "null"] }),
            &[json!(1), json!(1.0), json!(null), json!(-3)],
            &[
                (json!(1.5), "types \"null\", \"integer\""),
                (json!("1"), "is not of types"),
            ],
        );
        check(
            json!({ "type": "number" }),
            &[json!(1), json!(1.5)],
            &[(json!(true), "not of type")],
        );
        check(
            json!({ "type": "object" }),
            &[json!({})],
            &[(json!([]), "not of type \"object\"")],
        );
        check(
            json!({ "type": "array" }),
            &[json!([])],
            &[(json!({}), "array")],
        );
        check(
            json!({ "type": "boolean" }),
            &[json!(false)],
            &[(json!(0), "boolean")],
        );
        check(
            json!({ "type": "null" }),
            &[json!(null)],
            &[(json!(0), "null")],
        );
        assert!(refused(&json!({ "type": "str" })).contains("`type`"));
    }

    #[test]
    fn enum_and_const_compare_by_value() {
        check(
            json!({ "enum": ["a", 1, { "k": [1, 2] }, null] }),
            &[
                json!("a"),
                json!(1.0),
                json!({ "k": [1.0, 2] }),
                json!(null),
            ],
            &[
                (json!("b"), "is not one of"),
                (json!({ "k": [2, 1] }), "not one of"),
            ],
        );
        check(
            json!({ "const": { "a": 1, "b": "x" } }),
            &[json!({ "b": "x", "a": 1 })],
            &[
                (json!({ "a": 1 }), "is not"),
                (json!({ "a": 1, "b": "y" }), "is not"),
            ],
        );
    }

    #[test]
    fn numeric_bounds() {
        check(
            json!({ "minimum": 1, "maximum": 10 }),
            &[json!(1), json!(10), json!(5.5), json!("not a number")],
            &[
                (json!(0), "less than the minimum of 1"),
                (json!(10.01), "greater than the maximum of 10"),
            ],
        );
        check(
            json!({ "exclusiveMinimum": 0, "exclusiveMaximum": 1.5 }),
            &[json!(0.1), json!(1)],
            &[
                (json!(0), "less than or equal to"),
                (json!(1.5), "greater than or equal to"),
            ],
        );
        // Draft 4's boolean form.
        check(
            json!({ "minimum": 0, "exclusiveMinimum": true, "maximum": 2, "exclusiveMaximum": true }),
            &[json!(1)],
            &[
                (json!(0), "less than or equal"),
                (json!(2), "greater than or equal"),
            ],
        );
        check(
            json!({ "multipleOf": 3 }),
            &[json!(9), json!(-3), json!(0), json!(6.0)],
            &[(json!(7), "not a multiple of 3"), (json!(4.5), "multiple")],
        );
        check(
            json!({ "multipleOf": 0.1 }),
            &[json!(0.3), json!(2), json!(1.1)],
            &[(json!(0.35), "multiple of 0.1")],
        );
        // Integers past 2^53 compare exactly.
        check(
            json!({ "maximum": 9_007_199_254_740_993u64 }),
            &[json!(9_007_199_254_740_993u64)],
            &[(json!(9_007_199_254_740_994u64), "greater than")],
        );
        check(
            json!({ "minimum": 0 }),
            &[json!(u64::MAX), json!(0.0)],
            &[(json!(i64::MIN), "less than"), (json!(-0.5), "less than")],
        );
        assert!(refused(&json!({ "multipleOf": 0 })).contains("multipleOf"));
        assert!(refused(&json!({ "minimum": "1" })).contains("minimum"));
    }

    #[test]
    fn string_lengths_count_characters() {
        check(
            json!({ "minLength": 2, "maxLength": 3 }),
            &[json!("ab"), json!("éé"), json!("日本語"), json!(17)],
            &[
                (json!("a"), "shorter than 2 characters"),
                (json!("é"), "shorter"),
                (json!("abcd"), "longer than 3 characters"),
                (json!("日本語日"), "longer"),
            ],
        );
        assert!(refused(&json!({ "minLength": -1 })).contains("minLength"));
        schema(json!({ "minLength": 2.0 }));
    }

    #[test]
    fn patterns_are_ecma_flavoured_and_unanchored() {
        check(
            json!({ "pattern": "^[a-z]+\\d$" }),
            &[json!("abc1"), json!(5)],
            &[
                (json!("abc"), "does not match the pattern"),
                (json!("abc١"), "pattern"),
            ],
        );
        check(
            json!({ "pattern": "b" }),
            &[json!("abc")],
            &[(json!("xyz"), "pattern")],
        );
        // ECMA's `\w` and `.` are narrower than Rust's Unicode ones.
        check(
            json!({ "pattern": "^\\w+$" }),
            &[json!("a_1")],
            &[(json!("é"), "pattern")],
        );
        check(
            json!({ "pattern": "^a.b$" }),
            &[json!("axb")],
            &[(json!("a\rb"), "pattern")],
        );
        check(
            json!({ "pattern": "^[\\d.]+$" }),
            &[json!("1.2")],
            &[(json!("1,2"), "pattern")],
        );
        check(
            json!({ "pattern": "^[[]$" }),
            &[json!("[")],
            &[(json!("]"), "pattern")],
        );
        check(
            json!({ "pattern": "\\bword\\b" }),
            &[json!("a word")],
            &[(json!("swordfish"), "pattern")],
        );
        check(json!({ "pattern": "^a\\/b$" }), &[json!("a/b")], &[]);
        check(
            json!({ "pattern": "^{a}x{2}$" }),
            &[json!("{a}xx")],
            &[(json!("{a}x"), "pattern")],
        );
        check(
            json!({ "pattern": "^a{1,}$" }),
            &[json!("aa")],
            &[(json!(""), "pattern")],
        );
        let msg = refused(&json!({ "pattern": "(a)\\1" }));
        assert!(msg.contains("`pattern`"), "{msg}");
        let msg = refused(&json!({ "pattern": "a(?=b)" }));
        assert!(msg.contains("regex in `pattern`"), "{msg}");
        assert!(refused(&json!({ "pattern": 5 })).contains("pattern"));
    }

    #[test]
    fn array_keywords() {
        check(
            json!({ "minItems": 1, "maxItems": 2 }),
            &[json!([1]), json!([1, 2]), json!("x")],
            &[
                (json!([]), "fewer than 1"),
                (json!([1, 2, 3]), "more than 2"),
            ],
        );
        check(
            json!({ "uniqueItems": true }),
            &[json!([1, 2, "1", [1], { "a": 1 }, { "a": 2 }]), json!([])],
            &[
                (json!([1, 2, 1.0]), "items 0 and 2 are equal"),
                (json!([{ "a": 1, "b": 2 }, { "b": 2, "a": 1 }]), "equal"),
                (json!([[1, [2]], [1, [2.0]]]), "equal"),
            ],
        );
        check(json!({ "uniqueItems": false }), &[json!([1, 1])], &[]);
        check(
            json!({ "contains": { "type": "string" } }),
            &[json!([1, "a"]), json!({})],
            &[(json!([1, 2]), "contains 0 matching items, fewer than 1")],
        );
        check(
            json!({ "contains": { "const": 1 }, "minContains": 2, "maxContains": 3 }),
            &[json!([1, 1]), json!([1, 0, 1, 1])],
            &[
                (json!([1, 0]), "fewer than 2"),
                (json!([1, 1, 1, 1]), "more than 3"),
            ],
        );
        check(
            json!({ "contains": { "const": 1 }, "minContains": 0 }),
            &[json!([]), json!([2])],
            &[],
        );
        check(
            json!({ "items": { "type": "integer" } }),
            &[json!([1, 2]), json!([])],
            &[(
                json!([1, "x"]),
                "field /1: \"x\" is not of type \"integer\"",
            )],
        );
        check(
            json!({ "prefixItems": [{ "type": "string" }, { "type": "number" }], "items": false }),
            &[json!(["a", 1]), json!(["a"])],
            &[
                (json!([1]), "field /0"),
                (json!(["a", 1, 2]), "item 2 is not allowed"),
            ],
        );
        // Draft-07: `items` as an array and `additionalItems`.
        check(
            json!({ "items": [{ "type": "string" }], "additionalItems": { "type": "boolean" } }),
            &[json!(["a", true, false])],
            &[(json!(["a", 1]), "field /1")],
        );
    }

    #[test]
    fn object_keywords() {
        check(
            json!({ "minProperties": 1, "maxProperties": 2 }),
            &[json!({ "a": 1 }), json!([])],
            &[
                (json!({}), "has 0 properties, fewer than 1"),
                (json!({ "a": 1, "b": 2, "c": 3 }), "more than 2"),
            ],
        );
        check(
            json!({ "required": ["a", "b"] }),
            &[json!({ "a": 1, "b": 2 }), json!("x")],
            &[(json!({ "a": 1 }), "input: \"b\" is a required property")],
        );
        check(
            json!({ "dependentRequired": { "a": ["b"] } }),
            &[json!({ "b": 1 }), json!({ "a": 1, "b": 2 })],
            &[(json!({ "a": 1 }), "\"b\" is required when \"a\" is present")],
        );
        check(
            json!({ "dependencies": { "a": ["b"], "c": { "required": ["d"] } } }),
            &[json!({ "c": 1, "d": 2 }), json!({})],
            &[
                (json!({ "a": 1 }), "required when"),
                (json!({ "c": 1 }), "\"d\" is a required property"),
            ],
        );
        check(
            json!({ "dependentSchemas": { "a": { "maxProperties": 1 } } }),
            &[json!({ "a": 1 }), json!({ "b": 1, "c": 2 })],
            &[(json!({ "a": 1, "b": 2 }), "more than 1")],
        );
        check(
            json!({
                "properties": { "name": { "type": "string" } },
                "patternProperties": { "^x-": { "type": "integer" } },
                "additionalProperties": false
            }),
            &[json!({ "name": "n", "x-a": 1 }), json!({})],
            &[
                (
                    json!({ "name": 1 }),
                    "field /name: 1 is not of type \"string\"",
                ),
                (json!({ "x-a": "1" }), "field /x-a"),
                (
                    json!({ "bogus": true }),
                    "input: property \"bogus\" is not allowed",
                ),
            ],
        );
        check(
            json!({ "additionalProperties": { "type": "integer" } }),
            &[json!({ "a": 1 })],
            &[(json!({ "a~/b": "x" }), "field /a~0~1b: \"x\"")],
        );
        check(
            json!({ "propertyNames": { "maxLength": 3 } }),
            &[json!({ "abc": 1 })],
            &[(
                json!({ "abcd": 1 }),
                "property name \"abcd\" is not allowed",
            )],
        );
    }

    #[test]
    fn combinators() {
        check(
            json!({ "allOf": [{ "type": "integer" }, { "minimum": 2 }] }),
            &[json!(2)],
            &[
                (json!(1), "less than the minimum"),
                (json!("x"), "not of type"),
            ],
        );
        check(
            json!({ "anyOf": [{ "type": "integer" }, { "type": "null" }] }),
            &[json!(2), json!(null)],
            &[(json!("x"), "does not match any of the schemas in anyOf")],
        );
        check(
            json!({ "oneOf": [{ "type": "integer" }, { "minimum": 2 }] }),
            &[json!(1), json!(2.5)],
            &[
                (json!(3), "more than one of the schemas in oneOf (0 and 1)"),
                (json!(1.5), "any of the schemas in oneOf"),
            ],
        );
        check(
            json!({ "not": { "type": "string" } }),
            &[json!(1)],
            &[(json!("x"), "matches the schema in not")],
        );
        check(
            json!({
                "if": { "properties": { "kind": { "const": "file" } } },
                "then": { "required": ["path"] },
                "else": { "required": ["url"] }
            }),
            &[
                json!({ "kind": "file", "path": "p" }),
                json!({ "kind": "web", "url": "u" }),
            ],
            &[
                (json!({ "kind": "file" }), "\"path\" is a required"),
                (json!({ "kind": "web" }), "\"url\""),
            ],
        );
        check(json!({ "then": false }), &[json!(1)], &[]);
        assert!(refused(&json!({ "anyOf": [] })).contains("anyOf"));
    }

    #[test]
    fn boolean_schemas_and_empty_schema() {
        check(json!(true), &[json!(1), json!({ "a": [] })], &[]);
        check(json!({}), &[json!(null)], &[]);
        check(
            json!(false),
            &[],
            &[(json!(1), "input: no value is allowed here")],
        );
        check(
            json!({ "properties": { "a": false } }),
            &[json!({})],
            &[(json!({ "a": 1 }), "property \"a\" is not allowed")],
        );
        assert!(refused(&json!(5)).contains("must be an object or a boolean"));
    }

    #[test]
    fn refs_local_pointers_and_defs() {
        check(
            json!({
                "$defs": { "pos": { "type": "integer", "minimum": 1 } },
                "definitions": { "name": { "type": "string" } },
                "properties": {
                    "n": { "$ref": "#/$defs/pos" },
                    "s": { "$ref": "#/definitions/name" },
                    "t": { "$ref": "#/properties/s" }
                }
            }),
            &[json!({ "n": 1, "s": "x", "t": "y" })],
            &[
                (json!({ "n": 0 }), "field /n: 0 is less than"),
                (json!({ "t": 1 }), "field /t"),
            ],
        );
        // Percent-escapes and `~1` in pointers.
        check(
            json!({ "$defs": { "a/b c": { "type": "null" } }, "$ref": "#/$defs/a~1b%20c" }),
            &[json!(null)],
            &[(json!(1), "not of type \"null\"")],
        );
        // A recursive schema that descends is fine.
        check(
            json!({ "type": "array", "items": { "$ref": "#" } }),
            &[json!([[], [[]]])],
            &[(json!([[1]]), "field /0/0: 1 is not of type \"array\"")],
        );
        // `$ref` beside other keywords: both apply (2020-12).
        check(
            json!({ "$defs": { "s": { "type": "string" } }, "$ref": "#/$defs/s", "maxLength": 1 }),
            &[json!("a")],
            &[(json!("ab"), "longer"), (json!(1), "not of type")],
        );
        // The root's own `$id` is local.
        check(
            json!({ "$id": "https://example.com/s.json", "$defs": { "x": { "const": 1 } },
                    "properties": { "a": { "$ref": "https://example.com/s.json#/$defs/x" } } }),
            &[json!({ "a": 1 })],
            &[(json!({ "a": 2 }), "is not 1")],
        );
    }

    #[test]
    fn remote_and_broken_refs_are_refused_and_never_fetched() {
        for reference in [
            "http://127.0.0.1:1/schema.json",
            "https://example.com/s.json#/$defs/a",
            "other.json",
            "file:///etc/passwd",
            "//example.com/x",
        ] {
            let msg = refused(&json!({ "properties": { "a": { "$ref": reference } } }));
            assert!(msg.contains("not a local reference"), "{msg}");
            assert!(msg.contains("#/properties/a"), "where: {msg}");
        }
        let msg = refused(&json!({ "$ref": "#/$defs/missing" }));
        assert!(msg.contains("points at nothing"), "{msg}");
        let msg = refused(&json!({ "$ref": "#/$defs/x/0", "$defs": { "x": [1] } }));
        assert!(msg.contains("not a schema"), "{msg}");
        let msg = refused(&json!({ "$ref": "#foo", "$defs": { "x": { "$anchor": "foo" } } }));
        assert!(msg.contains("$anchor"), "{msg}");
        let msg = refused(&json!({ "$ref": "#/%zz" }));
        assert!(msg.contains("percent"), "{msg}");
    }

    #[test]
    fn unsupported_keywords_are_named() {
        for keyword in [
            "unevaluatedProperties",
            "unevaluatedItems",
            "$dynamicRef",
            "$recursiveRef",
        ] {
            let msg = refused(&json!({ "properties": { "a": { keyword: false } } }));
            assert!(msg.contains(&format!("`{keyword}`")), "{msg}");
            assert!(msg.contains("#/properties/a"), "{msg}");
        }
        let msg = refused(&json!({ "properties": { "a": { "$id": "x" } } }));
        assert!(
            msg.contains("`$id`") && msg.contains("#/properties/a"),
            "{msg}"
        );
        // Annotations are ignored.
        schema(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "urn:x",
            "title": "t", "description": "d", "default": 1, "examples": [1], "format": "uint32",
            "deprecated": true, "readOnly": true, "writeOnly": false, "$comment": "c",
            "contentMediaType": "text/plain", "x-custom": { "$ref": "http://never.invalid/" }
        }));
    }

    /// What schemars 1 derives for our tools: `$schema`, descriptions,
    /// `format`, `minimum` on unsigned ints, nullable types, enums as
    /// `oneOf` of `const`s, inline subschemas.
    #[test]
    fn schemars_style_schemas_load_and_check() {
        check(
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "path": { "description": "File.", "type": "string" },
                    "start_line": { "type": ["integer", "null"], "format": "uint", "minimum": 1 },
                    "mode": { "oneOf": [
                        { "type": "string", "const": "text", "description": "t" },
                        { "type": "string", "const": "bytes" }
                    ] },
                    "headers": { "type": "object", "additionalProperties": { "type": "string" } },
                    "body": { "anyOf": [{ "$ref": "#/$defs/Body" }, { "type": "null" }] }
                },
                "$defs": { "Body": { "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] } },
                "additionalProperties": false,
                "required": ["path"]
            }),
            &[
                json!({ "path": "a", "start_line": null, "mode": "text", "headers": { "a": "b" }, "body": { "text": "x" } }),
            ],
            &[
                (json!({}), "\"path\" is a required property"),
                (json!({ "path": 7 }), "field /path"),
                (
                    json!({ "path": "a", "start_line": 0 }),
                    "field /start_line: 0 is less than the minimum of 1",
                ),
                (json!({ "path": "a", "mode": "x" }), "field /mode"),
                (json!({ "path": "a", "body": {} }), "field /body"),
            ],
        );
    }

    #[test]
    fn at_most_three_errors_each_with_its_path() {
        let s = schema(json!({ "properties": {
            "a": { "type": "string" }, "b": { "type": "string" },
            "c": { "type": "string" }, "d": { "type": "string" }
        } }));
        let errs = errors(&s, json!({ "a": 1, "b": 2, "c": 3, "d": 4 }));
        assert_eq!(
            errs,
            vec![
                "field /a: 1 is not of type \"string\"",
                "field /b: 2 is not of type \"string\"",
                "field /c: 3 is not of type \"string\"",
            ]
        );
    }

    #[test]
    fn shown_values_are_short_whatever_the_input() {
        let s = schema(json!({ "type": "integer" }));
        let big = "x".repeat(1 << 20);
        let errs = errors(&s, json!(big));
        assert!(errs[0].len() < 200, "{}", errs[0].len());
        let key = "k".repeat(10_000);
        let s = schema(json!({ "additionalProperties": false }));
        let errs = errors(&s, json!({ key: 1 }));
        assert!(errs[0].len() < 200, "{}", errs[0].len());
    }

    // ---- load bounds ----

    #[test]
    fn text_size_is_bounded_per_schema_and_per_component() {
        let big = json!({ "description": "x".repeat(MAX_SCHEMA_BYTES) });
        let msg = refused(&big);
        assert!(
            msg.contains(&format!("bound of {MAX_SCHEMA_BYTES} bytes")),
            "{msg}"
        );

        let mut loader = SchemaLoader::new();
        let each = json!({ "description": "x".repeat(MAX_SCHEMA_BYTES - 100) }).to_string();
        let results: Vec<_> = (0..5).map(|_| loader.compile(&each).map(|_| ())).collect();
        assert!(results[..4].iter().all(Result::is_ok));
        let msg = results[4]
            .clone()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            msg.contains("all of the component's schemas together"),
            "{msg}"
        );
    }

    #[test]
    fn nesting_is_bounded_with_a_location() {
        let mut deep = json!({});
        for _ in 0..40 {
            deep = json!({ "items": deep });
        }
        schema(deep.clone()); // 40 objects deep is fine
        let mut text = String::new();
        for _ in 0..100 {
            text.push_str("{\"not\":");
        }
        text.push_str("{}");
        text.push_str(&"}".repeat(100));
        let msg = SchemaLoader::new()
            .compile(&text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("deeper than the bound of 64 levels"), "{msg}");
        assert!(msg.contains("line 1, column"), "{msg}");
        // Deeper than serde_json's own limit: still our message.
        let text = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let msg = SchemaLoader::new()
            .compile(&text)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("bound of 64 levels"), "{msg}");
        // Brackets inside strings do not count.
        schema(json!({ "description": "[[[[".repeat(100), "pattern": "\\[\\{" }));
    }

    #[test]
    fn node_count_is_bounded() {
        let props: Map<String, Value> = (0..MAX_NODES)
            .map(|i| (format!("p{i}"), json!({})))
            .collect();
        let msg = refused(&json!({ "properties": props }));
        assert!(
            msg.contains(&format!("bound of {MAX_NODES} subschemas")),
            "{msg}"
        );
        assert!(msg.contains("#/properties/p"), "{msg}");
    }

    #[test]
    fn regexes_are_bounded() {
        let msg = refused(&json!({ "pattern": "a".repeat(MAX_PATTERN_BYTES + 1) }));
        assert!(
            msg.contains(&format!("bound of {MAX_PATTERN_BYTES} bytes")),
            "{msg}"
        );
        let msg = refused(&json!({ "properties": { "x": { "pattern": "(a{100}){100}" } } }));
        assert!(msg.contains("compiled, it is over the bound"), "{msg}");
        assert!(msg.contains("#/properties/x"), "{msg}");
        let props: Map<String, Value> = (0..=MAX_REGEXES)
            .map(|i| (format!("p{i}"), json!({ "pattern": format!("^{i}$") })))
            .collect();
        let msg = refused(&json!({ "properties": props }));
        assert!(
            msg.contains(&format!("bound of {MAX_REGEXES} distinct regexes")),
            "{msg}"
        );
        // The same pattern many times is one regex.
        let props: Map<String, Value> = (0..500)
            .map(|i| (format!("p{i}"), json!({ "pattern": "^x$" })))
            .collect();
        schema(json!({ "properties": props }));
    }

    /// The bomb of issue 6: `$defs` links each `anyOf` two copies of the
    /// next. It is refused at load, naming the link where the count passes
    /// the bound.
    fn any_of_chain(keyword: &str, links: usize) -> Value {
        let mut defs = Map::new();
        for i in 0..links {
            let next = json!({ "$ref": format!("#/$defs/d{}", i + 1) });
            defs.insert(format!("d{i}"), json!({ keyword: [next.clone(), next] }));
        }
        defs.insert(format!("d{links}"), json!({ "type": "string" }));
        json!({ "$defs": defs, "$ref": "#/$defs/d0" })
    }

    #[test]
    fn combinator_chains_are_refused_at_load() {
        for keyword in ["anyOf", "oneOf", "allOf"] {
            for links in [20, 64] {
                let started = std::time::Instant::now();
                let msg = refused(&any_of_chain(keyword, links));
                assert!(
                    msg.contains(&format!("over the bound of {MAX_IN_PLACE_EVALUATIONS}")),
                    "{msg}"
                );
                // The innermost link over the bound: link k from the end
                // evaluates 2^(k+2) - 3 subschemas, 1,021 at k = 8.
                let expected = format!("#/$defs/d{} evaluates 1021 subschemas", links - 8);
                assert!(msg.contains(&expected), "{msg}");
                assert!(started.elapsed() < std::time::Duration::from_secs(2));
            }
        }
        // Short chains are fine.
        schema(any_of_chain("anyOf", 6));
    }

    #[test]
    fn in_place_cycles_are_refused() {
        let msg = refused(&json!({ "$ref": "#" }));
        assert!(msg.contains("refers back to itself"), "{msg}");
        let msg = refused(
            &json!({ "$defs": { "a": { "allOf": [{ "$ref": "#/$defs/b" }] },
                                              "b": { "not": { "$ref": "#/$defs/a" } } },
                                   "$ref": "#/$defs/a" }),
        );
        assert!(msg.contains("refers back to itself"), "{msg}");
        assert!(msg.contains("#/$defs/"), "{msg}");
        let msg = refused(&json!({ "if": { "$ref": "#" } }));
        assert!(msg.contains("refers back"), "{msg}");
        let msg = refused(&json!({ "dependentSchemas": { "a": { "$ref": "#" } } }));
        assert!(msg.contains("refers back"), "{msg}");
    }

    #[test]
    fn long_in_place_chains_are_refused() {
        let mut defs = Map::new();
        for i in 0..100 {
            defs.insert(
                format!("d{i}"),
                json!({ "$ref": format!("#/$defs/d{}", i + 1) }),
            );
        }
        defs.insert("d100".to_owned(), json!({}));
        let msg = refused(&json!({ "$defs": defs, "$ref": "#/$defs/d0" }));
        assert!(
            msg.contains(&format!("bound of {MAX_IN_PLACE_DEPTH} subschemas")),
            "{msg}"
        );
    }

    // ---- the metered validator ----

    fn steps(s: &InputSchema, input: &Value) -> (u64, Result<(), Rejection>) {
        s.validate_counting(input)
    }

    #[track_caller]
    fn assert_limit(s: &InputSchema, input: &Value, word: &str) {
        let (spent, result) = steps(s, input);
        match result {
            Err(Rejection::Limit(msg)) => assert!(msg.contains(word), "{msg}"),
            other => panic!("expected a limit, got {other:?} after {spent} steps"),
        }
        // Work is charged before it is done: past the budget, nothing ran.
        assert!(spent > STEP_BUDGET || word.contains("levels"), "{spent}");
    }

    /// Nested arrays `depth` deep.
    fn nested(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..depth {
            v = json!([v]);
        }
        v
    }

    /// Passes every load bound, yet descending doubles the work per level:
    /// both `anyOf` branches recurse into the items and fail at the bottom.
    #[test]
    fn descending_exponential_schema_stops_at_the_budget() {
        let s = schema(json!({
            "anyOf": [
                { "type": "array", "items": { "$ref": "#" } },
                { "type": "array", "items": { "$ref": "#" } }
            ]
        }));
        let (cheap, result) = steps(&s, &nested(3));
        assert!(matches!(result, Err(Rejection::Invalid(_))), "{result:?}");
        assert!(cheap < 200, "{cheap}");
        assert_limit(&s, &nested(60), "budget of 1000000 steps");
    }

    #[test]
    fn deep_inputs_stop_at_the_depth_bound() {
        let s = schema(json!({ "items": { "$ref": "#" } }));
        // Built in code, deeper than any parser would allow.
        let v = deep(20_000);
        assert_limit(&s, &v, "bound of 256 levels");
        // Deep but within the bound is fine.
        assert_eq!(s.validate(&nested(100)), Ok(()));
        // Hashing recurses too (equality stops at the schema's side,
        // which is at most 64 deep).
        let s = schema(json!({ "uniqueItems": true }));
        let pair = Value::Array(vec![v, deep(20_000)]);
        assert_limit(&s, &pair, "levels");
        let Value::Array(pair) = pair else { return };
        pair.into_iter().for_each(drop_deep);
    }

    /// Nested arrays `depth` deep, built without recursion.
    fn deep(depth: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        v
    }

    /// serde_json drops recursively; unwind a deep value iteratively.
    fn drop_deep(mut v: Value) {
        while let Value::Array(mut items) = v {
            v = items.pop().unwrap_or(Value::Null);
        }
    }

    #[test]
    fn big_inputs_stop_at_the_budget() {
        // Every item is checked: 2 million items cannot fit the budget.
        let s = schema(json!({ "items": { "type": "integer" } }));
        let many = Value::Array(vec![json!(1); 2_000_000]);
        assert_limit(&s, &many, "budget");
        // A regex over a long string is charged by length.
        let s = schema(json!({ "pattern": "^(a|b|c|d)*e$" }));
        let long = json!("a".repeat(64 << 20));
        assert_limit(&s, &long, "budget");
        // Equality with a big enum.
        let values: Vec<Value> = (0..10_000).map(|i| json!({ "k": i })).collect();
        let s = schema(json!({ "items": { "enum": values } }));
        assert_limit(
            &s,
            &Value::Array(vec![json!({ "k": 9_999 }); 100]),
            "budget",
        );
        // uniqueItems with many equal-hash candidates is still bounded.
        let s = schema(json!({ "uniqueItems": true }));
        let same = Value::Array(vec![json!("x".repeat(100)); 1_000_000]);
        assert_limit(&s, &same, "budget");
    }

    #[test]
    fn ordinary_inputs_are_cheap() {
        let s = schema(json!({
            "type": "object",
            "properties": { "path": { "type": "string" }, "content": { "type": "string", "maxLength": 10_000_000 } },
            "required": ["path", "content"],
            "additionalProperties": false
        }));
        let (spent, result) = steps(&s, &json!({ "path": "a", "content": "x".repeat(1 << 20) }));
        assert_eq!(result, Ok(()));
        assert!(spent < 100, "{spent}");
        // An unconstrained value is one step, whatever its size.
        let s = schema(json!({ "properties": { "input": {} } }));
        let (spent, _) = steps(
            &s,
            &json!({ "input": vec![json!({"a": [1, 2, 3]}); 100_000] }),
        );
        assert!(spent < 20, "{spent}");
    }

    /// A small deterministic generator (xorshift64*), so the property test
    /// needs no extra crate and a failure names its seed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }

    const KEYS: &[&str] = &["a", "b", "x-1", "", "~/"];
    const PATTERNS: &[&str] = &[
        "^a",
        "(a+)+$",
        "^(a|aa)*b$",
        "\\d{2,4}",
        "[[:alpha:]]",
        "^.{0,3}$",
        "(?=x)",
        "{",
    ];

    fn random_schema(rng: &mut Rng, depth: u32) -> Value {
        if depth == 0 || rng.below(4) == 0 {
            return match rng.below(6) {
                0 => json!(true),
                1 => json!(false),
                2 => json!({ "$ref": "#" }),
                3 => json!({ "$ref": "#/$defs/d" }),
                _ => {
                    json!({ "type": *rng.pick(&["string", "integer", "number", "array", "object", "null", "boolean"]) })
                }
            };
        }
        let mut map = Map::new();
        for _ in 0..=rng.below(3) {
            let d = depth - 1;
            let (k, v) = match rng.below(30) {
                0 => ("type", json!([*rng.pick(&["string", "integer"]), "null"])),
                1 => ("enum", json!([1, "a", [1], { "a": null }])),
                2 => ("const", random_value(rng, 2)),
                3 => ("multipleOf", json!(*rng.pick(&[0.5, 2.0, 3.0]))),
                4 => ("minimum", json!(rng.below(5) as i64 - 2)),
                5 => ("exclusiveMaximum", json!(2.5)),
                6 => ("minLength", json!(rng.below(3))),
                7 => ("maxLength", json!(rng.below(3))),
                8 => ("pattern", json!(*rng.pick(PATTERNS))),
                9 => ("minItems", json!(rng.below(3))),
                10 => ("maxItems", json!(rng.below(3))),
                11 => ("uniqueItems", json!(true)),
                12 => ("contains", random_schema(rng, d)),
                13 => ("items", random_schema(rng, d)),
                14 => (
                    "prefixItems",
                    json!([random_schema(rng, d), random_schema(rng, d)]),
                ),
                15 => ("required", json!([*rng.pick(KEYS)])),
                16 => (
                    "properties",
                    json!({ *rng.pick(KEYS): random_schema(rng, d) }),
                ),
                17 => (
                    "patternProperties",
                    json!({ *rng.pick(PATTERNS): random_schema(rng, d) }),
                ),
                18 => ("additionalProperties", random_schema(rng, d)),
                19 => ("propertyNames", random_schema(rng, d)),
                20 => (
                    "allOf",
                    json!([random_schema(rng, d), random_schema(rng, d)]),
                ),
                21 => (
                    "anyOf",
                    json!([random_schema(rng, d), random_schema(rng, d)]),
                ),
                22 => (
                    "oneOf",
                    json!([random_schema(rng, d), random_schema(rng, d)]),
                ),
                23 => ("not", random_schema(rng, d)),
                24 => ("if", random_schema(rng, d)),
                25 => ("then", random_schema(rng, d)),
                26 => ("else", random_schema(rng, d)),
                27 => (
                    "dependentSchemas",
                    json!({ *rng.pick(KEYS): random_schema(rng, d) }),
                ),
                28 => (
                    "dependentRequired",
                    json!({ *rng.pick(KEYS): [*rng.pick(KEYS)] }),
                ),
                _ => ("maxProperties", json!(rng.below(3))),
            };
            map.insert(k.to_owned(), v);
        }
        if depth == 3 {
            map.insert("$defs".to_owned(), json!({ "d": random_schema(rng, 2) }));
        }
        Value::Object(map)
    }

    fn random_value(rng: &mut Rng, depth: u32) -> Value {
        let leaf = depth == 0 || rng.below(3) == 0;
        match rng.below(if leaf { 5 } else { 7 }) {
            0 => Value::Null,
            1 => json!(rng.below(2) == 0),
            2 => json!(*rng.pick(&[0.0, 1.0, -2.0, 2.5, 1e300])),
            3 => json!(rng.below(7) as i64 - 3),
            4 => json!(*rng.pick(&["", "a", "aaaaaaaaaaaaaaaaaaaaaaaa!", "12", "é"])),
            5 => Value::Array(
                (0..rng.below(4))
                    .map(|_| random_value(rng, depth - 1))
                    .collect(),
            ),
            _ => Value::Object(
                (0..rng.below(4))
                    .map(|_| ((*rng.pick(KEYS)).to_owned(), random_value(rng, depth - 1)))
                    .collect(),
            ),
        }
    }

    /// Random schemas and inputs: compiling never panics; validating never
    /// panics, never passes the budget without saying so, keeps at most
    /// three errors, and agrees with the yes-or-no evaluation.
    #[test]
    fn random_schemas_and_inputs_keep_the_invariants() {
        let (mut compiled, mut limited) = (0, 0);
        for seed in 1..=1_500u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let schema_json = random_schema(&mut rng, 3);
            let Ok(s) = compile(&schema_json) else {
                continue;
            };
            compiled += 1;
            for _ in 0..6 {
                let input = random_value(&mut rng, 4);
                let (spent, result) = s.validate_counting(&input);
                let context = || format!("seed {seed}: schema {schema_json} input {input}");
                match &result {
                    Ok(()) => {}
                    Err(Rejection::Invalid(errs)) => {
                        assert!((1..=MAX_ERRORS).contains(&errs.len()), "{}", context());
                    }
                    Err(Rejection::Limit(_)) => limited += 1,
                }
                if spent > STEP_BUDGET {
                    assert!(matches!(result, Err(Rejection::Limit(_))), "{}", context());
                }
                let mut quick = Eval {
                    schema: &s,
                    steps: 0,
                    depth: 0,
                    path: Vec::new(),
                    errors: Vec::new(),
                };
                match quick.test(ROOT, &input) {
                    Ok(valid) if !matches!(result, Err(Rejection::Limit(_))) => {
                        assert_eq!(valid, result.is_ok(), "{}", context());
                        assert!(quick.errors.is_empty(), "{}", context());
                    }
                    _ => {}
                }
                assert_eq!(
                    s.validate_counting(&input),
                    (spent, result),
                    "{}",
                    context()
                );
            }
        }
        // The generator must reach the validator, not only the refusals.
        assert!(compiled > 300, "only {compiled} random schemas compiled");
        let _ = limited;
    }

    /// How long one full budget takes, for docs/security.md:
    /// `cargo test --release -p longhand-host --lib schema::tests::time_full_budget -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn time_full_budget() {
        let cases: Vec<(&str, Value, Value)> = vec![
            (
                "anyOf pair descending",
                json!({ "anyOf": [
                    { "type": "array", "items": { "$ref": "#" } },
                    { "type": "array", "items": { "$ref": "#" } }
                ] }),
                nested(60),
            ),
            (
                "items of integers",
                json!({ "items": { "type": "integer", "minimum": 0 } }),
                Value::Array(vec![json!(1); 2_000_000]),
            ),
            (
                "enum of objects",
                json!({ "items": { "enum": (0..1000).map(|i| json!({ "k": i, "v": [i] })).collect::<Vec<_>>() } }),
                Value::Array(vec![json!({ "k": -1, "v": [-1] }); 10_000]),
            ),
            (
                "uniqueItems of equal strings",
                json!({ "uniqueItems": true }),
                Value::Array(vec![json!("x".repeat(40)); 2_000_000]),
            ),
            (
                "patternProperties on many keys",
                json!({ "patternProperties": { "^[a-z]+[0-9]*$": { "type": "integer" } } }),
                Value::Object(
                    (0..400_000)
                        .map(|i| (format!("key{i}"), json!(i)))
                        .collect(),
                ),
            ),
        ];
        // Regexes: the worst cost per byte, against what one full budget
        // of that regex would read.
        let mut rng = Rng(7);
        let ab: String = (0..(1 << 20))
            .map(|_| if rng.below(2) == 0 { 'a' } else { 'b' })
            .collect();
        let regex_cases: Vec<(&str, String)> = vec![
            ("^(a|b)*c$", ab.clone()),
            ("(a|b)*a(a|b){20}$", ab.clone()),
            ("(a|b)*a(a|b){60}c", ab.clone()),
            ("((a|b)*a(a|b){12}){1,8}c", ab.clone()),
            (
                "(\\w|a|b){1,100}(\\w|a|b){1,100}(\\w|a|b){1,100}c",
                ab.clone(),
            ),
            ("[a-q][^u-z]{13}x", ab.clone()),
            ("(?i)(a|b|c|d|e|f|g|h)*[a-h]{30}z", ab.clone()),
            ("(a{1,20}b{1,20}){1,20}c", ab.clone()),
            ("^[a-z0-9_-]{1,64}$", ab.clone()),
            ("[a-z0-9_-]{1,64}c", ab.clone()),
            ("(\\p{L}|b){1,30}c", ab.clone()),
            (
                "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
                ab.clone(),
            ),
            ("a", ab.clone()),
            ("(a|b)*a(a|b){200}c", ab.clone()),
            ("(.*a){30}c", ab.clone()),
        ];
        for (pattern, text) in regex_cases {
            let Ok(s) = compile(&json!({ "pattern": pattern })) else {
                println!("regex {pattern}: refused at load");
                continue;
            };
            let states = s.regexes[0].states;
            let started = std::time::Instant::now();
            let matched = s.regexes[0].regex.is_match(&text);
            let ns_per_byte = started.elapsed().as_nanos() as f64 / text.len() as f64;
            // One budget reads STEP_BUDGET * STATE_BYTES_PER_STEP / states bytes.
            let budget_ms =
                ns_per_byte * (STEP_BUDGET * STATE_BYTES_PER_STEP / states) as f64 / 1e6;
            println!(
                "regex {pattern}: {ns_per_byte:.2} ns/byte, {states} states, {:.2} ns/byte/state, one budget = {budget_ms:.1} ms (matched {matched})",
                ns_per_byte / states as f64
            );
        }
        // Load: the most a schema inside the bounds can cost to compile.
        let big: Map<String, Value> = (0..MAX_REGEXES)
            .map(|i| {
                (
                    format!("p{i}"),
                    json!({ "pattern": format!("[a-z0-9_-]{{1,250}}{i}x{{1,200}}") }),
                )
            })
            .collect();
        let nodes: Map<String, Value> = (0..MAX_NODES - 1)
            .map(|i| (format!("p{i}"), json!({ "type": "string" })))
            .collect();
        for (name, text) in [
            (
                "64 regexes near the size bound",
                json!({ "properties": big }).to_string(),
            ),
            (
                "9,999 subschemas",
                json!({ "properties": nodes }).to_string(),
            ),
            (
                "anyOf chain of 64 (refused)",
                any_of_chain("anyOf", 64).to_string(),
            ),
        ] {
            let started = std::time::Instant::now();
            let result = SchemaLoader::new().compile(&text).map(|_| ());
            println!(
                "load {name} ({} bytes): {:?}, {:?}",
                text.len(),
                started.elapsed(),
                result.err()
            );
        }
        for (name, s, input) in cases {
            let s = schema(s);
            let started = std::time::Instant::now();
            let (spent, result) = steps(&s, &input);
            let elapsed = started.elapsed();
            let ok = match &result {
                Ok(()) => "ok".to_owned(),
                Err(Rejection::Invalid(_)) => "invalid".to_owned(),
                Err(Rejection::Limit(m)) => format!("limit ({m})"),
            };
            println!(
                "{name}: {spent} steps in {elapsed:?} ({:.1} ns/step): {ok}",
                elapsed.as_nanos() as f64 / spent as f64
            );
        }
    }
}
