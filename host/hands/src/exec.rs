//! Where guest code runs, so that a busy guest cannot hold up the runtime.
//!
//! A call starts on the caller's task, polled like any future: no thread
//! hop, so a short call costs what it always did. Every epoch tick the
//! store's deadline callback ([`arm`]) runs inside the guest: past the
//! call's wall deadline it traps ([`Trap::Interrupt`](wasmtime::Trap)), and
//! otherwise it yields to the executor and, once the call has run longer
//! than [`LONG_AFTER`], marks it long. At that yield [`Offloader::run`] moves
//! the rest of the call — the future owns the store and everything else it
//! needs — to a thread of its own at a lower priority, which polls it with
//! [`Handle::block_on`] (tokio I/O, timers and `spawn_blocking` keep
//! working), while the caller's task awaits the result on a channel.
//!
//! Why not just yield every tick on the caller's task: a trivial call queued
//! on the same worker thread would still wait out the spinner's whole tick
//! (10 ms against ~25 µs of its own). Why a thread per long call rather than
//! a pool: long calls are long, so spawning costs nothing beside them, and a
//! pool would either be sized (and then queue long calls behind each other)
//! or be unbounded anyway; the instance pool already bounds how many calls
//! run at once. Why a lower priority, and why not idle: a spinning guest on
//! its own thread still takes a core from the runtime's worker threads when
//! the machine has few, so it runs at nice [`GUEST_NICE`]: against a worker
//! thread (nice 0) the kernel gives it about a quarter of a shared core and
//! preempts it when the worker wakes. It used to run at `SCHED_IDLE`, which
//! runs a thread only when nothing else wants the core: on a busy edge box
//! (another process computing, a build) a long call got next to nothing
//! and starved until its wall deadline — a 1 MiB `jq` check failed its 2 s
//! limit under two busy loops (issue 26). A call the agent waits for is on
//! its critical path; a busy neighbour may slow it, not stop it. The limit
//! stays wall time: it is what the operator wrote, and what a caller
//! waiting for a result feels. See `docs/design.md` ("Long calls on a busy
//! machine") and `docs/security.md` ("Busy guests and the runtime").
//!
//! Cancellation: dropping the future returned by [`Offloader::run`] (the
//! caller gave up) closes a channel that the offloaded loop selects on
//! first; the loop then drops the guest future (and with it the store and
//! its instance) at the guest's next yield — within a tick while it spins —
//! and the thread ends. Nothing of a call runs after its future is gone.
//! The caller itself waits at most [`OVERDUE_AFTER`] past the deadline for
//! an offloaded call, since a thread short of CPU cannot notice its
//! deadline until it runs ([`Lost::Overdue`]).
//!
//! Not contained: offloaded guests share the address space, so a trivial
//! call's memory reset (`madvise`) must interrupt the cores they run on to
//! flush TLBs; see `docs/benchmarks.md` ("Busy neighbours").
//!
//! What this module must not do: decide limits or read call state. It knows
//! a deadline, a flag and a future.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use wasmtime::{Store, UpdateDeadline};

/// A call that has run this long when an epoch tick lands in it moves to
/// its own thread. Short enough that a spinner holds its worker for at most
/// about one tick (the first tick after this mark), long enough that a call
/// doing ordinary work (a `json` query is ~1.2 ms) rarely moves: it moves
/// only if a tick lands after this mark, and moving costs a thread spawn.
const LONG_AFTER: Duration = Duration::from_millis(2);

/// How long past its deadline the caller of an offloaded call waits for the
/// guest's thread to report. A low-priority thread on a saturated machine
/// may not get a core for a while, and it can only notice its deadline when
/// it runs; the caller does not wait for that. Normally the thread reports
/// within a tick of the deadline, with the store, so the receipt is exact.
const OVERDUE_AFTER: Duration = Duration::from_millis(50);

/// What the epoch callback last saw of a call, for a receipt written
/// without the store (see [`Lost::Overdue`]). At most a tick old.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Meter {
    /// Fuel left in the store.
    pub(crate) fuel_left: u64,
    /// Peak of the call's linear memory, in bytes.
    pub(crate) peak_memory: u64,
    /// Whether a memory growth was refused.
    pub(crate) memory_limit_hit: bool,
}

/// What [`arm`] gives back: the call's wall deadline and the flag its
/// epoch callback raises when the call has run long.
pub(crate) struct Watch {
    /// When the call's timeout ends; `None` if it lies beyond what
    /// [`Instant`] can represent.
    pub(crate) deadline: Option<Instant>,
    /// Raised by the epoch callback once the call has run [`LONG_AFTER`].
    long: Arc<AtomicBool>,
    /// Updated by the epoch callback every tick.
    meter: Arc<Mutex<Meter>>,
}

impl Watch {
    /// What the epoch callback last saw.
    pub(crate) fn meter(&self) -> Meter {
        self.meter.lock().map(|m| *m).unwrap_or_default()
    }
}

/// The call's deadline passed while its guest was waiting on the host (no
/// guest code ran, so no epoch callback could trap).
#[derive(Debug)]
pub(crate) struct TimedOut;

/// Run `fut` until `deadline`: the timer that covers time a guest spends
/// blocked in host calls. Time spent running guest code is covered by the
/// epoch callback, which traps instead.
pub(crate) async fn within<F: Future>(
    deadline: Option<Instant>,
    fut: F,
) -> Result<F::Output, TimedOut> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at.into(), fut)
            .await
            .map_err(|_| TimedOut),
        None => Ok(fut.await),
    }
}

/// Install the call's epoch callback on `store`: trap at `timeout` from
/// now, and otherwise yield every tick, marking the call long after
/// [`LONG_AFTER`]. `memory` reads the peak memory and whether a growth was
/// refused from the store's data, for the [`Meter`].
pub(crate) fn arm<T: 'static>(
    store: &mut Store<T>,
    timeout: Duration,
    memory: fn(&T) -> (u64, bool),
) -> Watch {
    let started = Instant::now();
    let deadline = started.checked_add(timeout);
    let long = Arc::new(AtomicBool::new(false));
    let flag = long.clone();
    let meter = Arc::new(Mutex::new(Meter {
        fuel_left: store.get_fuel().unwrap_or(0),
        ..Meter::default()
    }));
    let seen = meter.clone();
    // The callback runs on the next tick after the deadline is set, then
    // once per tick (`Yield(1)`): a clock read and an uncontended lock.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |ctx| {
        let (peak_memory, memory_limit_hit) = memory(ctx.data());
        if let Ok(mut m) = seen.lock() {
            *m = Meter {
                fuel_left: ctx.get_fuel().unwrap_or(0),
                peak_memory,
                memory_limit_hit,
            };
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(UpdateDeadline::Interrupt);
        }
        if now.duration_since(started) >= LONG_AFTER {
            flag.store(true, Ordering::Relaxed);
        }
        Ok(UpdateDeadline::Yield(1))
    });
    Watch {
        deadline,
        long,
        meter,
    }
}

/// Why [`Offloader::run`] has no output for a call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Lost {
    /// The call's thread ended without a result: the host panicked while
    /// running it (the panic is printed by the panic hook). The caller
    /// reports a host error; the host carries on.
    #[error("the thread running the call ended without a result (a host panic)")]
    Panicked,
    /// The call's deadline passed [`OVERDUE_AFTER`] ago and its thread has
    /// not reported: it is starved of CPU. The caller reports the timeout
    /// from the [`Watch`]'s meter; the guest stops at its thread's next
    /// slice (the epoch check traps at once, the deadline being past).
    #[error("the call's thread did not report by its deadline")]
    Overdue,
}

/// Moves long calls to threads of their own; counts them while they run.
#[derive(Default)]
pub(crate) struct Offloader {
    live: Arc<AtomicUsize>,
}

impl Offloader {
    /// Calls running on a thread of their own right now.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// Run `guest` to completion: here while it is short, on a thread of
    /// its own once `watch` says it has run long (see the module docs).
    ///
    /// Dropping the returned future drops `guest` promptly, wherever it runs.
    pub(crate) async fn run<F>(&self, guest: F, watch: &Watch) -> Result<F::Output, Lost>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // Boxed so that it can move to another thread after being polled:
        // the box moves, the future inside stays where it was pinned.
        let mut guest = Box::pin(guest);
        let first = std::future::poll_fn(|cx| match guest.as_mut().poll(cx) {
            Poll::Ready(out) => Poll::Ready(Some(out)),
            Poll::Pending if watch.long.load(Ordering::Relaxed) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        })
        .await;
        if let Some(out) = first {
            return Ok(out);
        }

        // Without a runtime to lend the thread (a caller polling by hand),
        // keep going here.
        let Ok(handle) = Handle::try_current() else {
            return Ok(guest.await);
        };
        let (done_tx, done_rx) = oneshot::channel();
        // Never sent on: dropping it (this future dropped) is the signal.
        let (_cancel_tx, cancel_rx) = oneshot::channel::<()>();
        // The guest travels in a slot so that a failed spawn hands it back.
        let slot = Arc::new(std::sync::Mutex::new(Some(guest)));
        let parcel = slot.clone();
        let count = LiveCount::enter(&self.live);
        let spawned = std::thread::Builder::new()
            .name("longhand-guest".to_owned())
            .spawn(move || {
                lower_priority();
                let guest = parcel.lock().ok().and_then(|mut g| g.take());
                drop(parcel);
                let Some(guest) = guest else { return };
                handle.block_on(async move {
                    tokio::select! {
                        // Checked first on every wake: a caller that left
                        // stops the guest at its next yield.
                        biased;
                        _ = cancel_rx => {}
                        out = guest => {
                            // Uncounted before the caller hears: nothing of
                            // the call runs after this (the thread exits).
                            drop(count);
                            let _ = done_tx.send(out);
                        }
                    }
                });
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "cannot start a thread for a long call; it stays on its task");
            let guest = slot.lock().ok().and_then(|mut g| g.take());
            return match guest {
                Some(guest) => Ok(guest.await),
                None => Err(Lost::Panicked),
            };
        }
        drop(slot);
        let cutoff = watch
            .deadline
            .and_then(|d| d.checked_add(OVERDUE_AFTER))
            .map(tokio::time::Instant::from_std);
        match cutoff {
            Some(at) => match tokio::time::timeout_at(at, done_rx).await {
                Ok(done) => done.map_err(|_| Lost::Panicked),
                Err(_) => Err(Lost::Overdue),
            },
            None => done_rx.await.map_err(|_| Lost::Panicked),
        }
    }
}

/// One offloaded call counted in [`Offloader::live`] until dropped: when
/// its guest finishes or is dropped, or with the closure if the thread
/// never started.
struct LiveCount(Arc<AtomicUsize>);

impl LiveCount {
    fn enter(live: &Arc<AtomicUsize>) -> Self {
        live.fetch_add(1, Ordering::SeqCst);
        Self(live.clone())
    }
}

impl Drop for LiveCount {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The nice value of a thread running a long call (default 5): CFS weight
/// 335 against 1024 at nice 0, so it gets about a quarter of a core shared
/// with a busy thread, and at least that — never nothing, as at
/// `SCHED_IDLE`.
pub const GUEST_NICE: i32 = 5;

/// Lower the calling thread to nice [`GUEST_NICE`] (Linux: `setpriority`
/// on a thread id renices that thread only). Elsewhere the thread keeps its
/// priority: on macOS `setpriority` would renice the whole process.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: on Linux PRIO_PROCESS with who = 0 renices the calling
        // thread only; raising the nice value needs no privilege.
        let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, GUEST_NICE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long a test waits for a thread to end before failing.
    const SLACK: Duration = Duration::from_secs(2);

    fn watch(long: bool, deadline: Option<Instant>) -> Watch {
        Watch {
            deadline,
            long: Arc::new(AtomicBool::new(long)),
            meter: Arc::default(),
        }
    }

    /// Wait up to [`SLACK`] for `offloader` to have no call running.
    async fn settled(offloader: &Offloader) -> bool {
        let started = Instant::now();
        while offloader.live() > 0 && started.elapsed() < SLACK {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        offloader.live() == 0
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_future_stays_on_its_task() {
        let offloader = Offloader::default();
        let watch = watch(false, None);
        let here = std::thread::current().id();
        let ran_on = offloader
            .run(async { std::thread::current().id() }, &watch)
            .await
            .expect("no panic");
        assert_eq!(ran_on, here);
        assert_eq!(offloader.live(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_long_future_moves_at_its_next_yield_and_finishes_there() {
        let offloader = Offloader::default();
        let watch = watch(true, None);
        let here = std::thread::current().id();
        let out = offloader
            .run(
                async move {
                    let before = std::thread::current().id();
                    tokio::task::yield_now().await;
                    // Timers work on the new thread.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    (before, std::thread::current())
                },
                &watch,
            )
            .await
            .expect("no panic");
        assert_eq!(out.0, here, "the first poll runs on the caller's task");
        assert_ne!(out.1.id(), here);
        assert_eq!(out.1.name(), Some("longhand-guest"));
        assert_eq!(offloader.live(), 0, "the thread is gone once done");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropping_the_caller_ends_the_thread() {
        let offloader = Offloader::default();
        let watch = watch(true, None);
        let dropped = Arc::new(AtomicBool::new(false));
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flag = Flag(dropped.clone());
        let run = offloader.run(
            async move {
                let _flag = flag;
                std::future::pending::<()>().await;
            },
            &watch,
        );
        let timed = tokio::time::timeout(Duration::from_millis(50), run).await;
        assert!(timed.is_err(), "a pending future never finishes");
        assert!(settled(&offloader).await, "the thread outlived its caller");
        assert!(dropped.load(Ordering::SeqCst), "the guest was not dropped");
    }

    /// A thread that cannot get back to its loop (here: blocked outright,
    /// as a starved low-priority thread is) does not hold its caller past
    /// the deadline; once it runs again, it stops.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_starved_thread_does_not_hold_its_caller_past_the_deadline() {
        let offloader = Offloader::default();
        let timeout = Duration::from_millis(100);
        let watch = watch(true, Instant::now().checked_add(timeout));
        let started = Instant::now();
        let out = offloader
            .run(
                async {
                    tokio::task::yield_now().await;
                    std::thread::sleep(Duration::from_millis(400));
                    std::future::pending::<()>().await;
                },
                &watch,
            )
            .await;
        let waited = started.elapsed();
        assert!(matches!(out, Err(Lost::Overdue)), "{out:?}");
        assert!(
            waited >= timeout + OVERDUE_AFTER && waited < Duration::from_millis(350),
            "the caller waited {waited:?}"
        );
        assert!(
            settled(&offloader).await,
            "the thread did not stop once it ran"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn offload_threads_run_below_the_runtime_but_never_idle() {
        let (policy, nice) = std::thread::spawn(|| {
            lower_priority();
            // SAFETY: pid 0 / who 0 is the calling thread.
            unsafe {
                (
                    libc::sched_getscheduler(0),
                    libc::getpriority(libc::PRIO_PROCESS, 0),
                )
            }
        })
        .join()
        .expect("thread");
        // SCHED_OTHER, reniced: a busy neighbour slows a long call, it
        // cannot starve it (issue 26).
        assert_eq!(policy, libc::SCHED_OTHER);
        assert_eq!(nice, GUEST_NICE);
    }
}
