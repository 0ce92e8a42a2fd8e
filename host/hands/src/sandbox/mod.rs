//! What a native process the host starts is held by: the pieces a command
//! check uses today and the `exec` tool shares.
//!
//! - [`tree`]: the process tree. Every process the command starts, however
//!   it forks, daemonizes or leaves its process group, dies with the
//!   command's run and with the harness (`kill -9` included); isolated,
//!   also in network, IPC and UTS namespaces of its own, without
//!   capabilities.
//! - [`landlock`]: the filesystem and TCP wall, by inode.
//! - [`view`]: the filesystem a confined command sees (its grants at guest
//!   paths, read-only system paths, nothing else).
//! - [`confined`]: one program run under all of them, with limits and
//!   bounded output; fails closed where the kernel cannot give a layer.
//!
//! This module owns how processes are started and held; it must not decide
//! *what* runs (argv, environment, files a command may touch): that belongs
//! to the caller (the brain's command checks, the `exec` tool).

pub mod confined;
pub mod landlock;
pub mod tree;
pub mod view;

#[cfg(all(test, target_os = "linux"))]
mod escapes;
