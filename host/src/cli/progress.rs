//! A line that says the CLI is still working, on a terminal.
//!
//! Compiling a component for this machine takes from a second (a small
//! Rust tool) to half a minute (CPython, SpiderMonkey) the first time; the
//! compiled code is cached after. `tool call`, `tool install`, `tool
//! publish`, `tool build`, `run` and the rest wrap such a step in
//! [`Working`]: past [`QUIET_FOR`] it shows what it is doing and for how
//! long, on one line rewritten in place, and ends with the time it took.
//! A step that ends sooner (a cached component) shows nothing.
//!
//! Only on a terminal (stderr), like `run`'s status line: piped output and
//! `--json` stay exactly as they were. The ticker is a thread, not a task,
//! because a compile holds the thread it runs on.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a step runs before it is shown.
const QUIET_FOR: Duration = Duration::from_millis(700);

/// How often the shown time moves.
const TICK: Duration = Duration::from_millis(250);

/// A step in progress; shown while it lasts (see the module's comment),
/// ended when dropped.
pub struct Working {
    shared: Option<Arc<(Mutex<bool>, Condvar)>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Working {
    /// Start `what` (e.g. "compiling greet.wasm for this machine").
    pub fn start(what: impl Into<String>) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self {
                shared: None,
                ticker: None,
            };
        }
        let what = super::term::one_line(&what.into()).into_owned();
        let shared = Arc::new((Mutex::new(false), Condvar::new()));
        let theirs = Arc::clone(&shared);
        let ticker = std::thread::spawn(move || tick(&what, &theirs));
        Self {
            shared: Some(shared),
            ticker: Some(ticker),
        }
    }
}

/// The ticker: quiet for [`QUIET_FOR`], then the step and its time until
/// `done`, then the time it took.
fn tick(what: &str, shared: &(Mutex<bool>, Condvar)) {
    let started = Instant::now();
    let (done, wake) = shared;
    let Ok(mut finished) = done.lock() else {
        return;
    };
    let mut shown = false;
    loop {
        let wait = if shown { TICK } else { QUIET_FOR };
        finished = match wake.wait_timeout_while(finished, wait, |f| !*f) {
            Ok((guard, _)) => guard,
            Err(_) => return,
        };
        let elapsed = started.elapsed().as_secs_f64();
        let mut err = std::io::stderr().lock();
        if *finished {
            if shown {
                let _ = writeln!(err, "\r\x1b[2K{what}: done in {elapsed:.1}s");
            }
            return;
        }
        shown = true;
        let _ = write!(err, "\r\x1b[2K{what} … {elapsed:.0}s");
        let _ = err.flush();
    }
}

impl Drop for Working {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            let (done, wake) = &**shared;
            if let Ok(mut finished) = done.lock() {
                *finished = true;
            }
            wake.notify_all();
        }
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
    }
}

/// What a component's first load does, for [`Working::start`]: `label` is
/// a file name or a tool's name.
pub fn compiling(label: &str) -> String {
    format!("compiling {label} for this machine (once; later loads are cached)")
}
