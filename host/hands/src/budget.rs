//! What one call may make the host hold on its behalf: bytes of host
//! memory and open file descriptors.
//!
//! A guest's linear memory is bounded by its memory limit, but much of what
//! it asks for lives on the host side of the boundary: a directory listing,
//! a header map, a buffered request body, an open file. Without a bound of
//! their own, a guest with `--memory 16` could make the host hold
//! gigabytes, and one call could hold every descriptor the process may open
//! so that every other call fails with "too many open files".
//!
//! [`HostBudget`] is the one per-call account of both:
//!
//! - **bytes** (`host_memory`, default 4 × the call's memory limit): every
//!   host-side allocation a guest controls without a fixed bound is charged
//!   here while it lives ([`HostBudget::charge`] returns a guard that gives
//!   the bytes back when dropped). What has a fixed per-object bound instead
//!   (header maps, outgoing body chunks) takes its bound from this budget
//!   ([`HostBudget::per_object_bytes`]), so that the resource table full of
//!   the largest objects still fits in it.
//! - **descriptors** (default [`MAX_OPEN_FILES`] per call, fewer if the
//!   process limit cannot give every concurrent call that many; see
//!   [`fd_share`]): files and directories the guest opened, directory
//!   listings, and outbound HTTP connections. A descriptor is counted for as
//!   long as the host really holds it — through a stream or a clone as well
//!   as through the guest's handle — by keeping a weak reference to what
//!   owns it.
//!
//! Past either bound the guest gets an error (never a trap of the host) and
//! the receipt names the limit. This module decides nothing about which
//! resources a guest may use; it only counts.

use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::receipt::Journal;

/// Descriptors one call may hold open at once, at most: files, directories,
/// directory listings (two each) and HTTP connections. The preopened
/// granted directories are not counted: the operator chose them.
pub const MAX_OPEN_FILES: usize = 64;

/// Descriptors the process keeps for itself whatever its calls hold: the
/// session store, sockets of the server and of model calls, the compile
/// cache, logs.
pub const HOST_RESERVE_FDS: u64 = 256;

/// Default host budget: this many times the call's memory limit.
pub const HOST_MEMORY_PER_GUEST_MEMORY: u64 = 4;

/// Smallest per-object bound derived from the budget, so a tool with a tiny
/// memory limit can still send an ordinary request.
const MIN_PER_OBJECT: usize = 4 << 10;

/// The descriptors each call may hold when `slots` calls run at once and
/// the process may open `nofile`: [`MAX_OPEN_FILES`], or less if that many
/// per call would eat into [`HOST_RESERVE_FDS`]. Never below 8, which a
/// machine configured that tightly needs to run any tool at all.
pub fn fd_share(nofile: u64, slots: u32) -> usize {
    let usable = nofile.saturating_sub(HOST_RESERVE_FDS);
    let share = usable / u64::from(slots.max(1));
    usize::try_from(share)
        .unwrap_or(usize::MAX)
        .clamp(8, MAX_OPEN_FILES)
}

/// Raise this process's soft limit on open files to its hard limit, and
/// return the limit now in force. Called once at start by the `longhand`
/// binary: the default soft limit (often 1024) is a relic of `select(2)`,
/// and every call's descriptor share is computed from it.
pub fn raise_fd_limit() -> u64 {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is a valid `rlimit` to fill and then to read;
        // RLIMIT_NOFILE is a valid resource. Lowering nothing, raising the
        // soft limit up to the hard limit needs no privilege.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                limit.rlim_cur = limit.rlim_max;
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    tracing::warn!(
                        error = %std::io::Error::last_os_error(),
                        "cannot raise the open-files limit to its hard limit"
                    );
                }
            }
        }
    }
    fd_limit()
}

/// The soft limit on open files now in force (`u64::MAX` when unlimited or
/// unknown).
pub fn fd_limit() -> u64 {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `limit` is a valid `rlimit` for the kernel to fill.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0
            || limit.rlim_cur == libc::RLIM_INFINITY
        {
            return u64::MAX;
        }
        // `rlim_t` is an unsigned type of at most 64 bits; u64 here, but
        // not on every target.
        #[allow(clippy::unnecessary_cast, reason = "rlim_t is not u64 on every target")]
        let current = limit.rlim_cur as u64;
        current
    }
    #[cfg(not(unix))]
    {
        u64::MAX
    }
}

/// The bound for one object of a kind the host keeps up to `max_objects`
/// of (the resource table's capacity), under a host budget of
/// `budget_bytes`: half the budget spread over them, between 4 KiB and
/// `cap`.
pub(crate) fn per_object_bytes(budget_bytes: u64, max_objects: usize, cap: usize) -> usize {
    let share = usize::try_from(budget_bytes / 2 / max_objects.max(1) as u64).unwrap_or(usize::MAX);
    share.clamp(MIN_PER_OBJECT, cap.max(MIN_PER_OBJECT))
}

/// Why a charge was refused; the receipt already says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exceeded {
    /// The `host_memory` budget.
    Bytes,
    /// The descriptor budget.
    Descriptors,
}

/// One call's account of host bytes and descriptors. Shared (`Arc`) by the
/// filesystem guard, the HTTP policy and their streams.
pub(crate) struct HostBudget {
    bytes_limit: u64,
    bytes: AtomicU64,
    fd_limit: usize,
    /// What owns each counted descriptor, with how many it holds; an entry
    /// whose owner is gone no longer counts.
    fds: Mutex<Vec<(Weak<dyn Any + Send + Sync>, usize)>>,
    bytes_hit: AtomicBool,
    fds_hit: AtomicBool,
    journal: Arc<Mutex<Journal>>,
}

/// Bytes charged to a [`HostBudget`], given back when dropped.
pub(crate) struct Charge {
    budget: Arc<HostBudget>,
    bytes: u64,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.bytes.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl HostBudget {
    pub(crate) fn new(bytes_limit: u64, fd_limit: usize, journal: Arc<Mutex<Journal>>) -> Self {
        Self {
            bytes_limit,
            bytes: AtomicU64::new(0),
            fd_limit,
            fds: Mutex::new(Vec::new()),
            bytes_hit: AtomicBool::new(false),
            fds_hit: AtomicBool::new(false),
            journal,
        }
    }

    /// [`per_object_bytes`] of this budget.
    pub(crate) fn per_object_bytes(&self, max_objects: usize, cap: usize) -> usize {
        per_object_bytes(self.bytes_limit, max_objects, cap)
    }

    /// Charge `bytes` for as long as the returned guard lives, or refuse
    /// (recording the limit) if they do not fit.
    pub(crate) fn charge(self: &Arc<Self>, bytes: u64, what: &str) -> Result<Charge, Exceeded> {
        let fits = self
            .bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                b.checked_add(bytes)
                    .filter(|next| *next <= self.bytes_limit)
            })
            .is_ok();
        if fits {
            return Ok(Charge {
                budget: self.clone(),
                bytes,
            });
        }
        if !self.bytes_hit.swap(true, Ordering::Relaxed)
            && let Ok(mut journal) = self.journal.lock()
        {
            journal.limit_hit(format!(
                "host memory limit of {} bytes per call reached (host_memory) by {what}",
                self.bytes_limit
            ));
        }
        Err(Exceeded::Bytes)
    }

    /// Descriptors counted now (owners still alive).
    fn live(fds: &mut Vec<(Weak<dyn Any + Send + Sync>, usize)>) -> usize {
        fds.retain(|(owner, _)| owner.strong_count() > 0);
        fds.iter().map(|(_, n)| n).sum()
    }

    /// Whether `count` more descriptors fit; records the limit if not.
    /// Call before opening, then [`Self::track`] what was opened.
    pub(crate) fn admit(&self, count: usize, what: &str) -> Result<(), Exceeded> {
        let Ok(mut fds) = self.fds.lock() else {
            return Err(Exceeded::Descriptors);
        };
        if Self::live(&mut fds).saturating_add(count) <= self.fd_limit {
            return Ok(());
        }
        drop(fds);
        self.refuse_fd(what);
        Err(Exceeded::Descriptors)
    }

    fn refuse_fd(&self, what: &str) {
        if !self.fds_hit.swap(true, Ordering::Relaxed)
            && let Ok(mut journal) = self.journal.lock()
        {
            journal.limit_hit(format!(
                "open descriptor limit of {} per call reached (max_open_files: files, \
                 directories, directory listings and connections held at once) by {what}",
                self.fd_limit
            ));
        }
    }

    /// Count `count` descriptors owned by `owner` until it is dropped.
    pub(crate) fn track<T: Any + Send + Sync>(&self, owner: &Arc<T>, count: usize) {
        let weak: Weak<T> = Arc::downgrade(owner);
        let weak: Weak<dyn Any + Send + Sync> = weak;
        if let Ok(mut fds) = self.fds.lock() {
            fds.push((weak, count));
        }
    }

    /// Admit and count one descriptor at once, for callers that may run
    /// concurrently (HTTP connections): the returned token holds it.
    pub(crate) fn admit_token(&self, what: &str) -> Result<Arc<()>, Exceeded> {
        let Ok(mut fds) = self.fds.lock() else {
            return Err(Exceeded::Descriptors);
        };
        if Self::live(&mut fds) < self.fd_limit {
            let token = Arc::new(());
            let weak: Weak<()> = Arc::downgrade(&token);
            let weak: Weak<dyn Any + Send + Sync> = weak;
            fds.push((weak, 1));
            return Ok(token);
        }
        drop(fds);
        self.refuse_fd(what);
        Err(Exceeded::Descriptors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(bytes: u64, fds: usize) -> Arc<HostBudget> {
        Arc::new(HostBudget::new(bytes, fds, Arc::default()))
    }

    #[test]
    fn bytes_come_back_when_the_charge_is_dropped() {
        let b = budget(100, 1);
        let first = b.charge(60, "a").expect("fits");
        assert_eq!(b.charge(60, "b").err(), Some(Exceeded::Bytes));
        drop(first);
        assert!(b.charge(100, "c").is_ok());
        let journal = b.journal.lock().expect("journal");
        assert_eq!(journal.limits_hit.len(), 1);
        assert!(journal.limits_hit[0].contains("host_memory"));
    }

    #[test]
    fn a_descriptor_counts_while_anything_holds_its_owner() {
        let b = budget(0, 2);
        let file = Arc::new(1u8);
        b.admit(2, "x").expect("fits");
        b.track(&file, 2);
        assert_eq!(b.admit(1, "y"), Err(Exceeded::Descriptors));
        let clone = file.clone();
        drop(file);
        assert_eq!(
            b.admit(1, "y"),
            Err(Exceeded::Descriptors),
            "a clone holds it"
        );
        drop(clone);
        assert!(b.admit(2, "z").is_ok());
        let token = b.admit_token("t").expect("fits");
        let _second = b.admit_token("t").expect("fits");
        assert!(b.admit_token("t").is_err());
        drop(token);
        assert!(b.admit_token("t").is_ok());
    }

    #[test]
    fn the_share_keeps_the_reserve_and_a_floor() {
        assert_eq!(fd_share(20_000, 64), MAX_OPEN_FILES);
        assert_eq!(fd_share(1024, 64), 12);
        assert_eq!(fd_share(300, 64), 8);
        assert_eq!(fd_share(u64::MAX, 0), MAX_OPEN_FILES);
    }
}
