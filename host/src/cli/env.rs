//! What the commands open the same way: the session store
//! (`LONGHAND_STORE`, else SQLite in the data directory), the tool host, the
//! name a process writes under, and a session id from the command line.
//!
//! A floor of the CLI: the commands (`run`, `worker`, `serve`, `triggers`,
//! `approvals`, `control`, `plan`, `tool`) import it, and it imports none of
//! them, only [`settings`](super::settings) and the door's `usage`. It must
//! not run sessions or print.

use std::sync::Arc;

use anyhow::Context;

use super::settings::{data_dir, hands_config};
use super::usage;
use longhand_hands::Hands;
use longhand_session::{SessionId, SqliteStore, Store};

/// The session store commands use: `LONGHAND_STORE=postgres://…` (the
/// fleet's shared store) when set and not empty, else the SQLite store in
/// the data directory.
pub(super) async fn open_store() -> anyhow::Result<Arc<dyn Store>> {
    // `LONGHAND_STORE=postgres://…`: the fleet's shared store. Unset (the
    // default): SQLite in the data directory.
    if let Some(url) = env("LONGHAND_STORE").filter(|u| !u.is_empty()) {
        return open_url(&url).await;
    }
    let dir = data_dir().ok_or_else(|| {
        usage("cannot find a data directory: set LONGHAND_HOME (or HOME / XDG_DATA_HOME)")
    })?;
    let store = SqliteStore::open(&dir)
        .await
        .with_context(|| format!("opening the session store in {}", dir.display()))?;
    Ok(Arc::new(store))
}

/// Opens the store a `postgres://` (or `postgresql://`) URL names.
pub(super) async fn open_url(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(usage(
            "the store must be a postgres:// URL (unset LONGHAND_STORE for the local SQLite store)",
        ));
    }
    #[cfg(feature = "postgres")]
    {
        // The URL may carry a password: name the store by host and database.
        let store = longhand_session::PostgresStore::connect(url)
            .await
            .map_err(|e| anyhow::Error::new(e).context("opening the PostgreSQL session store"))?;
        Ok(Arc::new(store))
    }
    #[cfg(not(feature = "postgres"))]
    Err(super::not_built("postgres", "a PostgreSQL session store"))
}

/// The tool host, with the CLI's engine settings, resolving installed
/// tools by name ([`install_store`]).
pub(super) fn hands() -> anyhow::Result<Hands> {
    with_installed(Hands::new(hands_config()).context("cannot start the tool host")?)
}

/// `hands`, resolving names that are not built-ins in the install store.
pub(super) fn with_installed(hands: Hands) -> anyhow::Result<Hands> {
    Ok(match install_store() {
        Some(store) => hands.with_installed(Arc::new(store)),
        None => hands,
    })
}

/// The install store (`DATA_DIR/tools`) and the trust store it verifies
/// signatures against (`DATA_DIR/trust`); `None` without a data directory.
pub(super) fn install_store() -> Option<crate::dist::store::Store> {
    use crate::dist::sign::{Sealing, TrustStore};
    let dir = data_dir()?;
    // Both sealed with the host key (docs/security.md): a record or a key
    // this host did not write is refused.
    let seal = Sealing::with_key_at(super::settings::key_file().as_deref());
    Some(
        crate::dist::store::Store::new(
            dir.join("tools"),
            TrustStore::new(dir.join("trust")).sealed(seal.clone()),
        )
        .sealed(seal),
    )
}

/// The name this process writes under (leases, approvals): host and pid.
pub(super) fn owner() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "local".to_owned());
    format!("{host}-{}", std::process::id())
}

/// An environment variable, `None` when unset or not Unicode: the lookup
/// through which `run` hands API keys and secrets to the provider, `freeze`
/// and `bind`.
pub(super) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A session id from the command line; a usage error names the text.
pub(super) fn parse_session(text: &str) -> anyhow::Result<SessionId> {
    text.parse::<SessionId>()
        .map_err(|e| usage(format!("`{text}` is not a session id: {e}")))
}
