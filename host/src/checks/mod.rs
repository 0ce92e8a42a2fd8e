//! Checks the harness runs to decide whether work is done — never the
//! worker. So far: [`command`], a native command the operator wrote, run
//! confined. (Tool and judge checks, and the plan that names them, come with
//! the long-run features.)

pub mod command;
