//! The loop core: the fold ([`state`]), the decision ([`decide`]), the
//! journal that alone writes the log and folds what it writes
//! ([`journal`]), the runner that asks `decide` and calls one executor per
//! action (`runner`), what the executors see (`ctx`: the context, and the
//! `Launch` door children start through), the executors of each action
//! family (`act`) and the model's prompts ([`prompts`]).
//!
//! `state` imports no executor and `decide` imports only the state and the
//! limit types; the executors are driven by the runner alone and import
//! `ctx`, never the runner.

pub(crate) mod act;
pub(crate) mod ask_cache;
pub(crate) mod ctx;
pub mod decide;
pub mod journal;
pub mod prompts;
pub(crate) mod runner;
pub mod state;
