//! Outbound HTTP: only granted hosts, and never loopback, private or
//! metadata addresses unless the grant names them.
//!
//! Denials are checked three ways: the guest gets `HttpRequestDenied`, the
//! receipt records the resource and the reason, and (where a server exists)
//! the server saw nothing. Tests that name non-loopback addresses rely on
//! the policy refusing them before any connect; a denial that took a
//! connect attempt would show up as a different error code, or as time.

use std::time::{Duration, Instant};

use longhand_hands::{CallOutcome, Grants, HostPattern};
use serde_json::{Value, json};

use crate::support::server::Server;
use crate::support::{assert_still_serves, call_probe, ok};

fn hosts(patterns: &[&str]) -> Grants {
    Grants {
        hosts: patterns
            .iter()
            .map(|p| HostPattern::parse(p).unwrap_or_else(|e| panic!("{p}: {e}")))
            .collect(),
        ..Grants::default()
    }
}

async fn get(grants: &Grants, url: &str) -> CallOutcome {
    call_probe(grants, "http", json!({ "url": url })).await
}

/// Insist the request was denied by policy and return the recorded reason.
#[track_caller]
fn assert_denied(outcome: &CallOutcome, resource: &str) -> String {
    let out = ok(outcome);
    assert_eq!(
        out["error"],
        json!("HttpRequestDenied"),
        "not denied: {out}"
    );
    let denial = outcome
        .receipt
        .denied
        .iter()
        // The receipt writes IPv6 hosts as `[fe80::1]:80`; compare without
        // brackets so a test may spell them either way.
        .find(|d| d.capability == "http" && unbracket(&d.resource) == unbracket(resource))
        .unwrap_or_else(|| panic!("no denial of {resource} in {:?}", outcome.receipt.denied));
    assert!(
        outcome.receipt.used.is_empty(),
        "{:?}",
        outcome.receipt.used
    );
    denial.reason.clone()
}

fn unbracket(resource: &str) -> String {
    resource.replace(['[', ']'], "")
}

#[tokio::test]
async fn ungranted_host_is_denied() {
    let server = Server::echo("m");
    let resource = format!("127.0.0.1:{}", server.port());
    let outcome = get(&Grants::default(), &server.url("/")).await;
    let reason = assert_denied(&outcome, &resource);
    assert!(reason.contains("not granted"), "{reason}");
    assert!(server.requests().is_empty());

    // A name that is not granted is refused before any DNS lookup.
    let outcome = get(&Grants::default(), "http://example.invalid/").await;
    assert!(assert_denied(&outcome, "example.invalid:80").contains("not granted"));
    assert_still_serves().await;
}

#[tokio::test]
async fn granted_loopback_address_works() {
    let server = Server::echo("hello-marker");
    let grants = hosts(&[&format!("127.0.0.1:{}", server.port())]);
    let outcome = call_probe(
        &grants,
        "http",
        json!({
            "url": server.url("/hello?x=1"),
            "method": "POST",
            "headers": { "x-probe": "yes" },
            "body": "ping",
        }),
    )
    .await;
    let out = ok(&outcome);
    assert_eq!(out["error"], Value::Null, "{out}");
    assert_eq!(out["status"], 200);
    let body: Value = serde_json::from_str(out["body"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("echo body is not JSON ({e}): {out}"));
    assert_eq!(body["marker"], "hello-marker");
    assert_eq!(body["path"], "/hello?x=1");

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].header("x-probe"), Some("yes"));
    assert_eq!(requests[0].body, b"ping");
    assert_eq!(
        requests[0].header("host"),
        Some(format!("127.0.0.1:{}", server.port()).as_str())
    );

    let used = &outcome.receipt.used;
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used[0].capability, "http");
    assert_eq!(used[0].resource, format!("127.0.0.1:{}", server.port()));
    assert!(
        used[0].detail.contains("POST /hello?x=1 -> 200"),
        "{}",
        used[0].detail
    );
    assert!(outcome.receipt.http_bytes_in > 0);
    assert!(
        outcome.receipt.denied.is_empty(),
        "{:?}",
        outcome.receipt.denied
    );
}

#[tokio::test]
async fn the_port_is_part_of_the_grant() {
    let granted = Server::echo("granted");
    let other = Server::echo("other");
    let grants = hosts(&[&format!("127.0.0.1:{}", granted.port())]);
    let outcome = get(&grants, &other.url("/")).await;
    let reason = assert_denied(&outcome, &format!("127.0.0.1:{}", other.port()));
    assert!(reason.contains("not granted"), "{reason}");
    assert!(other.requests().is_empty());
    assert!(granted.requests().is_empty());
    assert_still_serves().await;
}

/// `localhost:PORT` names loopback as plainly as `127.0.0.1:PORT` does, so
/// the host lets it through (it resolves the name itself, from /etc/hosts).
#[tokio::test]
async fn localhost_granted_by_name_reaches_loopback() {
    let server = Server::echo("by-name");
    let grants = hosts(&[&format!("localhost:{}", server.port())]);
    let outcome = get(
        &grants,
        &format!("http://localhost:{}/named", server.port()),
    )
    .await;
    let out = ok(&outcome);
    assert_eq!(
        out["status"], 200,
        "{out}; receipt {:?}",
        outcome.receipt.denied
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].header("host"),
        Some(format!("localhost:{}", server.port()).as_str())
    );
}

/// A wildcard matches any name, but loopback needs a grant naming it.
#[tokio::test]
async fn wildcard_grant_does_not_open_loopback() {
    let server = Server::echo("m");
    let grants = hosts(&[&format!("*:{}", server.port())]);
    for (url, resource) in [
        (server.url("/"), format!("127.0.0.1:{}", server.port())),
        (
            format!("http://localhost:{}/", server.port()),
            format!("localhost:{}", server.port()),
        ),
    ] {
        let outcome = get(&grants, &url).await;
        let reason = assert_denied(&outcome, &resource);
        assert!(reason.contains("loopback"), "{url}: {reason}");
        assert!(reason.contains("127.0.0.1"), "{url}: {reason}");
    }
    assert!(server.requests().is_empty());
    assert_still_serves().await;
}

/// `*` grants every public host on ports 80 and 443, and none of these.
#[tokio::test]
async fn private_and_metadata_addresses_are_denied_before_connecting() {
    let grants = hosts(&["*"]);
    let started = Instant::now();
    for (url, resource, class) in [
        ("http://10.0.0.1/", "10.0.0.1:80", "private"),
        ("https://192.168.1.1/admin", "192.168.1.1:443", "private"),
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254:80",
            "cloud metadata",
        ),
        (
            "http://[::ffff:10.0.0.1]/",
            "[::ffff:10.0.0.1]:80",
            "private",
        ),
        ("http://127.0.0.1/", "127.0.0.1:80", "loopback"),
        ("http://0.0.0.0/", "0.0.0.0:80", "unspecified"),
        ("http://[fe80::1]/", "[fe80::1]:80", "link-local"),
        ("http://[::1]/", "[::1]:80", "loopback"),
    ] {
        let outcome = get(&grants, url).await;
        let reason = assert_denied(&outcome, resource);
        assert!(reason.contains(class), "{url}: {reason}");
        assert!(
            reason.contains("needs a grant naming the address"),
            "{url}: {reason}"
        );
    }
    // A connect attempt to any of these would take far longer (or fail
    // with a different error); a policy decision is immediate.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_still_serves().await;
}

/// Every way of spelling a special address inside IPv6, and the special
/// IPv4 blocks beyond private and loopback, is refused by policy with the
/// row of the IANA registry that refused it. None of these can be reached
/// from here, so a regression shows as a connect error or as time rather
/// than as traffic.
#[tokio::test]
async fn special_purpose_addresses_are_denied_before_connecting() {
    let grants = hosts(&["*"]);
    let started = Instant::now();
    for (host, class) in [
        // The forms the hostile-tool battery got through.
        ("[::127.0.0.1]", "IPv4-compatible"),
        ("[::8.8.8.8]", "IPv4-compatible"),
        ("[::ffff:0:127.0.0.1]", "IPv4-translated"),
        ("[::ffff:0:1.1.1.1]", "IPv4-translated"),
        ("[64:ff9b:1::a00:1]", "local-use NAT64"),
        ("[64:ff9b:1::101:101]", "local-use NAT64"),
        // Embedded IPv4 addresses judged by what they carry.
        ("[64:ff9b::127.0.0.1]", "loopback"),
        ("[64:ff9b::169.254.169.254]", "cloud metadata"),
        ("[::ffff:169.254.169.254]", "cloud metadata"),
        ("[2002:7f00:1::1]", "loopback"),
        ("[2002:c0a8:101::1]", "private-use"),
        // The rest of the registries, multicast and metadata services.
        ("[fd00:ec2::254]", "cloud metadata"),
        ("168.63.129.16", "cloud metadata"),
        ("100.100.100.200", "cloud metadata"),
        ("100.64.0.1", "shared address space"),
        ("192.0.0.170", "NAT64/DNS64 discovery"),
        ("198.18.0.1", "benchmarking"),
        ("203.0.113.9", "documentation"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("255.255.255.255", "limited broadcast"),
        ("[2001:db8::1]", "documentation"),
        ("[3fff::1]", "documentation"),
        ("[2001::1]", "Teredo"),
        ("[100::1]", "discard-only"),
        ("[fec0::1]", "site-local"),
        ("[ff02::1]", "multicast"),
        ("[5f00::1]", "segment routing"),
        ("[4000::1]", "outside 2000::/3"),
        ("[::2]", "IPv4-compatible"),
    ] {
        let url = format!("http://{host}/");
        let outcome = get(&grants, &url).await;
        let reason = assert_denied(&outcome, &format!("{host}:80"));
        assert!(reason.contains(class), "{url}: {reason}");
        assert!(
            reason.contains("needs a grant naming the address"),
            "{url}: {reason}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_still_serves().await;
}

/// A grant naming an address literally still reaches it, whatever class
/// it is in: here loopback, spelled as IPv4 and as IPv4-mapped IPv6.
#[tokio::test]
async fn a_grant_naming_the_address_reaches_it() {
    let server = Server::echo("named");
    let grants = hosts(&[&format!("127.0.0.1:{}", server.port())]);
    let outcome = get(&grants, &server.url("/")).await;
    assert_eq!(ok(&outcome)["status"], 200, "{}", ok(&outcome));
    // The mapped spelling is a different host name, so not granted.
    let mapped = format!("http://[::ffff:127.0.0.1]:{}/", server.port());
    let outcome = get(&grants, &mapped).await;
    let reason = assert_denied(&outcome, &format!("[::ffff:127.0.0.1]:{}", server.port()));
    assert!(reason.contains("not granted"), "{reason}");
    assert_eq!(server.requests().len(), 1);
    assert_still_serves().await;
}

/// Only http and https leave the guest: wasmtime-wasi-http refuses other
/// schemes before the request reaches the policy, so nothing is recorded.
#[tokio::test]
async fn schemes_other_than_http_are_refused() {
    let grants = hosts(&["*"]);
    let outcome = get(&grants, "ftp://files.example.com/x").await;
    assert_eq!(
        ok(&outcome)["error"],
        "HttpProtocolError",
        "{}",
        ok(&outcome)
    );
    assert!(outcome.receipt.used.is_empty());
}

#[tokio::test]
async fn request_count_is_limited() {
    let server = Server::echo("m");
    let mut grants = hosts(&[&format!("127.0.0.1:{}", server.port())]);
    grants.limits.max_http_requests = 0;
    let outcome = get(&grants, &server.url("/")).await;
    let reason = assert_denied(&outcome, &format!("127.0.0.1:{}", server.port()));
    assert!(reason.contains("more than 0 requests"), "{reason}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn response_body_is_capped() {
    let server = Server::start(|_| crate::support::server::Reply {
        status: 200,
        headers: Vec::new(),
        chunks: vec![vec![b'z'; 64 * 1024]],
    });
    let mut grants = hosts(&[&format!("127.0.0.1:{}", server.port())]);
    grants.limits.max_http_response_bytes = 1000;
    let outcome = get(&grants, &server.url("/big")).await;
    let out = ok(&outcome);
    assert!(
        out["body"].as_str().unwrap_or_default().len() <= 1000,
        "more than the cap reached the guest"
    );
    // The guest reads the error off the body stream.
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("exceeds limit: 1000 bytes"), "{out}");
    assert!(
        outcome
            .receipt
            .limits_hit
            .iter()
            .any(|l| l.contains("1000")),
        "{:?}",
        outcome.receipt.limits_hit
    );
    assert_still_serves().await;
}
