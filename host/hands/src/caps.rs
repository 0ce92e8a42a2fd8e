//! Capabilities: each thing a tool can be granted, in one shape.
//!
//! A capability is one [`Capability`] implementation: it names itself, lists
//! the WIT interfaces it unlocks (the [`CAPABILITIES`] table, which lets a
//! component's imports be judged before it is instantiated), adds those
//! interfaces to the linker, and turns the operator's grant into per-call
//! state. Linking happens once per engine; per-call state is built fresh for
//! every call so nothing crosses calls.
//!
//! Linking an interface gives the guest *nothing* by itself: a linked
//! `wasi:filesystem` with no preopened directory sees no files, a linked
//! `wasi:http` with no host pattern has every request denied, and
//! `wasi:sockets` is linked only so that libc-built guests (CPython, later
//! Go and .NET) load: there is no grant for it, and every TCP, UDP and name
//! lookup is refused (see [`super::sockets`]). Interfaces that are not in the
//! table are never linked, and a component importing them is refused at load
//! by [`check_imports`], from its bytes, before anything is compiled.

use wasmtime::component::Linker;

use super::call::{CallBuilder, CallState};
use super::grants::{Access, Grants};

/// One grantable capability.
pub(crate) trait Capability {
    /// Name used in receipts and in [`CAPABILITIES`].
    const NAME: &'static str;

    /// Add this capability's interfaces to the linker (once per engine).
    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()>;

    /// Build this capability's part of one call's state from the grants.
    /// Grants were validated by [`Grants::validate`] already; what can still
    /// fail here is the world changing under us (a directory removed).
    fn prepare(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()>;
}

/// A row of the capability table.
#[derive(Debug, Clone, Copy)]
pub struct CapabilityInfo {
    /// Capability name.
    pub name: &'static str,
    /// WIT interfaces (`namespace:package/interface`, any version) it unlocks.
    pub interfaces: &'static [&'static str],
    /// What granting it means, for `longhand tool describe`.
    pub grant: &'static str,
    /// Whether, under these grants, a guest can change anything outside
    /// its own call through this capability. A tool that declares a
    /// write effect but whose every capability answers false here can
    /// only fail (an `fs` `write` with read-only directories), so a front
    /// end need not offer it (see [`can_change_anything`]).
    pub changes: fn(&Grants) -> bool,
}

/// Every interface a tool component may import, by the capability that
/// governs it. Anything else is refused at load.
pub const CAPABILITIES: &[CapabilityInfo] = &[
    CapabilityInfo {
        name: "core",
        interfaces: &[
            "wasi:io/error",
            "wasi:io/poll",
            "wasi:io/streams",
            "wasi:clocks/monotonic-clock",
            "wasi:clocks/wall-clock",
            "wasi:random/random",
            "wasi:random/insecure",
            "wasi:random/insecure-seed",
            "wasi:cli/exit",
            "longhand:tool/host",
            "longhand:tool/types",
        ],
        grant: "always available: streams, clocks, randomness, exit, host log/progress",
        // Log lines and progress go to the call's receipt only.
        changes: |_| false,
    },
    CapabilityInfo {
        name: "stdio",
        interfaces: &[
            "wasi:cli/stdin",
            "wasi:cli/stdout",
            "wasi:cli/stderr",
            "wasi:cli/terminal-input",
            "wasi:cli/terminal-output",
            "wasi:cli/terminal-stdin",
            "wasi:cli/terminal-stdout",
            "wasi:cli/terminal-stderr",
        ],
        grant: "always available: empty stdin; stdout/stderr captured and capped",
        // Captured into the receipt, never the host's own stdio.
        changes: |_| false,
    },
    CapabilityInfo {
        name: "env",
        interfaces: &["wasi:cli/environment"],
        grant: "only the variables named by --env",
        // The guest reads its own copy.
        changes: |_| false,
    },
    CapabilityInfo {
        name: "filesystem",
        interfaces: &["wasi:filesystem/types", "wasi:filesystem/preopens"],
        grant: "only the directories granted by --mount/--dir (pinned; regular files and directories only)",
        changes: |g| g.dirs.iter().any(|d| d.access() == Access::ReadWrite),
    },
    CapabilityInfo {
        name: "http",
        interfaces: &["wasi:http/types", "wasi:http/outgoing-handler"],
        grant: "only hosts granted by --allow-host; secrets added by the host",
        // Any request to a granted host may change something there.
        changes: |g| !g.hosts.is_empty(),
    },
    CapabilityInfo {
        name: "process",
        interfaces: &["longhand:tool/process"],
        grant: "only the programs granted by --program/programs (pinned by hash), seeing only \
                the granted directories, with no network",
        // A program can change what it can write: the read-write
        // directories.
        changes: |g| {
            !g.programs.is_empty() && g.dirs.iter().any(|d| d.access() == Access::ReadWrite)
        },
    },
    CapabilityInfo {
        name: "database",
        interfaces: &["longhand:tool/sql"],
        grant: "only the databases granted by --database/databases, by name; the host holds \
                the URL and credentials; read-only transactions unless granted mode=rw",
        // Only a database granted rw can be written.
        changes: |g| {
            g.databases
                .iter()
                .any(|d| d.mode == super::sql::grant::DatabaseMode::ReadWrite)
        },
    },
    CapabilityInfo {
        name: "sockets",
        interfaces: &[
            "wasi:sockets/network",
            "wasi:sockets/instance-network",
            "wasi:sockets/tcp",
            "wasi:sockets/tcp-create-socket",
            "wasi:sockets/udp",
            "wasi:sockets/udp-create-socket",
            "wasi:sockets/ip-name-lookup",
        ],
        grant: "never granted: linked so libc-built guests load; every TCP, UDP and name \
                lookup is refused (access-denied) and recorded in the receipt",
        // Nothing can be opened, so nothing can be changed.
        changes: |_| false,
    },
];

/// Whether a component using `capabilities` (its [`check_imports`]
/// result) can change anything outside its call under `grants`: some
/// capability it imports lets it. Default-deny reading: a capability not
/// in the table changes nothing because it is never linked.
pub fn can_change_anything(capabilities: &[&str], grants: &Grants) -> bool {
    CAPABILITIES
        .iter()
        .any(|cap| capabilities.contains(&cap.name) && (cap.changes)(grants))
}

/// Whether a tool that declares a write, under grants where its component
/// can change nothing ([`can_change_anything`] is false), is still worth
/// offering as read-only. A component that runs programs is (a test suite
/// reads as well as it writes); a database tool is not: its write on a
/// read-only grant can only be refused, so `execute` exists only where a
/// database is granted `mode=rw`. Everything else keeps being offered as
/// read-only, as before.
pub fn useful_read_only(capabilities: &[&str]) -> bool {
    capabilities.contains(&"process") || !capabilities.contains(&"database")
}

/// Find the capability governing an import like `wasi:http/types@0.2.6`.
pub fn capability_for_import(import: &str) -> Option<&'static CapabilityInfo> {
    let bare = import.split('@').next().unwrap_or(import);
    CAPABILITIES
        .iter()
        .find(|cap| cap.interfaces.contains(&bare))
}

/// A component import outside [`CAPABILITIES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the component imports `{import}`, which Longhand does not provide{hint}")]
pub struct UnsupportedImport {
    /// The full import name.
    pub import: String,
    /// Extra advice, e.g. for raw sockets.
    pub hint: String,
}

/// Check every import of a component against the table; returns the
/// capability names it may use, or the first unsupported import.
///
/// `imports` are the component's top-level imports, each with whether it is
/// an instance (an interface): they come from its bytes
/// ([`super::component::imports_of`]), so a refused component is never
/// compiled. A function or type imported under an interface's name does not
/// count as the interface.
pub(crate) fn check_imports<'a>(
    imports: impl IntoIterator<Item = (&'a str, bool)>,
) -> Result<Vec<&'static str>, UnsupportedImport> {
    let mut used = Vec::new();
    for (name, is_instance) in imports {
        match capability_for_import(name) {
            Some(cap) if is_instance => {
                if !used.contains(&cap.name) {
                    used.push(cap.name);
                }
            }
            _ => {
                let hint = if name.starts_with("wasi:sockets/") {
                    "; wasi:sockets is linked only to be refused, and only its 0.2 interfaces: \
                     reach the network through wasi:http (e.g. the SDK's http::fetch) with an \
                     --allow-host grant"
                        .to_owned()
                } else {
                    format!(
                        "; tools may import only: {}",
                        CAPABILITIES
                            .iter()
                            .flat_map(|c| c.interfaces.iter())
                            .copied()
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                // The name comes from the component's bytes: any length.
                return Err(UnsupportedImport {
                    import: super::bound::cut_str(name, super::bound::MAX_REQUEST_BYTES)
                        .into_owned(),
                    hint,
                });
            }
        }
    }
    Ok(used)
}

/// Always-on interfaces: io, clocks, random, exit, stdio and our own `host`.
pub(crate) struct Core;

impl Capability for Core {
    const NAME: &'static str = "core";

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        use wasmtime_wasi::cli::{WasiCli, WasiCliView};
        use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
        use wasmtime_wasi::p2::bindings::{cli, clocks, random};
        use wasmtime_wasi::random::{WasiRandom, WasiRandomView};

        let l = linker;
        wasmtime_wasi_io::add_to_linker_async(l)?;
        clocks::wall_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
        clocks::monotonic_clock::add_to_linker::<CallState, WasiClocks>(l, CallState::clocks)?;
        random::random::add_to_linker::<CallState, WasiRandom>(l, |t| t.random())?;
        random::insecure::add_to_linker::<CallState, WasiRandom>(l, |t| t.random())?;
        random::insecure_seed::add_to_linker::<CallState, WasiRandom>(l, |t| t.random())?;
        cli::exit::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        cli::stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        cli::stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        cli::stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        cli::terminal_input::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        cli::terminal_output::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        cli::terminal_stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        cli::terminal_stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        cli::terminal_stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
        super::call::link_host_interface(l)?;
        Ok(())
    }

    fn prepare(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()> {
        call.capture_stdio(grants.limits.max_stdio_bytes);
        Ok(())
    }
}

/// `wasi:cli/environment`: only granted variables; no arguments; `/` as cwd.
pub(crate) struct Env;

impl Capability for Env {
    const NAME: &'static str = "env";

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        use wasmtime_wasi::cli::{WasiCli, WasiCliView};
        wasmtime_wasi::p2::bindings::cli::environment::add_to_linker::<CallState, WasiCli>(
            linker,
            CallState::cli,
        )
    }

    fn prepare(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()> {
        for (name, value) in &grants.env {
            call.wasi.env(name, value);
        }
        Ok(())
    }
}

/// `wasi:filesystem`: only granted directories, with their access, through
/// the guard in [`super::fs`] (pinned directories, no special files, no
/// symlink creation unless granted, a write limit).
pub(crate) struct Filesystem;

impl Capability for Filesystem {
    const NAME: &'static str = "filesystem";

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        use super::fs::GuardedFs;
        use wasmtime_wasi::p2::bindings::filesystem;
        filesystem::types::add_to_linker::<CallState, GuardedFs>(linker, CallState::guarded_fs)?;
        filesystem::preopens::add_to_linker::<CallState, GuardedFs>(linker, CallState::guarded_fs)
    }

    fn prepare(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()> {
        for dir in &grants.dirs {
            call.fs.preopen(dir).map_err(wasmtime::Error::msg)?;
        }
        Ok(())
    }
}

/// `wasi:http`: requests go through [`super::net::HttpPolicy`].
pub(crate) struct Http;

impl Capability for Http {
    const NAME: &'static str = "http";

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(linker)
    }

    fn prepare(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()> {
        call.http_policy(grants);
        Ok(())
    }
}

/// `longhand:tool/sql`: only granted databases, by name (see
/// [`super::sql`]).
pub(crate) struct Database;

impl Capability for Database {
    const NAME: &'static str = "database";

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        super::call::link_sql_interface(linker)
    }

    fn prepare(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()> {
        if !grants.databases.is_empty() {
            call.sql(grants);
        }
        Ok(())
    }
}

/// `longhand:tool/process`: only granted programs, confined to the call's
/// own directory grants (see [`super::process`]).
pub(crate) struct Process;

impl Capability for Process {
    const NAME: &'static str = "process";

    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        super::call::link_process_interface(linker)
    }

    fn prepare(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()> {
        if !grants.programs.is_empty() {
            call.process(grants);
        }
        Ok(())
    }
}

/// `wasi:sockets`: linked, never granted. The call's WASI context allows no
/// TCP, no UDP and no name lookup (see [`super::call::CallBuilder::new`]), so
/// wasmtime-wasi itself refuses to create a socket; [`super::sockets`]
/// records each attempt in the receipt and answers lookups `access-denied`.
pub(crate) struct Sockets;

impl Capability for Sockets {
    const NAME: &'static str = "sockets";

    /// Every `wasi:sockets` 0.2 interface. The three entry points go
    /// through [`super::sockets::DeniedSockets`], which records them; the
    /// rest is wasmtime-wasi's, unreachable without a socket.
    fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
        use super::sockets::DeniedSockets;
        use wasmtime_wasi::p2::bindings::sockets::{
            instance_network, ip_name_lookup, network, tcp, tcp_create_socket, udp,
            udp_create_socket,
        };
        use wasmtime_wasi::sockets::{WasiSockets, WasiSocketsView};

        // wasmtime-wasi's own view, through its blanket impl for WasiView.
        let plain = <CallState as WasiSocketsView>::sockets;
        let denied = CallState::denied_sockets;
        let l = linker;
        network::add_to_linker::<CallState, WasiSockets>(l, &Default::default(), plain)?;
        instance_network::add_to_linker::<CallState, WasiSockets>(l, plain)?;
        tcp::add_to_linker::<CallState, WasiSockets>(l, plain)?;
        udp::add_to_linker::<CallState, WasiSockets>(l, plain)?;
        tcp_create_socket::add_to_linker::<CallState, DeniedSockets>(l, denied)?;
        udp_create_socket::add_to_linker::<CallState, DeniedSockets>(l, denied)?;
        ip_name_lookup::add_to_linker::<CallState, DeniedSockets>(l, denied)?;
        Ok(())
    }

    fn prepare(_grants: &Grants, _call: &mut CallBuilder) -> wasmtime::Result<()> {
        // There is nothing to grant: the denial is fixed for every call.
        Ok(())
    }
}

/// Link every capability into `linker`.
pub(crate) fn link_all(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    Core::link(linker)?;
    Env::link(linker)?;
    Filesystem::link(linker)?;
    Http::link(linker)?;
    Process::link(linker)?;
    Database::link(linker)?;
    Sockets::link(linker)?;
    Ok(())
}

/// Build every capability's per-call state.
pub(crate) fn prepare_all(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()> {
    fn named<C: Capability>(grants: &Grants, call: &mut CallBuilder) -> wasmtime::Result<()> {
        C::prepare(grants, call).map_err(|e| e.context(format!("capability `{}`", C::NAME)))
    }
    named::<Core>(grants, call)?;
    named::<Env>(grants, call)?;
    named::<Filesystem>(grants, call)?;
    named::<Http>(grants, call)?;
    named::<Process>(grants, call)?;
    named::<Database>(grants, call)?;
    named::<Sockets>(grants, call)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_map_to_capabilities_ignoring_versions() {
        assert_eq!(
            capability_for_import("wasi:http/types@0.2.6").map(|c| c.name),
            Some("http")
        );
        assert_eq!(
            capability_for_import("wasi:filesystem/preopens@0.2.0").map(|c| c.name),
            Some("filesystem")
        );
        // Linked to be refused: a libc-built guest loads, and gets nothing.
        assert_eq!(
            capability_for_import("wasi:sockets/tcp@0.2.0").map(|c| c.name),
            Some("sockets")
        );
        assert!(capability_for_import("wasi:sockets/types@0.3.0").is_none());
        assert!(capability_for_import("evil:backdoor/api").is_none());
    }

    #[test]
    fn capability_names_match_their_modules() {
        let names: Vec<_> = CAPABILITIES.iter().map(|c| c.name).collect();
        for name in [
            Core::NAME,
            Env::NAME,
            Filesystem::NAME,
            Http::NAME,
            Process::NAME,
            Sockets::NAME,
        ] {
            assert!(names.contains(&name), "{name} missing from the table");
        }
    }
}
