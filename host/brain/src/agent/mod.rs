//! What an agent is: the agent file's types ([`config`]) and their checks
//! (`check`), the [`Frozen`] agent a session records ([`frozen`]),
//! freezing an agent file into one ([`freeze`]), binding one to loaded and
//! granted tools ([`bind`](fn@bind)), skills, their front matter and
//! their host tool ([`skills`], `frontmatter`, `skill_tool`), and the one
//! attenuation rule a child, a skill or a parallel task is held to
//! ([`attenuation`]).
//!
//! This room describes and prepares an agent; it must not run one: it
//! writes no session event, calls no model and decides nothing about a
//! session's next step (that is the loop's, which imports this room, never
//! the reverse). It stands on the brain's ground floor ([`error`]), on
//! `model/` ([`ModelConfig`] is read here) and on `work/` (the plan a
//! frozen agent carries), and on nothing else of the brain.
//!
//! Inside the room an import points down, each file naming the sibling
//! that owns an item, never this door: `config` (the file's types,
//! [`ConfigError`]) at the bottom; `check` (loading and checking a file)
//! on it; `frontmatter` (a strict reader, importing nothing) and
//! `skills::types` beside it; [`frozen`] on `config` and `skills::types`;
//! [`mcp`] (an `[[mcp]]` server's grants, its pinned definitions) on
//! `config`; [`attenuation`] and [`bind`](fn@bind) (loading a frozen
//! agent's tools) on `frozen` and `mcp`; `skill_tool` on `skills::types`; the rest of
//! [`skills`] (parse, discover, check) on `frontmatter` and
//! `attenuation`; [`freeze`] on all of these (`bind`'s naming rules
//! included); this door last.
//!
//! [`ModelConfig`]: crate::model::ModelConfig
//! [`error`]: crate::error
//! [`ConfigError`]: config::ConfigError

pub mod attenuation;
pub(crate) mod bind;
mod check;
pub mod config;
pub mod cron;
pub(crate) mod freeze;
mod frontmatter;
pub mod frozen;
pub mod mcp;
mod skill_tool;
pub mod skills;
pub mod trigger;
