//! Limits: a guest that loops, hoards memory, recurses, floods or panics is
//! stopped, the caller learns which limit and why, and the host carries on.

use std::time::{Duration, Instant};

use longhand_hands::{CallError, Grants, HostPattern, Limits};
use serde_json::json;

use crate::support::{assert_still_serves, call_probe, err, limit_message, ok};

fn with_limits(limits: Limits) -> Grants {
    Grants {
        limits,
        ..Grants::default()
    }
}

#[tokio::test]
async fn infinite_loop_is_stopped_by_the_timeout() {
    let timeout = Duration::from_millis(500);
    let grants = with_limits(Limits {
        timeout,
        ..Limits::default()
    });
    let started = Instant::now();
    let outcome = call_probe(&grants, "spin", json!({})).await;
    let elapsed = started.elapsed();
    let message = limit_message(&outcome);
    assert!(message.contains("timeout"), "{message}");
    assert!(
        message.contains("500ms"),
        "the message should give the limit: {message}"
    );
    assert!(elapsed >= timeout, "stopped early, after {elapsed:?}");
    assert!(
        elapsed < timeout + Duration::from_secs(1),
        "took {elapsed:?}"
    );
    assert!(!outcome.receipt.limits_hit.is_empty());
    assert!(outcome.receipt.wall() >= timeout);
    assert_still_serves().await;
}

#[tokio::test]
async fn infinite_loop_runs_out_of_fuel() {
    let grants = with_limits(Limits {
        fuel: 5_000_000,
        ..Limits::default()
    });
    let outcome = call_probe(&grants, "spin", json!({})).await;
    let message = limit_message(&outcome);
    assert!(message.contains("fuel"), "{message}");
    assert!(message.contains("5000000"), "{message}");
    assert_eq!(outcome.receipt.fuel_used, 5_000_000);
    assert_still_serves().await;
}

#[tokio::test]
async fn memory_bomb_hits_the_memory_limit() {
    let grants = with_limits(Limits {
        memory_bytes: 32 << 20,
        ..Limits::default()
    });
    let outcome = call_probe(&grants, "alloc", json!({ "mib": 1024 })).await;
    let message = limit_message(&outcome);
    assert!(message.contains("memory"), "{message}");
    assert!(message.contains("32 MiB"), "{message}");
    let peak = outcome.receipt.peak_memory_bytes;
    assert!(peak > 16 << 20 && peak <= 32 << 20, "peak {peak}");
    assert_still_serves().await;
}

#[tokio::test]
async fn allocation_within_the_limit_works() {
    let grants = with_limits(Limits {
        memory_bytes: 64 << 20,
        ..Limits::default()
    });
    let outcome = call_probe(&grants, "alloc", json!({ "mib": 16 })).await;
    assert_eq!(ok(&outcome)["allocated_mib"], 16);
    assert!(outcome.receipt.peak_memory_bytes >= 16 << 20);
    assert!(
        outcome.receipt.limits_hit.is_empty(),
        "{:?}",
        outcome.receipt.limits_hit
    );
}

#[tokio::test]
async fn stack_overflow_is_a_limit() {
    let outcome = call_probe(&Grants::default(), "recurse", json!({})).await;
    let message = limit_message(&outcome);
    assert!(message.contains("stack"), "{message}");
    assert_still_serves().await;
}

#[tokio::test]
async fn stdio_flood_is_captured_and_capped() {
    let grants = with_limits(Limits {
        max_stdio_bytes: 1024,
        ..Limits::default()
    });
    let outcome = call_probe(
        &grants,
        "flood",
        json!({ "stdout": 100_000, "stderr": 5000 }),
    )
    .await;
    ok(&outcome);
    let receipt = &outcome.receipt;
    assert_eq!(receipt.stdout.text.len(), 1024);
    assert!(receipt.stdout.text.bytes().all(|b| b == b'x'));
    assert_eq!(receipt.stdout.dropped_bytes, 100_000 - 1024);
    assert_eq!(receipt.stderr.text.len(), 1024);
    assert_eq!(receipt.stderr.dropped_bytes, 5000 - 1024);
    assert_still_serves().await;
}

#[tokio::test]
async fn oversized_output_is_a_limit() {
    let grants = with_limits(Limits {
        max_output_bytes: 10_000,
        ..Limits::default()
    });
    let outcome = call_probe(&grants, "flood", json!({ "output": 20_000 })).await;
    let message = limit_message(&outcome);
    assert!(message.contains("output"), "{message}");
    assert!(message.contains("10000 byte limit"), "{message}");
    assert!(outcome.receipt.output_bytes > 20_000);

    // Just under the limit is fine.
    let outcome = call_probe(&grants, "flood", json!({ "output": 9_000 })).await;
    assert_eq!(ok(&outcome)["pad"].as_str().map(str::len), Some(9_000));
    assert_still_serves().await;
}

#[tokio::test]
async fn guest_panic_is_a_crash_with_its_message() {
    let outcome = call_probe(
        &Grants::default(),
        "panic",
        json!({ "message": "the probe gave up on purpose (42)" }),
    )
    .await;
    let CallError::Crashed { message } = err(&outcome) else {
        panic!("expected a crash, got {:?}", err(&outcome));
    };
    assert!(
        message.contains("the probe gave up on purpose (42)"),
        "{message}"
    );
    assert!(
        outcome.receipt.stderr.text.contains("panicked"),
        "{:?}",
        outcome.receipt.stderr
    );
    assert_still_serves().await;
}

#[tokio::test]
async fn guest_exit_is_a_crash_with_its_status() {
    let outcome = call_probe(&Grants::default(), "exit", json!({ "code": 3 })).await;
    let CallError::Crashed { message } = err(&outcome) else {
        panic!("expected a crash, got {:?}", err(&outcome));
    };
    // wasi:cli/exit in Preview 2 carries only success or failure, so
    // `exit(3)` arrives as a failure, status 1.
    assert!(message.contains("exited with status 1"), "{message}");
    assert_still_serves().await;
}

/// The timeout is wall-clock and covers time spent waiting on the host: a
/// server that never answers cannot hold a call past its limit. The
/// listener is never accepted from; the kernel completes the handshake and
/// the request sits in its queue unanswered.
#[tokio::test]
async fn timeout_covers_a_hung_http_request() {
    let tarpit = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = tarpit.local_addr().expect("addr");
    let timeout = Duration::from_millis(500);
    let grants = Grants {
        hosts: vec![HostPattern::parse(&addr.to_string()).expect("pattern")],
        limits: Limits {
            timeout,
            ..Limits::default()
        },
        ..Grants::default()
    };
    let started = Instant::now();
    let outcome = call_probe(&grants, "http", json!({ "url": format!("http://{addr}/") })).await;
    let elapsed = started.elapsed();
    let message = limit_message(&outcome);
    assert!(message.contains("timeout"), "{message}");
    assert!(
        elapsed < timeout + Duration::from_secs(1),
        "took {elapsed:?}"
    );
    drop(tarpit);
    assert_still_serves().await;
}

/// Host-side resources must count against the call. A guest with a 16 MiB
/// memory limit asks the host for 3000 header maps of 100 KB each, reusing
/// one buffer: about 300 MB of host memory that its linear memory limit never
/// sees (measured +295 MB peak RSS before header maps and the resource table
/// were bounded per call).
#[tokio::test]
async fn host_side_resources_count_against_the_call() {
    let grants = with_limits(Limits {
        memory_bytes: 16 << 20,
        ..Limits::default()
    });
    let outcome = call_probe(&grants, "hoard", json!({ "count": 3000, "bytes": 100_000 })).await;
    match &outcome.result {
        Err(CallError::Limit { .. }) => {}
        Ok(out) => assert!(
            out["made"].as_u64().unwrap_or(0) < 3000 && out["error"].is_string(),
            "the host held {} header maps of 100 KB for a 16 MiB call: {out}",
            out["made"]
        ),
        Err(other) => panic!("expected a limit or a refusal, got {other:?}"),
    }
    assert_still_serves().await;
}

/// Running out of resource handles ends the call saying so, rather than
/// with a bare "error while executing at wasm backtrace".
#[tokio::test]
async fn resource_exhaustion_names_its_cause() {
    let outcome = call_probe(&Grants::default(), "hoard", json!({ "count": 1_100_000 })).await;
    let message = match err(&outcome) {
        CallError::Limit { message } | CallError::Crashed { message } => message,
        other => panic!("expected a limit or a crash, got {other:?}"),
    };
    assert!(message.contains("resource table"), "{message}");
    assert_still_serves().await;
}

/// Many calls at once share the engine without stepping on each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_are_isolated() {
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            tokio::spawn(async move {
                let outcome = call_probe(&Grants::default(), "echo", json!({ "value": i })).await;
                assert_eq!(ok(&outcome)["value"], i);
                assert_eq!(outcome.receipt.logs.len(), 1, "logs crossed calls");
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("call task");
    }
}
