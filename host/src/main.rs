//! The `longhand` binary: parse, run, map the outcome to an exit code.

fn main() -> std::process::ExitCode {
    restore_sigpipe();
    // Before any thread or file exists: every tool call's descriptor share
    // is computed from the limit in force (see docs/security.md).
    longhand_host::hands::budget::raise_fd_limit();
    longhand_host::cli::main()
}

/// Rust starts programs with SIGPIPE ignored, so `longhand log … | head`
/// would make the next `println!` panic on a closed pipe. A command-line
/// tool should end quietly instead, as `cat` does: restore the default.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any other thread exists;
    // setting a signal's disposition to the default has no other effect.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
