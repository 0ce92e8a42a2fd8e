//! Property tests of what a guest hands the host: component bytes, the
//! `describe` answer (names, texts, input schemas) and call output. Any of
//! them ends in a value or an error — a [`LoadError`] or a
//! [`CallError`](longhand_hands::CallError) — never a panic, a hang,
//! or a host that cannot serve the next call.
//!
//! Compiling a component is the slow part (every mutant has a new digest,
//! so nothing is cached), so case counts are small and fixed: 40 mutants
//! (about 3 s in a debug build), 10 describe answers (about 0.7 s each:
//! the patched fixture is compiled every time) and 256 outputs (1 s). Each test uses a `Hands` of its own with no
//! compile cache, so mutants neither fill the shared cache nor stay loaded
//! in the shared host. `PROPTEST_RNG_SEED` replays a run.
//!
//! The `describe` fuzzer writes each generated answer into the `escapes`
//! fixture's describe slot (a fixed-size run of bytes after a marker in its
//! data segment), which changes no length, so the component stays valid
//! and answers `describe` with exactly the generated record.

use std::time::{Duration, Instant};

use longhand_hands::{Grants, Hands, HandsConfig, LoadError, ToolSource};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{Value, json};

use crate::fixtures;

/// The marker and slot length of `tests/fixtures/escapes` (see its docs).
const SLOT_MAGIC: &[u8] = b"longhand-fixture-describe-slot:\n";
const SLOT_LEN: usize = 16 * 1024;

/// Longer than any one load or call may take with default limits (the
/// 30 s timeout), so a case over it is a hang, not a slow case.
const CASE_LIMIT: Duration = Duration::from_secs(45);

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        // Each shrink step compiles a component: keep a failure's report
        // quick rather than minimal.
        max_shrink_iters: 32,
        ..ProptestConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn fresh_hands() -> Hands {
    Hands::new(HandsConfig::default()).expect("engine")
}

/// After whatever a case did, the same host still loads and runs a tool.
async fn still_serves(hands: &Hands) -> Result<(), TestCaseError> {
    let noop = hands
        .load(ToolSource::File(fixtures::NOOP.as_ref()))
        .await
        .map_err(|e| TestCaseError::fail(format!("noop no longer loads: {e}")))?;
    let out = hands
        .call(&noop, &Grants::default(), "noop", &json!({}))
        .await;
    prop_assert_eq!(out.result, Ok(json!({})));
    Ok(())
}

/// One edit of a component's bytes.
#[derive(Debug, Clone)]
enum Edit {
    /// Flip one bit.
    Flip(prop::sample::Index, u8),
    /// Overwrite one byte.
    Set(prop::sample::Index, u8),
    /// Cut everything from here on.
    Truncate(prop::sample::Index),
    /// Insert bytes.
    Insert(prop::sample::Index, Vec<u8>),
    /// Remove up to this many bytes.
    Remove(prop::sample::Index, usize),
    /// Copy a run of the component over another place in it (sections
    /// and LEB128 lengths from elsewhere, rather than noise).
    Copy(prop::sample::Index, prop::sample::Index, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<prop::sample::Index>;
    prop_oneof![
        4 => (at(), 0u8..8).prop_map(|(i, bit)| Edit::Flip(i, bit)),
        3 => (at(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        1 => at().prop_map(Edit::Truncate),
        2 => (at(), prop::collection::vec(any::<u8>(), 1..16)).prop_map(|(i, b)| Edit::Insert(i, b)),
        2 => (at(), 1usize..64).prop_map(|(i, n)| Edit::Remove(i, n)),
        2 => (at(), at(), 1usize..256).prop_map(|(from, to, n)| Edit::Copy(from, to, n)),
    ]
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    if bytes.is_empty() {
        return;
    }
    let len = bytes.len();
    match edit {
        Edit::Flip(i, bit) => bytes[i.index(len)] ^= 1 << bit,
        Edit::Set(i, b) => bytes[i.index(len)] = *b,
        Edit::Truncate(i) => bytes.truncate(i.index(len)),
        Edit::Insert(i, b) => {
            let at = i.index(len + 1);
            bytes.splice(at..at, b.iter().copied());
        }
        Edit::Remove(i, n) => {
            let at = i.index(len);
            bytes.drain(at..(at + n).min(len));
        }
        Edit::Copy(from, to, n) => {
            let from = from.index(len);
            let to = to.index(len);
            let n = (*n).min(len - from).min(len - to);
            bytes.copy_within(from..from + n, to);
        }
    }
}

#[test]
fn mutated_components_load_or_are_refused() {
    let original = std::fs::read(fixtures::NOOP).expect("read the noop fixture");
    let rt = runtime();
    let hands = fresh_hands();
    let loaded = std::cell::Cell::new(0u32);
    let mut runner = TestRunner::new(config(40));
    runner
        .run(&prop::collection::vec(edit(), 1..=4), |edits| {
            let mut bytes = original.clone();
            for e in &edits {
                apply(&mut bytes, e);
            }
            rt.block_on(async {
                let started = Instant::now();
                let label = "mutant";
                match hands
                    .load(ToolSource::Bytes {
                        label,
                        bytes: &bytes,
                    })
                    .await
                {
                    Ok(tool) => {
                        loaded.set(loaded.get() + 1);
                        // A mutant that still loads is called like any tool.
                        if let Some(spec) = tool.info().tools.first() {
                            let _ = hands
                                .call(&tool, &Grants::default(), &spec.name, &json!({}))
                                .await;
                        }
                    }
                    Err(err) => {
                        let message = err.to_string();
                        prop_assert!(message.contains(label), "unlabelled: {message}");
                    }
                }
                prop_assert!(
                    started.elapsed() < CASE_LIMIT,
                    "{edits:?} took {:?}",
                    started.elapsed()
                );
                still_serves(&hands).await
            })
        })
        .unwrap_or_else(|e| panic!("{e}"));
    // Not an assertion: most mutants are refused, and which ones load
    // depends on the seed. Shown with `--nocapture`.
    eprintln!("{} of 40 mutants loaded", loaded.get());
}

/// Whether the `escapes` fixture's slot can be found (exactly once).
fn slot_offset(component: &[u8]) -> usize {
    let hits: Vec<usize> = component
        .windows(SLOT_MAGIC.len())
        .enumerate()
        .filter(|(_, w)| *w == SLOT_MAGIC)
        .map(|(i, _)| i + SLOT_MAGIC.len())
        .collect();
    assert_eq!(hits.len(), 1, "the describe slot marker must occur once");
    hits[0]
}

/// `component` with `describe` JSON written into its slot, or `None` when
/// it does not fit.
fn patched(component: &[u8], offset: usize, describe: &Value) -> Option<Vec<u8>> {
    let text = describe.to_string();
    if text.len() > SLOT_LEN {
        return None;
    }
    let mut bytes = component.to_vec();
    let slot = &mut bytes[offset..offset + SLOT_LEN];
    slot.fill(b' ');
    slot[..text.len()].copy_from_slice(text.as_bytes());
    Some(bytes)
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "\\PC{0,32}",
        2 => any::<String>(),
        1 => Just(String::new()),
        1 => (".{1,8}", 64usize..256).prop_map(|(s, n)| s.repeat(n)),
    ]
}

fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        30 => "[a-z][a-z0-9_-]{0,10}",
        1 => text(),
        1 => Just("a".repeat(65)),
    ]
}

/// JSON Schemas, mostly meaningful: the keywords a validator must bound,
/// including `$ref` into `$defs` and the combinators.
fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        prop::sample::select(vec![
            "string", "integer", "number", "boolean", "object", "array", "null"
        ])
        .prop_map(|t| json!({"type": t})),
        Just(json!({})),
        Just(json!(true)),
        Just(json!(false)),
        (0u64..8, 0u64..64)
            .prop_map(|(min, max)| json!({"type": "string", "minLength": min, "maxLength": max})),
        "[a-z.*+?()|\\[\\]{}^$\\\\0-9,]{0,12}"
            .prop_map(|p| json!({"type": "string", "pattern": p})),
        prop::collection::vec(any::<i64>(), 1..4).prop_map(|v| json!({"enum": v})),
        any::<i64>().prop_map(|n| json!({"const": n})),
        Just(json!({"$ref": "#/$defs/a"})),
        Just(json!({"$ref": "#"})),
        Just(json!({"format": "email"})),
    ];
    let schema = leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::btree_map("[a-z]{1,6}", inner.clone(), 0..4).prop_map(|props| {
                let required: Vec<&String> = props.keys().take(1).collect();
                json!({"type": "object", "properties": props, "required": required})
            }),
            inner
                .clone()
                .prop_map(|items| json!({"type": "array", "items": items})),
            (
                prop::sample::select(vec!["anyOf", "oneOf", "allOf"]),
                prop::collection::vec(inner.clone(), 1..4)
            )
                .prop_map(|(k, v)| json!({ k: v })),
            inner.clone().prop_map(|s| json!({"not": s})),
            inner.prop_map(|s| json!({"additionalProperties": s})),
        ]
    });
    // Tool inputs are objects: most schemas are the property `x` of one,
    // whose `$defs` holds what `#/$defs/a` names (itself a schema that
    // may refer back: recursion the validator must bound).
    prop_oneof![
        12 => (schema.clone(), schema.clone()).prop_map(|(x, a)| json!({
            "$defs": {"a": a},
            "type": "object",
            "properties": {"x": x},
        })),
        2 => schema,
        1 => Just(json!({"$ref": "#/$defs/missing"})),
    ]
}

fn input_schema() -> impl Strategy<Value = String> {
    prop_oneof![
        24 => schema().prop_map(|s| s.to_string()),
        1 => text(),
        1 => Just("{\"type\":".to_owned()),
    ]
}

fn describe() -> impl Strategy<Value = Value> {
    let tool = (
        tool_name(),
        text(),
        input_schema(),
        prop::sample::select(vec!["read-only", "idempotent", "writes", "?"]),
    )
        .prop_map(|(name, description, input_schema, effect)| {
            json!({"name": name, "description": description,
                   "input_schema": input_schema, "effect": effect})
        });
    let strings = || prop::collection::vec(text(), 0..3);
    (
        (text(), text(), text()),
        prop_oneof![
            12 => prop::collection::vec(tool, 1..4),
            1 => Just(Vec::new()),
        ],
        prop::collection::vec((text(), any::<bool>(), text()), 0..3),
        (strings(), strings(), strings()),
    )
        .prop_map(
            |((name, version, description), tools, dirs, (hosts, env, secrets))| {
                json!({"name": name, "version": version, "description": description,
                   "tools": tools, "dirs": dirs, "hosts": hosts, "env": env, "secrets": secrets})
            },
        )
}

/// Inputs for a tool: objects with an `x` of any JSON, and other values.
fn input() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    prop_oneof![
        4 => value.clone().prop_map(|x| json!({"x": x})),
        1 => value,
    ]
}

#[test]
fn any_describe_answer_loads_or_is_refused_and_inputs_validate_in_bounded_time() {
    let original = std::fs::read(fixtures::ESCAPES).expect("read the escapes fixture");
    let offset = slot_offset(&original);
    let rt = runtime();
    let hands = fresh_hands();
    let (loaded, calls) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    let mut runner = TestRunner::new(config(10));
    runner
        .run(
            &(describe(), prop::collection::vec(input(), 1..4)),
            |(describe, inputs)| {
                let Some(bytes) = patched(&original, offset, &describe) else {
                    return Ok(());
                };
                rt.block_on(async {
                    let started = Instant::now();
                    let label = "patched";
                    match hands
                        .load(ToolSource::Bytes {
                            label,
                            bytes: &bytes,
                        })
                        .await
                    {
                        Ok(tool) => {
                            loaded.set(loaded.get() + 1);
                            // What was accepted is what the guest said.
                            let names: Vec<&str> =
                                tool.info().tools.iter().map(|t| t.name.as_str()).collect();
                            let sent: Vec<&str> = describe["tools"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(|t| t["name"].as_str())
                                .collect();
                            prop_assert_eq!(names, sent);
                            for spec in &tool.info().tools {
                                for input in &inputs {
                                    let out = hands
                                        .call(&tool, &Grants::default(), &spec.name, input)
                                        .await;
                                    calls.set(calls.get() + u32::from(out.result.is_ok()));
                                }
                            }
                        }
                        Err(err) => {
                            prop_assert!(
                                matches!(err, LoadError::Describe { .. }),
                                "a patched describe is refused as a describe: {err:?}"
                            );
                        }
                    }
                    prop_assert!(
                        started.elapsed() < CASE_LIMIT,
                        "took {:?}",
                        started.elapsed()
                    );
                    still_serves(&hands).await
                })
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "{} of 10 describe answers loaded; {} inputs passed their schema",
        loaded.get(),
        calls.get()
    );
}

#[test]
fn the_describe_slot_is_what_describe_reports() {
    // The fuzzer above is only as good as the patching: a patch must show
    // up in `describe`, or every case would test the built-in answer.
    let original = std::fs::read(fixtures::ESCAPES).expect("read the escapes fixture");
    let offset = slot_offset(&original);
    let describe = json!({
        "name": "patched", "version": "9.9.9", "description": "from the slot",
        "tools": [{"name": "only", "description": "d",
                   "input_schema": "{\"type\":\"object\"}", "effect": "idempotent"}],
        "hosts": ["example.org"],
    });
    let bytes = patched(&original, offset, &describe).expect("fits");
    runtime().block_on(async {
        let hands = fresh_hands();
        let tool = hands
            .load(ToolSource::Bytes {
                label: "patched",
                bytes: &bytes,
            })
            .await
            .expect("a well-formed patch loads");
        assert_eq!(tool.info().name, "patched");
        assert_eq!(tool.info().version, "9.9.9");
        assert_eq!(tool.info().requests.hosts, ["example.org"]);
        assert!(tool.tool("only").is_some());
        // And unpatched, the fixture reports its hostile built-in answer.
        let plain = hands
            .load(ToolSource::File(fixtures::ESCAPES.as_ref()))
            .await
            .expect("the escapes fixture loads");
        assert!(plain.info().name.starts_with("escapes\u{1b}"));
    });
}

/// Output text a guest might return: JSON of every shape, JSON cut short
/// or spliced, deep nesting, huge numbers, plain noise.
fn output() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => input().prop_map(|v| v.to_string()),
        2 => (input(), any::<prop::sample::Index>()).prop_map(|(v, at)| {
            let text = v.to_string();
            let mut cut = at.index(text.len() + 1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text[..cut].to_owned()
        }),
        1 => (1usize..5000, prop::sample::select(vec!["[", "{\"a\":"]))
            .prop_map(|(n, open)| open.repeat(n)),
        1 => (1usize..200).prop_map(|n| format!("{}{}", "[".repeat(n), "]".repeat(n))),
        1 => "-?[0-9]{1,400}(\\.[0-9]{0,50})?(e-?[0-9]{1,5})?",
        1 => text(),
    ]
}

#[test]
fn any_output_text_is_parsed_or_refused() {
    let rt = runtime();
    let hands = fresh_hands();
    let tool = rt
        .block_on(hands.load(ToolSource::File(fixtures::ESCAPES.as_ref())))
        .expect("the escapes fixture loads");
    let mut runner = TestRunner::new(config(256));
    runner
        .run(&output(), |text| {
            rt.block_on(async {
                let out = hands
                    .call(&tool, &Grants::default(), "say", &json!({"say": text}))
                    .await;
                match serde_json::from_str::<Value>(&text) {
                    // JSON the host can read is passed on exactly...
                    Ok(expected) => prop_assert_eq!(out.result, Ok(expected)),
                    // ...and anything else is an error, not a panic.
                    Err(_) => prop_assert!(out.result.is_err(), "{:?}", out.result),
                }
                Ok(())
            })
        })
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let out = hands
            .call(&tool, &Grants::default(), "say", &json!({"say": "[1]"}))
            .await;
        assert_eq!(out.result, Ok(json!([1])));
    });
}
