//! Receipts and the checks made before a guest runs: schema validation,
//! tool names, grant digests, grant validity.

use longhand_hands::receipt::{MAX_LOG_LINE_BYTES, MAX_LOG_LINES};
use longhand_hands::{Access, CallError, Grants};
use serde_json::json;

use crate::support::{assert_still_serves, call_probe, dir, err, ok, probe};

#[tokio::test]
async fn receipt_counts_fuel_time_memory_and_bytes() {
    let input = json!({ "value": { "nested": [1, 2, 3], "text": "héllo" } });
    let outcome = call_probe(&Grants::default(), "echo", input.clone()).await;
    let out = ok(&outcome);
    assert_eq!(out["value"], input["value"]);
    let r = &outcome.receipt;
    assert_eq!(r.tool, "echo");
    assert_eq!(r.component_digest, probe().await.digest());
    assert!(r.fuel_used > 0);
    assert!(r.wall_us > 0);
    assert!(r.peak_memory_bytes > 0);
    assert_eq!(r.input_bytes, input.to_string().len() as u64);
    // The probe writes its output with serde_json, compact, as the host
    // re-serialises it.
    assert_eq!(r.output_bytes, out.to_string().len() as u64);
    assert_eq!(r.logs.len(), 1);
    assert_eq!(
        (r.logs[0].level.as_str(), r.logs[0].message.as_str()),
        ("info", "echo ran")
    );
    assert!(
        r.used.is_empty() && r.denied.is_empty() && r.limits_hit.is_empty(),
        "{r:?}"
    );
    assert!(
        r.stdout.text.is_empty() && r.stderr.text.is_empty(),
        "{r:?}"
    );
}

#[tokio::test]
async fn log_and_progress_are_recorded() {
    let outcome = call_probe(
        &Grants::default(),
        "log",
        json!({ "message": "working on it" }),
    )
    .await;
    ok(&outcome);
    let r = &outcome.receipt;
    assert_eq!(r.logs.len(), 1);
    assert_eq!(
        (r.logs[0].level.as_str(), r.logs[0].message.as_str()),
        ("warn", "working on it")
    );
    let progress = r.progress.as_ref().expect("progress recorded");
    assert_eq!((progress.done, progress.total), (1, Some(2)));
    assert_eq!(progress.message, "half way");
}

/// A guest cannot grow its receipt without bound: lines past the cap are
/// counted, and long lines are cut.
#[tokio::test]
async fn log_lines_are_capped_in_number_and_length() {
    let outcome = call_probe(&Grants::default(), "log", json!({ "count": 300 })).await;
    ok(&outcome);
    assert_eq!(outcome.receipt.logs.len(), MAX_LOG_LINES);
    assert_eq!(outcome.receipt.logs_dropped, 300 - MAX_LOG_LINES as u64);

    let long = "é".repeat(MAX_LOG_LINE_BYTES); // twice the byte cap
    let outcome = call_probe(&Grants::default(), "log", json!({ "message": long })).await;
    ok(&outcome);
    let line = &outcome.receipt.logs[0].message;
    let (kept, marker) = line.rsplit_once(" … [").expect("a cut line says so");
    assert!(
        kept.len() <= MAX_LOG_LINE_BYTES && kept.len() > MAX_LOG_LINE_BYTES - 4,
        "{}",
        kept.len()
    );
    assert_eq!(
        marker,
        format!("{} bytes dropped]", long.len() - kept.len())
    );
    assert!(long.starts_with(kept), "cut inside a character");
}

#[tokio::test]
async fn schema_violations_are_refused_before_the_guest_runs() {
    for (input, field) in [(json!({}), "value"), (json!({ "path": 7 }), "/path")] {
        let tool = if field == "value" { "echo" } else { "read" };
        let outcome = call_probe(&Grants::default(), tool, input.clone()).await;
        let CallError::InvalidInput { message } = err(&outcome) else {
            panic!(
                "{tool} {input}: expected invalid input, got {:?}",
                err(&outcome)
            );
        };
        assert!(
            message.contains(field),
            "{tool} {input}: the message should name {field}: {message}"
        );
        // Proof the guest never ran: no instance, no fuel, no log line.
        assert!(
            outcome.receipt.logs.is_empty(),
            "{:?}",
            outcome.receipt.logs
        );
        assert_eq!(outcome.receipt.fuel_used, 0);
    }
    assert_still_serves().await;
}

#[tokio::test]
async fn unknown_tool_is_not_found_and_lists_the_tools() {
    let outcome = call_probe(&Grants::default(), "rm_rf", json!({})).await;
    let CallError::NotFound { message } = err(&outcome) else {
        panic!("expected not found, got {:?}", err(&outcome));
    };
    assert!(message.contains("rm_rf"), "{message}");
    assert!(message.contains("echo"), "{message}");
}

#[tokio::test]
async fn grants_for_another_digest_are_refused() {
    let grants = Grants {
        component_digest: Some(format!("sha256:{}", "0".repeat(64))),
        ..Grants::default()
    };
    let outcome = call_probe(&grants, "echo", json!({ "value": 1 })).await;
    let CallError::Refused { message } = err(&outcome) else {
        panic!("expected refused, got {:?}", err(&outcome));
    };
    assert!(message.contains(probe().await.digest()), "{message}");

    let grants = Grants {
        component_digest: Some(probe().await.digest().to_owned()),
        ..Grants::default()
    };
    ok(&call_probe(&grants, "echo", json!({ "value": 1 })).await);
}

#[tokio::test]
async fn invalid_grants_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // A relative guest path is refused when the grant is made.
    let made = longhand_hands::DirGrant::new(tmp.path(), "relative/path", Access::ReadOnly);
    let message = made.expect_err("a relative guest path").to_string();
    assert!(message.contains("absolute"), "{message}");
    // Grants that do not hang together are refused before the guest runs.
    let grants = Grants {
        dirs: vec![
            dir(tmp.path(), "/same", Access::ReadOnly),
            dir(tmp.path(), "/same", Access::ReadWrite),
        ],
        ..Grants::default()
    };
    let outcome = call_probe(&grants, "echo", json!({ "value": 1 })).await;
    let CallError::Refused { message } = err(&outcome) else {
        panic!("expected refused, got {:?}", err(&outcome));
    };
    assert!(message.contains("same guest path"), "{message}");
    assert!(outcome.receipt.logs.is_empty());
}

/// No guest state survives a call: each runs in a fresh instance.
#[tokio::test]
async fn calls_do_not_share_guest_state() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let grants = Grants {
        dirs: vec![dir(tmp.path(), "/w", Access::ReadWrite)],
        ..Grants::default()
    };
    ok(&call_probe(&grants, "write", json!({ "path": "/w/f", "content": "1" })).await);
    // The next call has no grant: what the last one could see is gone.
    let outcome = call_probe(&Grants::default(), "read", json!({ "path": "/w/f" })).await;
    assert_eq!(ok(&outcome)["ok"], json!(false), "{}", ok(&outcome));
}

/// The smallest tool: no input parsing, constant output. Its receipt shows
/// the floor of a call — a fresh instance costs fuel for the component's own
/// start-up, and bytes are counted exactly.
#[tokio::test]
async fn the_noop_tool_has_a_minimal_receipt() {
    use longhand_hands::ToolSource;
    let tool = crate::support::hands()
        .load(ToolSource::File(crate::fixtures::NOOP.as_ref()))
        .await
        .unwrap_or_else(|e| panic!("cannot load noop: {e}"));
    let input = json!({ "ignored": true });
    let outcome = crate::support::hands()
        .call(&tool, &Grants::default(), "noop", &input)
        .await;
    assert_eq!(ok(&outcome), &json!({}));
    let r = &outcome.receipt;
    assert_eq!(r.input_bytes, input.to_string().len() as u64);
    assert_eq!(r.output_bytes, 2);
    assert!(r.used.is_empty() && r.denied.is_empty() && r.limits_hit.is_empty());
    assert!(
        r.fuel_used > 0 && r.fuel_used < 1_000_000,
        "fuel {}",
        r.fuel_used
    );
}
