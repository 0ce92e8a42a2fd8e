//! `wasi:sockets`, linked so that guests built on a libc load, with every
//! operation refused and recorded.
//!
//! CPython's libc (componentize-py), and later Go's and .NET's, import
//! `wasi:sockets/*` whether or not the tool ever opens a socket. Refusing
//! such components at load would shut out whole languages; granting sockets
//! would give a guest raw TCP, UDP and DNS past every host check of
//! [`super::net`]. So the interfaces are linked and nothing behind them
//! works:
//!
//! * The call's WASI context allows no TCP, no UDP and no name lookup
//!   (`allow_tcp(false)` etc. in [`super::call::CallBuilder::new`], with an
//!   address check that refuses every address). `create-tcp-socket` and
//!   `create-udp-socket` go to wasmtime-wasi's own implementation, which
//!   answers `access-denied` before any socket exists on the host. Without a
//!   socket resource, `connect`, `bind`, `send` and the rest can never be
//!   reached.
//! * `resolve-addresses` answers `access-denied` here: wasmtime-wasi's would
//!   say `permanent-resolver-failure`, which reads like a DNS outage rather
//!   than a refusal.
//! * Each attempt is a [`Denial`](super::receipt::Denial) of capability
//!   `sockets` in the call's receipt: `tcp socket (ipv4)`, `udp socket
//!   (ipv6)`, `name lookup example.com`. A socket is refused when it is
//!   created, so the address it would have connected to is never known.
//!
//! There is no grant for sockets: no field of [`super::grants::Grants`]
//! reaches this module. [`super::caps`] links the interfaces and
//! [`super::call`] builds the view per call; this module knows neither the
//! store's data type nor the linker. What it must not do: open, bind or look
//! up anything on the host.

use std::sync::{Arc, Mutex};

use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::p2::SocketResult;
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddressFamily, Network};
use wasmtime_wasi::p2::bindings::sockets::{
    ip_name_lookup, network, tcp_create_socket, udp_create_socket,
};
use wasmtime_wasi::p2::{TcpSocket, UdpSocket};
use wasmtime_wasi::sockets::WasiSocketsCtxView;

use super::receipt::Journal;

/// Capability name in receipts.
const CAPABILITY: &str = "sockets";

/// Why, in the receipt: what the operator (or the tool's author) can do.
const REASON: &str = "raw sockets and name lookups are never available to tools; reach the \
                      network through wasi:http with an --allow-host grant";

/// The view the recording half of `wasi:sockets` works on: wasmtime-wasi's
/// own, and the call's journal.
pub(crate) struct DeniedSocketsView<'a> {
    pub(crate) inner: WasiSocketsCtxView<'a>,
    pub(crate) journal: &'a Arc<Mutex<Journal>>,
}

impl DeniedSocketsView<'_> {
    fn deny(&self, what: String) {
        if let Ok(mut journal) = self.journal.lock() {
            journal.deny(CAPABILITY, what, REASON.to_owned());
        }
    }
}

/// [`HasData`] for the interfaces whose entry points are recorded (TCP
/// socket, UDP socket, name lookup); [`super::caps`] links them with it and
/// the rest of `wasi:sockets` with wasmtime-wasi's own view, unreachable
/// without a socket.
pub(crate) struct DeniedSockets;

impl HasData for DeniedSockets {
    type Data<'a> = DeniedSocketsView<'a>;
}

fn family(family: IpAddressFamily) -> &'static str {
    match family {
        IpAddressFamily::Ipv4 => "ipv4",
        IpAddressFamily::Ipv6 => "ipv6",
    }
}

// The entry points' interfaces use `network`'s types, so their view must
// speak `network` too: wasmtime-wasi's, unchanged.
impl network::Host for DeniedSocketsView<'_> {
    fn convert_error_code(
        &mut self,
        error: wasmtime_wasi::p2::SocketError,
    ) -> wasmtime::Result<ErrorCode> {
        network::Host::convert_error_code(&mut self.inner, error)
    }

    fn network_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        network::Host::network_error_code(&mut self.inner, err)
    }
}

impl network::HostNetwork for DeniedSocketsView<'_> {
    fn drop(&mut self, this: Resource<Network>) -> wasmtime::Result<()> {
        network::HostNetwork::drop(&mut self.inner, this)
    }
}

impl tcp_create_socket::Host for DeniedSocketsView<'_> {
    fn create_tcp_socket(
        &mut self,
        address_family: IpAddressFamily,
    ) -> SocketResult<Resource<TcpSocket>> {
        self.deny(format!("tcp socket ({})", family(address_family)));
        // TCP is not allowed in the call's context: wasmtime-wasi refuses
        // with access-denied before it makes a socket.
        tcp_create_socket::Host::create_tcp_socket(&mut self.inner, address_family)
    }
}

impl udp_create_socket::Host for DeniedSocketsView<'_> {
    async fn create_udp_socket(
        &mut self,
        address_family: IpAddressFamily,
    ) -> SocketResult<Resource<UdpSocket>> {
        self.deny(format!("udp socket ({})", family(address_family)));
        // As for TCP: refused by wasmtime-wasi before a socket exists.
        udp_create_socket::Host::create_udp_socket(&mut self.inner, address_family).await
    }
}

impl ip_name_lookup::Host for DeniedSocketsView<'_> {
    fn resolve_addresses(
        &mut self,
        network: Resource<Network>,
        name: String,
    ) -> SocketResult<Resource<ip_name_lookup::ResolveAddressStream>> {
        // The network handle must be the guest's own, as wasmtime-wasi
        // checks; then the name is recorded (cut by the journal) and refused.
        self.inner.table.get(&network)?;
        self.deny(format!("name lookup {name}"));
        Err(ErrorCode::AccessDenied.into())
    }
}

impl ip_name_lookup::HostResolveAddressStream for DeniedSocketsView<'_> {
    // No stream is ever made (every lookup is refused above); these answer
    // as wasmtime-wasi does for a handle that is not in the table.
    fn resolve_next_address(
        &mut self,
        stream: Resource<ip_name_lookup::ResolveAddressStream>,
    ) -> SocketResult<Option<network::IpAddress>> {
        ip_name_lookup::HostResolveAddressStream::resolve_next_address(&mut self.inner, stream)
    }

    fn subscribe(
        &mut self,
        stream: Resource<ip_name_lookup::ResolveAddressStream>,
    ) -> wasmtime::Result<Resource<wasmtime_wasi::p2::DynPollable>> {
        ip_name_lookup::HostResolveAddressStream::subscribe(&mut self.inner, stream)
    }

    fn drop(
        &mut self,
        stream: Resource<ip_name_lookup::ResolveAddressStream>,
    ) -> wasmtime::Result<()> {
        ip_name_lookup::HostResolveAddressStream::drop(&mut self.inner, stream)
    }
}
