//! Integration tests of the `longhand` binary and the session library, run
//! the way an operator runs them: the real binary (`CARGO_BIN_EXE_longhand`)
//! in a clean environment whose only setting is a private `LONGHAND_HOME`,
//! and the library API where a test must play a second worker.
//!
//! Nothing here reaches beyond 127.0.0.1: models are scripted, replayed from
//! a cassette, or served by an in-process HTTP server on a loopback port.
//!
//! - [`crash`]: SIGKILL at many points of a 200-turn session and resume until
//!   it finishes; the end state must equal an uninterrupted run's, and no
//!   `writes` tool may run twice.
//! - [`example`]: the offline example agent runs and is logged.
//! - [`limits`]: a limit pauses a session; `resume --raise` finishes it.
//! - [`config`]: a bad agent file is refused before anything is created.
//! - [`canary`]: an API key reaches the model server and nothing else.
//! - [`lease`]: a live lease keeps a second writer out.
//! - [`defects`]: three defects of issue 7 (unknown `only` name, bad
//!   model URLs, one answer past `max_tool_calls`), each refused or capped.
//! - [`escapes`]: guest and model text cannot drive the operator's terminal.
//! - [`checks`]: tool-check predicates in the sandbox; the example crate's
//!   `cargo test` as a command check under Landlock.
//! - [`large`]: a 1 MiB final answer finishes the session; the whole text is
//!   in a blob.
//! - [`exit_codes`]: README's exit-code table, a test per row.
//! - [`memory`]: `longhand memory` list, search, show and forget on a bank
//!   seeded through the library.
//! - [`control`]: `pause`, `cancel` and `send` post to a session's inbox,
//!   never its log; unknown and ended sessions are refused.
//! - [`roles`]: a planned session's planner (bad plans sent back, three
//!   pause), revision after a failed task, judge and handoff fallback.
//! - [`stream_timeouts`]: a live stream longer than `request_timeout` finishes.
//! - [`serve`]: the HTTP API and, in Chromium, the web page.
//! - [`takeover`]: a harness killed mid-check leaves no check running, and
//!   `resume` or a new worker takes its session at once.
//! - [`host_spend`]: what a guest can make the host spend: listings of a
//!   huge directory, descriptor hogs beside a normal call, symbolic links
//!   moved into a grant without them.
//! - [`printed`]: names in errors and indented output stay bounded.
//! - [`launch`]: `--model` answers every role and child of a session after
//!   `approve` + `resume` and through a worker; a judge keeps the flag's endpoint.
//! - [`turns`]: notes never break call/result pairing (strict model server,
//!   every wire format), pause/cancel during a model call, unpriced money
//!   limits refused, attempts counted across resumes.
//! - [`dist`]: `tool publish` to a real OCI registry, `tool install` on a
//!   fresh home, signatures, the lock, held upgrades, a hostile registry.
//! - [`record`]: `tool call --record` keeps a call and its HTTP exchanges
//!   without the secret; `tool test` replays it offline, and fails with a
//!   diff when a request or the output differs.
//! - [`cache`]: the compile cache runs only entries the host sealed: a
//!   foreign, truncated or `int3`-filled entry, or one a guest granted the
//!   home swapped, is compiled again; grants reaching the home, the cache
//!   or the host key are refused.
//! - [`exec`]: `exec run` through the binary: a granted program in its
//!   grant; not granted, changed, outside the grants, the network, the
//!   host's processes, a fork bomb, a grandchild, a gigabyte of output,
//!   `.git` hooks, a symlink to `/`, the environment: each contained.
//! - [`foreign`]: components written for other hosts (Wassette's
//!   `filesystem-rs`, the component-docs `adder` and `calculator`), built
//!   from their vendored sources: derived tools in `tool describe`,
//!   `tool call` and a scripted agent; a foreign import refused.
//! - [`interpreters`]: `tool install python` / `js` build the bundled
//!   tools; snippets print, return a value, fail with a traceback, read a
//!   granted CSV; a busy loop, a huge allocation, an ungranted file, a
//!   socket, `ctypes`: each contained, and the next call works.
//! - [`sqlite`]: `sqlite query|execute|schema` through the binary: values,
//!   parameters, caps; writes in disguise, a second statement, ATTACH,
//!   VACUUM INTO, write PRAGMAs, load_extension, a huge result, a runaway
//!   query, a read-only grant, a hostile file's views and triggers: each
//!   refused or bounded by the engine, and the next call works; the
//!   `sales-db` example answers from its file.
//! - [`messages`]: no string literal carries the source's indentation into
//!   the sentence it says (a run of spaces inside a CLI message).
//! - [`layout`]: no import cycle among the files of `cli/`, `dist/`, `hands/` and
//!   `session/`; the ground-floor crates do not depend on the host.

mod support;
mod telemetry;
mod triggers;

mod approvals;
mod author;
mod budgets;
mod cache;
mod canary;
mod checks;
mod config;
mod control;
mod crash;
mod defects;
mod delegate;
mod dist;
mod escapes;
mod example;
mod exec;
mod exit_codes;
mod fleet;
mod foreign;
mod grants;
mod heartbeat;
mod host_spend;
mod interpreters;
mod large;
mod launch;
mod layout;
mod lease;
mod limits;
mod mcp;
mod mcp_client;
mod memory;
mod messages;
mod plan;
mod postgres;
mod printed;
mod providers;
mod record;
mod roles;
mod script;
mod serve;
mod skills;
mod sqlite;
mod steer;
mod stream_timeouts;
mod takeover;
mod turns;
mod worker;
