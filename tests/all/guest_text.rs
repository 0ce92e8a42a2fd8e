//! Guest text crossing into the host is cut to a bound, with a marker that
//! says how much was dropped: error messages and denied resources at the
//! call's output limit, `describe` texts at theirs, progress and logs at a
//! line's. A guest cannot push megabytes into the session log, the model's
//! context or a terminal through any of them.

use longhand_hands::{CallError, Grants, Limits, ToolSource};
use serde_json::json;

use crate::fixtures;
use crate::support::{assert_still_serves, call_probe, err, hands};

fn with_output_limit(bytes: u64) -> Grants {
    Grants {
        limits: Limits {
            max_output_bytes: bytes,
            ..Limits::default()
        },
        ..Grants::default()
    }
}

/// The text kept before the marker, and the number of bytes it says were
/// dropped.
fn split_marker(text: &str) -> (&str, u64) {
    let (kept, marker) = text
        .rsplit_once(" … [")
        .unwrap_or_else(|| panic!("no cut marker in {:?}", &text[..text.len().min(200)]));
    let dropped = marker
        .strip_suffix(" bytes dropped]")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad marker {marker:?}"));
    (kept, dropped)
}

#[tokio::test]
async fn every_tool_error_form_is_cut_at_the_output_limit() {
    let grants = with_output_limit(1024);
    let size: u64 = 20 << 20;
    for kind in ["failed", "invalid", "not_found", "denied"] {
        let outcome =
            call_probe(&grants, "big_error", json!({ "kind": kind, "bytes": size })).await;
        let texts: Vec<&str> = match err(&outcome) {
            CallError::Failed { message }
            | CallError::InvalidInput { message }
            | CallError::NotFound { message } => vec![message.as_str()],
            CallError::AccessDenied { resource, reason } => {
                vec![resource.as_str(), reason.as_str()]
            }
            other => panic!("{kind}: unexpected {other:?}"),
        };
        for text in texts {
            let (kept, dropped) = split_marker(text);
            assert_eq!(kept.len(), 1024, "{kind}");
            assert_eq!(dropped, size - 1024, "{kind}");
        }
        // The whole error, as the session log would store it, is small.
        let stored = serde_json::to_string(&outcome.result).expect("json");
        assert!(stored.len() < 4096, "{kind}: {} bytes stored", stored.len());
    }
    assert_still_serves().await;
}

#[tokio::test]
async fn progress_and_log_lines_are_cut_with_a_marker() {
    let outcome = call_probe(
        &Grants::default(),
        "big_progress",
        json!({ "bytes": 5 << 20 }),
    )
    .await;
    let progress = outcome.receipt.progress.as_ref().expect("progress");
    let (kept, dropped) = split_marker(&progress.message);
    assert_eq!(kept.len() as u64 + dropped, 5 << 20);
    assert!(kept.len() <= 4096);
    let (kept, _) = split_marker(&outcome.receipt.logs[0].message);
    assert!(kept.len() <= 4096);
    assert_still_serves().await;
}

#[tokio::test]
async fn describe_texts_and_lists_are_cut_at_load() {
    let loud = hands()
        .load(ToolSource::File(fixtures::LOUD.as_ref()))
        .await
        .unwrap_or_else(|e| panic!("the loud fixture should load, cut: {e}"));
    let info = loud.info();
    let (kept, dropped) = split_marker(&info.description);
    assert_eq!((kept.len(), dropped), (16 << 10, (4 << 20) - (16 << 10)));
    let (kept, _) = split_marker(&info.tools[0].description);
    assert_eq!(kept.len(), 16 << 10);
    let (kept, _) = split_marker(&info.name);
    assert_eq!(kept.len(), 256);
    let requests = &info.requests;
    for list in [&requests.hosts, &requests.env, &requests.secrets] {
        assert_eq!(list.len(), 64);
        assert!(list.iter().all(|entry| entry.len() < 1100));
    }
    assert_eq!(requests.dirs.len(), 64);
    assert!(requests.dirs.iter().all(|d| d.why.len() < 1100));
    let described = serde_json::to_string(info).expect("json");
    assert!(described.len() < 512 << 10, "{} bytes", described.len());
    assert_still_serves().await;
}

#[tokio::test]
async fn control_characters_in_describe_stay_data_and_json_escapes_them() {
    // The host keeps guest text as data (escaping is the printer's job, see
    // host/src/cli/term.rs); what it serializes must be plain JSON escapes.
    let tool = hands()
        .load(ToolSource::File(fixtures::ESCAPES.as_ref()))
        .await
        .unwrap_or_else(|e| panic!("the escapes fixture should load: {e}"));
    assert!(tool.info().description.contains('\u{1b}'));
    let json = serde_json::to_string(tool.info()).expect("json");
    assert!(
        !json.contains('\u{1b}') && json.contains("\\u001b"),
        "{json}"
    );
}
