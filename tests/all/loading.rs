//! Loading: what the host refuses before a single guest instruction runs.
//!
//! A component is judged by its digest pin and its imports, read from its
//! bytes, before it is compiled: one that is not the pinned component, or
//! imports an unknown interface, is refused with the digest or import named,
//! and is never compiled or cached; bytes that are not a component are
//! refused with advice. (`wasi:sockets` loads, to be refused call by call:
//! see `sockets`.)

use longhand_hands::{
    Grants, Hands, HandsConfig, LoadError, PinnedLoadError, ToolSource, digest_of,
};
use serde_json::json;

use crate::fixtures;
use crate::support::{assert_still_serves, hands, probe};

async fn load_err(source: ToolSource<'_>) -> LoadError {
    match hands().load(source).await {
        Ok(tool) => panic!("{} loaded, but it should have been refused", tool.label()),
        Err(err) => err,
    }
}

#[tokio::test]
async fn probe_loads_and_describes_itself() {
    let probe = probe().await;
    assert_eq!(probe.info().name, "probe");
    assert!(probe.digest().starts_with("sha256:"), "{}", probe.digest());
    let echo = probe.tool("echo").expect("the probe offers echo");
    assert_eq!(echo.input_schema["required"], serde_json::json!(["value"]));
    // The probe imports files, environment and http; the table must see that.
    for cap in ["filesystem", "env", "http"] {
        assert!(
            probe.capabilities().contains(&cap),
            "{cap} missing from {:?}",
            probe.capabilities()
        );
    }
}

#[tokio::test]
async fn unknown_imports_are_refused_by_name() {
    let err = load_err(ToolSource::File(fixtures::BAD_IMPORT.as_ref())).await;
    let LoadError::Unsupported { cause, .. } = &err else {
        panic!("expected Unsupported, got {err:?}");
    };
    assert_eq!(cause.import, "evil:backdoor/api");
    let message = err.to_string();
    assert!(message.contains("`evil:backdoor/api`"), "{message}");
    assert!(
        message.contains("longhand:tool/host"),
        "the message should list what is allowed: {message}"
    );
    assert_still_serves().await;
}

#[tokio::test]
async fn garbage_is_not_a_component() {
    let err = load_err(ToolSource::Bytes {
        label: "garbage.wasm",
        bytes: b"#!/bin/sh\necho not wasm\n",
    })
    .await;
    assert!(matches!(err, LoadError::NotComponent { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("garbage.wasm"), "{message}");
    assert!(message.contains("magic"), "{message}");
    assert_still_serves().await;
}

#[tokio::test]
async fn truncated_component_is_refused() {
    let bytes = std::fs::read(fixtures::PROBE).expect("read the probe");
    let err = load_err(ToolSource::Bytes {
        label: "half-a-probe",
        bytes: &bytes[..bytes.len() / 2],
    })
    .await;
    assert!(matches!(err, LoadError::NotComponent { .. }), "{err:?}");
    assert!(err.to_string().contains("half-a-probe"), "{err}");
    assert_still_serves().await;
}

#[tokio::test]
async fn core_module_is_refused_with_advice() {
    // The smallest valid core module: magic and version 1.
    let err = load_err(ToolSource::Bytes {
        label: "core.wasm",
        bytes: b"\0asm\x01\0\0\0",
    })
    .await;
    assert!(matches!(err, LoadError::NotComponent { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("core WebAssembly module"), "{message}");
    assert!(message.contains("wasm32-wasip2"), "{message}");
    assert_still_serves().await;
}

#[tokio::test]
async fn component_without_tools_export_does_not_fit() {
    // The smallest valid component (magic, version 0xd, layer 1): it
    // imports nothing, so it passes the import check, and exports nothing.
    let err = load_err(ToolSource::Bytes {
        label: "empty-component",
        bytes: b"\0asm\x0d\0\x01\0",
    })
    .await;
    assert!(matches!(err, LoadError::Link { .. }), "{err:?}");
    assert!(err.to_string().contains("longhand:tool"), "{err}");
    assert_still_serves().await;
}

#[tokio::test]
async fn missing_file_is_a_read_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nope.wasm");
    let err = load_err(ToolSource::File(&path)).await;
    assert!(matches!(err, LoadError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("nope.wasm"), "{err}");
}

/// The compile cache: entries land in a private directory, are used by the
/// next host, and an unusable entry is replaced rather than trusted.
///
/// Each step builds a fresh [`Hands`], as a new process would: one host
/// keeps loaded components in memory and would not touch the disk again.
#[tokio::test]
async fn compile_cache_is_private_reused_and_self_healing() {
    use std::os::unix::fs::PermissionsExt;

    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let load_and_call = async || {
        let hands = Hands::new(HandsConfig {
            cache_dir: Some(cache.clone()),
            ..HandsConfig::default()
        })
        .expect("engine");
        let tool = hands
            .load(ToolSource::File(fixtures::PROBE.as_ref()))
            .await
            .expect("load");
        let outcome = hands
            .call(&tool, &Grants::default(), "echo", &json!({ "value": 1 }))
            .await;
        assert_eq!(outcome.result, Ok(json!({ "value": 1 })));
        tool.digest().trim_start_matches("sha256:").to_owned()
    };
    let entries = || cache_entries(&cache);
    let mtime = |path: &std::path::Path| {
        std::fs::metadata(path)
            .and_then(|m| m.modified())
            .expect("mtime")
    };

    let hex = load_and_call().await;
    let mode = std::fs::metadata(&cache)
        .expect("cache dir")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "cache dir mode {mode:o}");
    let listed = entries();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let entry = &listed[0];
    let name = entry
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert!(name.starts_with(&hex), "{name} is not keyed by the digest");

    // The next host reads the entry instead of writing a new one.
    let written = mtime(entry);
    load_and_call().await;
    assert_eq!(mtime(entry), written);

    // A torn or foreign entry is ignored, and a good one written in its place.
    std::fs::write(entry, b"not a compiled component").expect("corrupt");
    load_and_call().await;
    assert!(
        std::fs::metadata(entry).expect("entry").len() > 1000,
        "entry not rewritten"
    );
    assert_eq!(entries().len(), 1, "{:?}", entries());
}

/// Pulley (the interpreter 32-bit ARM runs on, and the choice of hosts
/// that map no executable memory) gives the same answers as native code,
/// and shares a cache with a native host without taking its entries.
#[tokio::test]
async fn the_interpreter_answers_like_native_code_and_caches_apart() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let host = |interpreter| {
        Hands::new(HandsConfig {
            cache_dir: Some(cache.clone()),
            cache_key: None,
            max_concurrent_calls: 2,
            interpreter,
            kept_dir: None,
        })
        .expect("engine")
    };
    let input = json!({"filter": "[.[] | . * 2]", "input": [1, 2, 3]});
    let mut answers = Vec::new();
    for interpreter in [false, true] {
        let hands = host(interpreter);
        let json = hands
            .load(ToolSource::Builtin("json"))
            .await
            .expect("load json");
        let outcome = hands.call(&json, &Grants::default(), "query", &input).await;
        let probe = hands
            .load(ToolSource::File(fixtures::PROBE.as_ref()))
            .await
            .expect("load the probe");
        let echoed = hands
            .call(&probe, &Grants::default(), "echo", &json!({"value": "é"}))
            .await;
        assert_eq!(echoed.result, Ok(json!({"value": "é"})));
        answers.push(outcome.result.expect("query"));
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(
        answers[0],
        json!({"results": [[2, 4, 6]], "truncated": false})
    );
    // Two components, each compiled once per engine: four entries.
    assert_eq!(cache_entries(&cache).len(), 4);
}

/// A fresh host with a compile cache of its own, and a way to list it.
fn host_with_cache(cache: &std::path::Path) -> Hands {
    Hands::new(HandsConfig {
        cache_dir: Some(cache.to_owned()),
        max_concurrent_calls: 2,
        ..HandsConfig::default()
    })
    .expect("engine")
}

/// The compiled entries of a cache (`*.cwasm`): the host key that seals
/// them lives beside them when no key directory is set, and is no entry.
fn cache_entries(cache: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cache)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
                .collect()
        })
        .unwrap_or_default()
}

/// A pinned digest is compared before anything is compiled: the wrong
/// component costs a hash, leaves the cache empty and is never compiled;
/// the right one then compiles once and is cached.
#[tokio::test]
async fn digest_mismatch_is_refused_before_compiling() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let hands = host_with_cache(&cache);
    let source = ToolSource::File(fixtures::PROBE.as_ref());
    let pin = format!("sha256:{}", "0".repeat(64));

    for _ in 0..2 {
        let err = hands
            .load_pinned(source, &pin)
            .await
            .expect_err("the probe is not the pinned component");
        let PinnedLoadError::Mismatch {
            expected, actual, ..
        } = &err
        else {
            panic!("expected a mismatch, got {err:?}");
        };
        assert_eq!(expected, &pin);
        assert!(actual.starts_with("sha256:"), "{actual}");
        let message = err.to_string();
        assert!(message.contains(&pin), "{message}");
        assert!(message.contains("update the pin"), "{message}");
    }
    assert_eq!(hands.compiles(), 0, "a refused component was compiled");
    assert_eq!(cache_entries(&cache), Vec::<std::path::PathBuf>::new());

    let bytes = std::fs::read(fixtures::PROBE).expect("read the probe");
    let tool = hands
        .load_pinned(source, &digest_of(&bytes))
        .await
        .expect("the right digest loads");
    assert_eq!(tool.digest(), digest_of(&bytes));
    assert_eq!(hands.compiles(), 1);
    assert_eq!(
        cache_entries(&cache).len(),
        1,
        "{:?}",
        cache_entries(&cache)
    );
}

/// A component refused for its imports is judged from its bytes: however
/// often it is tried, it is never compiled and never cached.
#[tokio::test]
async fn refused_imports_are_never_compiled_or_cached() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cache = tmp.path().join("cache");
    let hands = host_with_cache(&cache);
    for _ in 0..3 {
        let err = hands
            .load(ToolSource::File(fixtures::BAD_IMPORT.as_ref()))
            .await
            .expect_err("refused");
        let LoadError::Unsupported { cause, .. } = &err else {
            panic!("expected Unsupported, got {err:?}");
        };
        assert_eq!(cause.import, "evil:backdoor/api");
    }
    // Pinned to its own digest, it is refused for its imports all the same.
    let bytes = std::fs::read(fixtures::BAD_IMPORT).expect("read the fixture");
    let err = hands
        .load_pinned(
            ToolSource::File(fixtures::BAD_IMPORT.as_ref()),
            &digest_of(&bytes),
        )
        .await
        .expect_err("refused");
    assert!(
        matches!(err, PinnedLoadError::Load(LoadError::Unsupported { .. })),
        "{err:?}"
    );
    assert_eq!(hands.compiles(), 0, "a refused component was compiled");
    assert_eq!(cache_entries(&cache), Vec::<std::path::PathBuf>::new());
}

/// A session pinned to a built-in this binary no longer embeds (a later
/// release changed `fs`) resumes on the bytes it froze: every built-in
/// loaded is kept by digest, and a pinned load whose built-in differs runs
/// the kept bytes. Stand-in for "the older release's fs": the probe's
/// bytes, kept under their digest. Without kept bytes the pin is refused
/// as before; kept bytes changed on disk are refused, never run.
#[tokio::test]
async fn a_pinned_builtin_a_later_binary_changed_runs_the_kept_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let kept = tmp.path().join("components");
    let host = |kept_dir: Option<std::path::PathBuf>| {
        Hands::new(HandsConfig {
            kept_dir,
            max_concurrent_calls: 2,
            ..HandsConfig::default()
        })
        .expect("engine")
    };

    // Loading a built-in keeps its bytes under its digest.
    let hands = host(Some(kept.clone()));
    let fs = hands
        .load(ToolSource::Builtin("fs"))
        .await
        .expect("fs loads");
    let hex = fs
        .digest()
        .strip_prefix("sha256:")
        .expect("a sha256 digest");
    let fs_file = kept.join(format!("sha256-{hex}.wasm"));
    assert_eq!(
        digest_of(&std::fs::read(&fs_file).expect("fs is kept")),
        fs.digest()
    );

    // "The release that froze the session" embedded other bytes as `fs`.
    let old = std::fs::read(fixtures::PROBE).expect("read the probe");
    let old_digest = digest_of(&old);
    let old_hex = old_digest.strip_prefix("sha256:").unwrap();
    let old_file = kept.join(format!("sha256-{old_hex}.wasm"));

    // Nothing kept for that digest: refused as changed, as before.
    let err = hands
        .load_pinned(ToolSource::Builtin("fs"), &old_digest)
        .await
        .expect_err("no kept bytes for the pin");
    assert!(
        matches!(err, PinnedLoadError::Mismatch { .. }),
        "expected a mismatch, got {err:?}"
    );

    // Kept: the pinned load runs exactly the frozen bytes.
    std::fs::write(&old_file, &old).expect("keep the old bytes");
    let tool = host(Some(kept.clone()))
        .load_pinned(ToolSource::Builtin("fs"), &old_digest)
        .await
        .expect("the kept bytes load");
    assert_eq!(tool.digest(), old_digest);
    assert_eq!(tool.info().name, "probe", "the kept component runs");
    assert!(tool.label().contains("kept"), "{}", tool.label());

    // The kept file changed after it was kept: refused, naming it.
    let mut changed = old.clone();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    std::fs::write(&old_file, &changed).expect("change the kept bytes");
    let err = host(Some(kept.clone()))
        .load_pinned(ToolSource::Builtin("fs"), &old_digest)
        .await
        .expect_err("changed kept bytes are refused");
    let message = err.to_string();
    assert!(message.contains("kept bytes of built-in `fs`"), "{message}");
    assert!(message.contains("changed after it was kept"), "{message}");

    // A host that keeps nothing refuses the pin as before.
    let err = host(None)
        .load_pinned(ToolSource::Builtin("fs"), &old_digest)
        .await
        .expect_err("no kept directory");
    assert!(matches!(err, PinnedLoadError::Mismatch { .. }), "{err:?}");
}
