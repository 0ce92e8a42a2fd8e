//! What a native process the host starts is held by: the pieces a command
//! check uses today and an `exec` tool will share.
//!
//! - [`tree`]: the process tree. Every process the command starts, however
//!   it forks, daemonizes or leaves its process group, dies with the
//!   command's run and with the harness (`kill -9` included).
//!
//! This module owns how processes are started and held; it must not decide
//! *what* runs (argv, environment, files a command may touch): that belongs
//! to the caller (the brain's command checks).

pub mod tree;
