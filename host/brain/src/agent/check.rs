//! Checking an agent file: loading `agent.toml` and refusing what cannot
//! run, naming the field and the fix ([`ConfigError`]). The model's own
//! rules (providers, reasoning, base URLs) are [`ModelConfig::check`](crate::model::ModelConfig::check)'s, in
//! `model/`; the plan file's are `work::plan`'s; this module puts them together
//! with the agent's.
//!
//! It reads files (the agent file, instructions, a plan file) but builds
//! nothing and starts nothing: freezing is `freeze`'s.

use std::path::{Path, PathBuf};

use super::config::{
    AGENT_FILE, AgentConfig, ConfigError, MAX_PARALLEL_TASKS, PlanConfig, PlannerMode,
    RUN_PLACEHOLDER,
};

impl PlanConfig {
    pub(super) fn check(&self) -> Result<(), String> {
        if !(1..=MAX_PARALLEL_TASKS).contains(&self.max_parallel_tasks) {
            return Err(format!(
                "[plan] max_parallel_tasks = {}: give 1 to {MAX_PARALLEL_TASKS}",
                self.max_parallel_tasks
            ));
        }
        if self.max_attempts == 0 {
            return Err("[plan] max_attempts must be at least 1".to_owned());
        }
        if self.steps_per_attempt == 0 {
            return Err("[plan] steps_per_attempt must be at least 1".to_owned());
        }
        if !(self.handoff_at > 0.05 && self.handoff_at <= 0.95) {
            return Err(format!(
                "[plan] handoff_at = {}: give a fraction of the window between 0.05 and 0.95",
                self.handoff_at
            ));
        }
        if self.file.is_none() && self.planner_mode() != PlannerMode::Create {
            return Err(
                "[plan] has no `file`, so the planner must write the plan: set planner = \
                 \"create\" or name a plan file"
                    .to_owned(),
            );
        }
        Ok(())
    }
}

impl AgentConfig {
    /// Read `agent.toml` (or `<dir>/agent.toml`). Returns the config and the
    /// directory its relative paths are resolved against.
    pub fn load(path: &Path) -> Result<(Self, PathBuf), ConfigError> {
        let file = if path.is_dir() {
            path.join(AGENT_FILE)
        } else {
            path.to_owned()
        };
        // The message can quote the file (a TOML error shows the line it
        // failed on; a check names a component): cut, as the file may be
        // any size.
        let err = |message: String| ConfigError {
            path: file.clone(),
            message: longhand_hands::bound::cut(message, longhand_hands::bound::MAX_REASON_BYTES),
        };
        let text = std::fs::read_to_string(&file).map_err(|e| err(format!("cannot read: {e}")))?;
        let config: Self = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        let base = file
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        config.check(&base).map_err(err)?;
        Ok((config, base))
    }

    pub(super) fn check(&self, base: &Path) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("`name` is empty".to_owned());
        }
        match (&self.instructions, &self.instructions_file) {
            (Some(_), Some(_)) => {
                return Err("set `instructions` or `instructions_file`, not both".to_owned());
            }
            (None, None) => {
                return Err("set `instructions` (inline) or `instructions_file`".to_owned());
            }
            _ => {}
        }
        self.model.check()?;
        super::trigger::check_all(&self.triggers)?;
        for (role, model) in [
            ("planner", &self.roles.planner),
            ("judge", &self.roles.judge),
        ] {
            if let Some(model) = model {
                model.check().map_err(|e| format!("[roles.{role}]: {e}"))?;
            }
        }
        if let Some(plan) = &self.plan {
            plan.check()?;
            if let Some(file) = &plan.file {
                crate::work::plan::load_file(&base.join(file))?;
            }
        }
        for name in self.checks.keys() {
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
            {
                return Err(format!(
                    "[checks.{name}]: a check name is letters, digits, `_` and `-`"
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, tool) in self.tools.iter().enumerate() {
            // `{run}` directories are created when the session starts.
            let mut tool = tool.clone();
            tool.dirs
                .retain(|d| !d.host_text().contains(RUN_PLACEHOLDER));
            // Programs and toolchains are found with the PATH and HOME of
            // the session's start; here only their form is checked.
            for program in std::mem::take(&mut tool.programs) {
                longhand_hands::programs::check_name(&program)
                    .map_err(|e| format!("tools[{i}] ({}): {e}", tool.component))?;
            }
            tool.toolchains.clear();
            // Databases: their URLs are read when the session starts.
            for database in std::mem::take(&mut tool.databases) {
                longhand_hands::sql::DatabaseGrant::parse_form(&database)
                    .map_err(|e| format!("tools[{i}] ({}): {e}", tool.component))?;
            }
            tool.grants(base, |name| Some(format!("<value of {name}>")))
                .map_err(|e| format!("tools[{i}] ({}): {e}", tool.component))?;
            if !seen.insert(tool.component.clone()) {
                return Err(format!(
                    "tools[{i}]: component `{}` is listed twice",
                    tool.component
                ));
            }
        }
        let prefixes: std::collections::BTreeSet<String> = self
            .tools
            .iter()
            .map(|t| super::bind::prefix_of(&t.component))
            .chain(["memory", "skill", "delegate"].map(String::from))
            .collect();
        let mut servers = std::collections::BTreeSet::new();
        for server in &self.mcp {
            server.check()?;
            if prefixes.contains(&server.name) || !servers.insert(server.name.clone()) {
                return Err(format!(
                    "[[mcp]] `{}`: the name is already taken by a tool, a host tool or another \
                     server; give each a name of its own",
                    server.name
                ));
            }
            for program in &server.programs {
                longhand_hands::programs::check_name(program)
                    .map_err(|e| format!("[[mcp]] `{}`: {e}", server.name))?;
            }
        }
        Ok(())
    }

    /// The instructions text.
    pub fn instructions_text(&self, base: &Path) -> Result<String, String> {
        match (&self.instructions, &self.instructions_file) {
            (Some(text), _) => Ok(text.clone()),
            (None, Some(file)) => std::fs::read_to_string(base.join(file))
                .map_err(|e| format!("instructions_file {}: {e}", file.display())),
            (None, None) => Err("no instructions".to_owned()),
        }
    }
}
