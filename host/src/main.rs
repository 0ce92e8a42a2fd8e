//! The `longhand` binary: parse, run, map the outcome to an exit code.

fn main() -> std::process::ExitCode {
    longhand_host::cli::main()
}
