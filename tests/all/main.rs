//! Integration tests of the tool host (`longhand-hands`), run against
//! real components: the guest fixtures in `tests/fixtures/`, built for
//! `wasm32-wasip2` by `tests/build.rs`, and the built-in tools.
//!
//! Every containment test checks three things: the guest did not get what
//! it reached for, the caller is told why in words it can act on, and the
//! same [`Hands`](longhand_hands::Hands) serves an ordinary call
//! afterwards.
//!
//! Nothing here touches the network beyond 127.0.0.1: HTTP tests run
//! against an in-process server on a loopback port, and tests that name
//! other addresses check that the host refuses them before connecting.

mod fixtures {
    //! Paths of the built fixtures. Denying dead code makes a fixture that
    //! no test loads a compile error.
    #![deny(dead_code)]
    include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
}

mod support;

mod builtins;
mod componentize;
mod dirs;
mod fuzz;
mod guest_text;
mod http;
mod limits;
mod loading;
mod receipts;
mod sandbox;
mod scheduling;
mod schemas;
mod secrets;
mod sockets;
