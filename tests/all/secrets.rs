//! Secrets: the host adds them to requests for matching hosts, and the
//! guest never holds the value — not in its environment, not in what it
//! reads back, not anywhere in its linear memory — and neither does the
//! receipt.
//!
//! The canary is fresh per run, and the probe is asked to look for it by
//! hash only, so the test itself never carries it into the guest.

use longhand_host::hands::{Grants, HostPattern, Secret, SecretGrant};
use serde_json::json;

use crate::support::server::{Reply, Server};
use crate::support::{call_probe, needle, ok, unique};

const SECRET_NAME: &str = "API_TOKEN";

fn grants_with_secret(canary: &str, secret_host: &str, hosts: &[String]) -> Grants {
    Grants {
        hosts: hosts
            .iter()
            .map(|h| HostPattern::parse(h).expect("host pattern"))
            .collect(),
        secrets: vec![SecretGrant {
            name: SECRET_NAME.to_owned(),
            value: Secret::new(canary),
            host: HostPattern::parse(secret_host).expect("secret host"),
            header: "authorization".to_owned(),
        }],
        env: [("VISIBLE".to_owned(), "plain".to_owned())].into(),
        ..Grants::default()
    }
}

#[tokio::test]
async fn secret_reaches_the_server_but_never_the_guest() {
    let canary = unique("lh-canary");
    let marker = unique("lh-marker");
    let server = Server::echo(&marker);
    let host = format!("127.0.0.1:{}", server.port());
    let grants = grants_with_secret(&canary, &host, std::slice::from_ref(&host));

    let outcome = call_probe(
        &grants,
        "http",
        json!({
            "url": server.url("/whoami"),
            // The guest's own attempt at the header is overwritten.
            "headers": { "authorization": "Bearer chosen-by-the-guest" },
            "scan": [needle(&canary), needle(&marker)],
        }),
    )
    .await;
    let out = ok(&outcome);

    // The server got the real credential, once, in place of the guest's.
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent: Vec<&str> = requests[0]
        .headers
        .iter()
        .filter(|(n, _)| n == "authorization")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(sent, [format!("Bearer {canary}").as_str()]);

    // The server echoed it in a header and in the body; the guest saw neither.
    assert_eq!(out["status"], 200, "{out}");
    let echoed = out["headers"]
        .as_array()
        .and_then(|h| h.iter().find(|kv| kv[0] == "x-echo-authorization"))
        .unwrap_or_else(|| panic!("no echoed header in {out}"));
    assert_eq!(echoed[1], "Bearer [REDACTED]");
    let body = out["body"].as_str().unwrap_or_default();
    assert!(body.contains("Bearer [REDACTED]"), "{body}");
    assert!(body.contains(&marker), "{body}");

    // Not in the guest's memory, while something it did receive is: the
    // scan works, and the secret is simply not there.
    assert_eq!(out["scan"], json!([0, out["scan"][1]]), "{out}");
    assert!(
        out["scan"][1].as_u64().unwrap_or(0) >= 1,
        "control marker not found: {out}"
    );

    assert_not_leaked(&canary, &outcome);
    let used = &outcome.receipt.used[0].detail;
    assert!(
        used.contains(&format!("secret {SECRET_NAME} added")),
        "{used}"
    );
}

#[tokio::test]
async fn secret_is_not_sent_to_other_hosts() {
    let canary = unique("lh-canary");
    let secret_server = Server::echo("a");
    let other = Server::echo("b");
    let secret_host = format!("127.0.0.1:{}", secret_server.port());
    let other_host = format!("127.0.0.1:{}", other.port());
    let grants = grants_with_secret(&canary, &secret_host, &[secret_host.clone(), other_host]);

    let outcome = call_probe(&grants, "http", json!({ "url": other.url("/") })).await;
    assert_eq!(ok(&outcome)["status"], 200, "{}", ok(&outcome));
    let requests = other.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("authorization"),
        None,
        "{:?}",
        requests[0].headers
    );
    assert!(
        !requests[0].headers.iter().any(|(_, v)| v.contains(&canary)),
        "{:?}",
        requests[0].headers
    );
    assert!(secret_server.requests().is_empty());
    assert_not_leaked(&canary, &outcome);
}

#[tokio::test]
async fn secret_is_not_in_the_guest_environment() {
    let canary = unique("lh-canary");
    let grants = grants_with_secret(&canary, "127.0.0.1:1", &[]);
    let outcome = call_probe(&grants, "env_all", json!({})).await;
    assert_eq!(ok(&outcome)["vars"], json!({ "VISIBLE": "plain" }));
    assert_not_leaked(&canary, &outcome);

    let outcome = call_probe(
        &grants,
        "scan_memory",
        json!({ "needles": [needle(&canary)] }),
    )
    .await;
    assert_eq!(ok(&outcome)["hits"], json!([0]));
}

/// A server that reflects the credential with the canary split across two
/// writes: redaction has to hold back a partial match until it knows.
#[tokio::test]
async fn secret_split_across_body_chunks_is_redacted() {
    let canary = unique("lh-canary");
    let server = Server::start(|req| {
        let auth = req
            .header("authorization")
            .unwrap_or_default()
            .as_bytes()
            .to_vec();
        let mid = auth.len() - 5;
        let mut first = vec![b'.'; 10_000];
        first.extend_from_slice(&auth[..mid]);
        let mut second = auth[mid..].to_vec();
        second.extend_from_slice(b" end");
        Reply {
            status: 200,
            headers: Vec::new(),
            chunks: vec![first, second],
        }
    });
    let host = format!("127.0.0.1:{}", server.port());
    let grants = grants_with_secret(&canary, &host, std::slice::from_ref(&host));
    let outcome = call_probe(
        &grants,
        "http",
        json!({ "url": server.url("/"), "scan": [needle(&canary)] }),
    )
    .await;
    let out = ok(&outcome);
    let body = out["body"].as_str().unwrap_or_default();
    assert!(
        body.ends_with("Bearer [REDACTED] end"),
        "{}",
        &body[body.len().saturating_sub(80)..]
    );
    assert_eq!(body.len(), 10_000 + "Bearer [REDACTED] end".len());
    assert_eq!(out["scan"], json!([0]));
    assert_not_leaked(&canary, &outcome);
}

/// Redaction covers header names as well as values: a server that reflects
/// the credential into a header *name* must not hand it to the guest.
#[tokio::test]
async fn secret_in_a_response_header_name_is_redacted() {
    // Header names are lowercase tokens; `unique` gives exactly that.
    let canary = unique("lhcanary");
    let reflected = canary.clone();
    let server = Server::start(move |_| Reply {
        status: 200,
        headers: vec![(format!("x-{reflected}"), "1".to_owned())],
        chunks: vec![b"ok".to_vec()],
    });
    let host = format!("127.0.0.1:{}", server.port());
    let grants = grants_with_secret(&canary, &host, std::slice::from_ref(&host));
    let outcome = call_probe(
        &grants,
        "http",
        json!({ "url": server.url("/"), "scan": [needle(&canary)] }),
    )
    .await;
    let out = ok(&outcome);
    assert!(
        !out.to_string().contains(&canary),
        "the guest saw the secret: {out}"
    );
    assert_eq!(out["scan"], json!([0]));
}

/// The canary appears nowhere a person or a model could read: output,
/// receipt (all of it, serialised), captured stdio, logs.
#[track_caller]
fn assert_not_leaked(canary: &str, outcome: &longhand_host::hands::CallOutcome) {
    let receipt = serde_json::to_string(&outcome.receipt).expect("receipt serialises");
    assert!(
        !receipt.contains(canary),
        "the receipt holds the secret: {receipt}"
    );
    let result = match &outcome.result {
        Ok(v) => v.to_string(),
        Err(e) => e.to_string(),
    };
    assert!(
        !result.contains(canary),
        "the output holds the secret: {result}"
    );
    let debug = format!("{outcome:?}");
    assert!(
        !debug.contains(canary),
        "Debug of the outcome holds the secret"
    );
}
