//! Checking a skill against its agent: the tools it uses by name, the
//! grants it needs by the one rule of
//! [`attenuation`](crate::agent::attenuation), each refusal worded
//! for the operator. A skill grants nothing: a skill that needs more than
//! its agent holds is refused at start.

use super::types::Skill;
use crate::agent::attenuation::{self, Capabilities, DirCap, Refusal, SecretCap};
use longhand_hands::{Access, GrantSpec};

/// What the agent holds, as [`check_against`] compares a skill to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentView {
    /// Tool names as the model sees them (`fs__read`, `memory__search`).
    pub tools: Vec<String>,
    /// Granted guest directories and their access.
    pub dirs: Vec<(String, Access)>,
    /// Allowed host patterns as written in agent.toml.
    pub hosts: Vec<String>,
    /// Environment variable names passed through.
    pub env: Vec<String>,
    /// Secret names: the `ENV_VAR` part of `ENV_VAR@HOST_PATTERN[:HEADER]`.
    pub secrets: Vec<String>,
}

impl AgentView {
    /// Add one tool component's grant (as `ToolConfig::grant_spec` gives
    /// it): the union over components is what the agent holds.
    pub fn add_grants(&mut self, spec: &GrantSpec) {
        self.dirs
            .extend(spec.dirs.iter().map(|d| (d.guest_path.clone(), d.access)));
        self.hosts.extend(spec.hosts.iter().cloned());
        self.env.extend(spec.env.iter().cloned());
        self.secrets.extend(spec.secrets.iter().map(|s| {
            s.split_once('@')
                .map_or(s.as_str(), |(name, _)| name)
                .to_owned()
        }));
    }
}

/// Whether `skill` needs no more than `agent` holds; otherwise one
/// sentence per thing it lacks.
///
/// Tools by name; grants by the one rule of [`attenuation::covers`]
/// (directories compared as guest paths, the only ones a skill names;
/// secrets by name).
pub fn check_against(skill: &Skill, agent: &AgentView) -> Result<(), Vec<String>> {
    let name = &skill.name;
    let mut refusals = Vec::new();
    for tool in &skill.tools {
        if !agent.tools.iter().any(|t| t == tool) {
            refusals.push(format!(
                "skill `{name}` uses tool `{tool}`, which this agent does not have: add it to \
                 the agent or drop it from the skill."
            ));
        }
    }
    let held = Capabilities {
        dirs: agent
            .dirs
            .iter()
            .map(|(guest, access)| guest_dir(guest, *access))
            .collect(),
        hosts: agent.hosts.clone(),
        env: agent.env.clone(),
        secrets: agent.secrets.iter().map(|s| secret_named(s)).collect(),
        databases: Vec::new(),
        budget: Default::default(),
    };
    let needed = Capabilities {
        dirs: skill
            .grants
            .dirs
            .iter()
            .map(|d| guest_dir(&d.guest, d.access))
            .collect(),
        hosts: skill.grants.hosts.clone(),
        env: skill.grants.env.clone(),
        secrets: skill
            .grants
            .secrets
            .iter()
            .map(|s| secret_named(s))
            .collect(),
        databases: Vec::new(),
        budget: Default::default(),
    };
    if let Err(lacking) = attenuation::covers(&held, &needed) {
        refusals.extend(lacking.into_iter().map(|r| refusal_text(name, r)));
    }
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(refusals)
    }
}

fn guest_dir(guest: &str, access: Access) -> DirCap {
    DirCap {
        path: guest.into(),
        shown: guest.to_owned(),
        access,
        symlinks: false,
    }
}

fn secret_named(name: &str) -> SecretCap {
    SecretCap {
        name: name.to_owned(),
        sent_to: None,
    }
}

/// A refusal as the operator reads it about skill `name`.
fn refusal_text(name: &str, refusal: Refusal) -> String {
    match refusal {
        Refusal::DirOutside { dir } => format!(
            "skill `{name}` needs directory {dir}, which is outside every directory granted to \
             this agent."
        ),
        Refusal::DirReadWrite { dir, granted } => format!(
            "skill `{name}` needs directory {dir} read-write, but this agent holds it read-only \
             (granted as {granted})."
        ),
        Refusal::Host { pattern } => {
            format!("skill `{name}` needs host {pattern}, which this agent may not reach.")
        }
        Refusal::Env { name: var } => format!(
            "skill `{name}` needs environment variable {var}, which this agent does not pass \
             through."
        ),
        Refusal::Secret { name: secret } => {
            format!("skill `{name}` needs secret {secret}, which this agent does not hold.")
        }
        // A skill names no symbolic links and no budget.
        other @ (Refusal::DirSymlinks { .. }
        | Refusal::Budget { .. }
        | Refusal::Database { .. }) => {
            format!("skill `{name}`: {other}.")
        }
    }
}
