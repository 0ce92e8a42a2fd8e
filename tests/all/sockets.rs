//! `wasi:sockets`: linked so that libc-built guests load, refused on every
//! use. The `sockets` fixture tries a TCP connect and a UDP send to a port
//! this test listens on, and a name lookup, through `std::net` and through
//! the raw calls; each is answered `access-denied`, nothing reaches the
//! listener, and the receipt names every attempt.

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};

use longhand_hands::{Grants, ToolSource};
use serde_json::json;

use crate::fixtures;
use crate::support::{assert_still_serves, hands, ok};

#[tokio::test]
async fn sockets_load_and_every_attempt_is_denied() {
    // A TCP listener and a UDP socket on the same loopback port: the guest
    // aims at both, and neither may hear from it.
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let datagrams = UdpSocket::bind(("127.0.0.1", port)).expect("udp on the same port");
    listener.set_nonblocking(true).expect("nonblocking");
    datagrams.set_nonblocking(true).expect("nonblocking");

    let tool = hands()
        .load(ToolSource::File(fixtures::SOCKETS.as_ref()))
        .await
        .unwrap_or_else(|e| panic!("a guest importing wasi:sockets must load: {e}"));
    assert!(
        tool.capabilities().contains(&"sockets"),
        "{:?}",
        tool.capabilities()
    );

    // Granted everything a tool can be granted that is not a socket: none
    // of it opens one.
    let outcome = hands()
        .call(
            &tool,
            &Grants::default(),
            "reach",
            &json!({ "port": port, "name": "example.com" }),
        )
        .await;
    let output = ok(&outcome);

    // The WASI error code of each refusal, from the raw calls.
    for what in ["tcp", "udp", "lookup"] {
        assert_eq!(
            output["raw"][what],
            json!({ "err": "access-denied" }),
            "raw {what}: {output}"
        );
    }
    // And as a libc guest sees it.
    for what in ["tcp", "udp"] {
        assert_eq!(
            output["std"][what],
            json!({ "err": "PermissionDenied" }),
            "std {what}: {output}"
        );
    }
    assert!(
        output["std"]["lookup"]["err"].is_string(),
        "the lookup must fail: {output}"
    );

    // Nothing reached the host's sockets.
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the listener was reached: {other:?}"),
    }
    let mut buf = [0u8; 64];
    match datagrams.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("a datagram arrived: {other:?}"),
    }

    // Every attempt is in the receipt as denied.
    let denied: Vec<&str> = outcome
        .receipt
        .denied
        .iter()
        .filter(|d| d.capability == "sockets")
        .map(|d| d.resource.as_str())
        .collect();
    for expected in [
        "tcp socket (ipv4)",
        "udp socket (ipv4)",
        "udp socket (ipv6)",
        "name lookup example.com",
    ] {
        assert!(
            denied.contains(&expected),
            "{expected} missing from {denied:?}"
        );
    }
    assert!(
        outcome
            .receipt
            .denied
            .iter()
            .all(|d| d.reason.contains("wasi:http")),
        "{:?}",
        outcome.receipt.denied
    );
    assert!(
        outcome.receipt.used.is_empty(),
        "{:?}",
        outcome.receipt.used
    );
    assert_still_serves().await;
}
