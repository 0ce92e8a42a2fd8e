//! Loading: what the host refuses before a single guest instruction runs.
//!
//! A component is judged by its imports against the capability table; one
//! that imports raw sockets or an unknown interface is refused with the
//! import named, and bytes that are not a component are refused with advice.

use longhand_host::hands::{Grants, Hands, HandsConfig, LoadError, ToolSource};
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
async fn raw_sockets_are_refused_at_load() {
    let err = load_err(ToolSource::File(fixtures::SOCKETS.as_ref())).await;
    let LoadError::Unsupported { cause, .. } = &err else {
        panic!("expected Unsupported, got {err:?}");
    };
    assert!(
        cause.import.starts_with("wasi:sockets/"),
        "{}",
        cause.import
    );
    let message = err.to_string();
    assert!(message.contains("wasi:sockets/"), "{message}");
    assert!(
        message.contains("wasi:http"),
        "the message should point to http: {message}"
    );
    assert_still_serves().await;
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
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&cache)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };
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
