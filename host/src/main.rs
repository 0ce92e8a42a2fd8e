//! The `longhand` binary: parse, run, map the outcome to an exit code.

fn main() -> std::process::ExitCode {
    // SIGPIPE stays ignored (Rust's start-up default) unless the command
    // is one whose point is printing to a pipe: `cli::main` decides, per
    // command, once it is parsed.
    //
    // Before any thread or file exists: every tool call's descriptor share
    // is computed from the limit in force (see docs/security.md).
    longhand_hands::budget::raise_fd_limit();
    longhand_host::cli::main()
}
