//! Busy guests and the runtime: a guest that spins must not hold up other
//! calls — on other tasks, or joined with it in the same task — and a call
//! its caller gave up on, or that timed out, leaves nothing running. Also
//! that traps are told apart by their type (a long call's receipt is as
//! complete as a short one's, a limit inside a host call is named).
//!
//! These run on a multi-thread runtime with two workers, like a server on
//! this 2-core machine: two spinners could otherwise occupy both workers.

use std::path::Path;
use std::time::{Duration, Instant};

use longhand_hands::{CallError, CallOutcome, Grants, Hands, HandsConfig, Limits, ToolSource};
use serde_json::json;

use crate::fixtures;
use crate::support::{assert_still_serves, call_probe, limit_message, ok, probe};

/// Grants for a spinner that only its timeout stops: the probe's loop burns
/// the default fuel (2·10¹⁰) in under 3 s.
fn spin_grants(timeout: Duration) -> Grants {
    Grants {
        limits: Limits {
            timeout,
            fuel: u64::MAX / 2,
            ..Limits::default()
        },
        ..Grants::default()
    }
}

/// Check `outcome` is the spinner stopped by its timeout, at about the time
/// it should have been.
#[track_caller]
fn assert_timed_out(outcome: &CallOutcome, timeout: Duration, elapsed: Duration) {
    let message = limit_message(outcome);
    assert!(message.contains("timeout"), "{message}");
    assert!(elapsed >= timeout, "stopped early, after {elapsed:?}");
    assert!(
        elapsed < timeout + Duration::from_secs(1),
        "stopped late, after {elapsed:?}"
    );
}

/// Two spinners (one per worker thread), then 20 echo calls on a task of
/// the same runtime: if a spinner kept its worker, the calls could not run
/// until the spinners' 3 s timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_calls_do_not_hold_up_other_calls() {
    let timeout = Duration::from_secs(3);
    probe().await;
    let started = Instant::now();
    let spinners: Vec<_> = (0..2)
        .map(|_| {
            tokio::spawn(async move {
                let outcome = call_probe(&spin_grants(timeout), "spin", json!({})).await;
                (outcome, started.elapsed())
            })
        })
        .collect();
    // Let the spinners take their workers first.
    tokio::time::sleep(Duration::from_millis(50)).await;

    let calls = tokio::spawn(async move {
        let begun = Instant::now();
        let mut slowest = Duration::ZERO;
        for i in 0..20 {
            let one = Instant::now();
            let outcome = call_probe(&Grants::default(), "echo", json!({ "value": i })).await;
            assert_eq!(ok(&outcome)["value"], i);
            slowest = slowest.max(one.elapsed());
        }
        (begun.elapsed(), slowest)
    });
    let (total, slowest) = calls.await.expect("the call task");
    assert!(
        total < Duration::from_millis(500),
        "20 echo calls took {total:?} (slowest {slowest:?}) beside two spinners"
    );
    assert!(
        started.elapsed() < timeout / 2,
        "the calls finished only {:?} after the spinners started",
        started.elapsed()
    );

    for spinner in spinners {
        let (outcome, elapsed) = spinner.await.expect("the spinner task");
        assert_timed_out(&outcome, timeout, elapsed);
    }
    assert_still_serves().await;
}

/// A spinner and a trivial call joined in one task: the trivial one ends
/// long before the spinner does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinner_joined_with_a_trivial_call_does_not_delay_it() {
    let timeout = Duration::from_secs(2);
    probe().await;
    let started = Instant::now();
    let grants = spin_grants(timeout);
    // `biased`: the spinner is polled first, every time.
    let (spin, echo) = tokio::join!(
        biased;
        async {
            let outcome = call_probe(&grants, "spin", json!({})).await;
            (outcome, started.elapsed())
        },
        async {
            let outcome = call_probe(&Grants::default(), "echo", json!({ "value": 7 })).await;
            (outcome, started.elapsed())
        },
    );
    assert_eq!(ok(&echo.0)["value"], 7);
    assert!(
        echo.1 < Duration::from_millis(500),
        "the trivial call ended {:?} after the start",
        echo.1
    );
    assert_timed_out(&spin.0, timeout, spin.1);
}

/// A private host, so that its count of offloaded calls is this test's
/// alone (the shared one runs other tests' spinners at the same time).
async fn private_host() -> (Hands, std::sync::Arc<longhand_hands::LoadedTool>) {
    let hands = Hands::new(HandsConfig {
        cache_dir: Some(Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache")),
        max_concurrent_calls: 4,
        ..HandsConfig::default()
    })
    .expect("engine");
    let probe = hands
        .load(ToolSource::File(fixtures::PROBE.as_ref()))
        .await
        .expect("probe");
    (hands, probe)
}

/// Wait up to `limit` for `hands` to have no offloaded call running.
async fn settles(hands: &Hands, limit: Duration) -> bool {
    let started = Instant::now();
    while hands.offloaded_calls() > 0 {
        if started.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    true
}

/// A caller that drops its call (here: its own 300 ms timeout on a call
/// allowed 20 s) leaves no thread spinning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_leaves_nothing_running() {
    let (hands, probe) = private_host().await;
    let grants = spin_grants(Duration::from_secs(20));
    let gave_up = tokio::time::timeout(Duration::from_millis(300), async {
        hands.call(&probe, &grants, "spin", &json!({})).await
    });
    // While it runs, the spinner is on a thread of its own.
    let watcher = async {
        tokio::time::sleep(Duration::from_millis(150)).await;
        hands.offloaded_calls()
    };
    let (gave_up, during) = tokio::join!(gave_up, watcher);
    assert!(gave_up.is_err(), "the spinner cannot have finished");
    assert_eq!(during, 1, "the spinner should have moved to its own thread");
    assert!(
        settles(&hands, Duration::from_millis(500)).await,
        "{} offloaded call(s) still running after the caller left",
        hands.offloaded_calls()
    );

    // The instance slot came back with the store: the host still serves.
    let outcome = hands
        .call(&probe, &Grants::default(), "echo", &json!({ "value": 1 }))
        .await;
    assert_eq!(ok(&outcome)["value"], 1);
}

/// After a spinner's own timeout nothing of it runs either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_call_leaves_nothing_running() {
    let (hands, probe) = private_host().await;
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let outcome = hands
        .call(&probe, &spin_grants(timeout), "spin", &json!({}))
        .await;
    assert_timed_out(&outcome, timeout, started.elapsed());
    assert!(
        settles(&hands, Duration::from_millis(200)).await,
        "the spinner's thread outlived its timeout"
    );
}

/// A call that moved to its own thread and was stopped there by a limit
/// keeps an exact receipt: the store came back with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_keeps_its_receipt() {
    let (hands, probe) = private_host().await;
    let fuel = 4_000_000_000;
    let grants = Grants {
        limits: Limits {
            fuel,
            ..Limits::default()
        },
        ..Grants::default()
    };
    let watcher = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        hands.offloaded_calls()
    };
    let input = json!({});
    let (outcome, during) = tokio::join!(hands.call(&probe, &grants, "spin", &input), watcher);
    let message = limit_message(&outcome);
    assert!(message.contains("fuel"), "{message}");
    assert_eq!(
        during,
        1,
        "{fuel} fuel ran out in {:?}, before the call moved threads; raise it",
        outcome.receipt.wall()
    );
    assert_eq!(outcome.receipt.fuel_used, fuel);
    assert!(outcome.receipt.peak_memory_bytes > 0);
    assert_eq!(hands.offloaded_calls(), 0);
}

/// A header map over the host's size limit traps inside wasi-http; the
/// trap is recognised by its type and named as the limit.
#[tokio::test]
async fn an_oversized_header_map_is_named_as_a_limit() {
    let outcome = call_probe(
        &Grants::default(),
        "hoard",
        json!({ "count": 1, "bytes": 40_000 }),
    )
    .await;
    match &outcome.result {
        Err(CallError::Limit { message }) => {
            assert!(message.contains("HTTP header fields"), "{message}");
            assert!(message.contains("32 KiB"), "{message}");
            assert!(
                outcome.receipt.limits_hit.iter().any(|l| l == message),
                "{:?}",
                outcome.receipt.limits_hit
            );
        }
        other => panic!("expected a limit error, got {other:?}"),
    }
    assert_still_serves().await;
}
