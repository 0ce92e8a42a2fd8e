//! `[[triggers]]` in agent.toml: what starts a session without a person
//! typing `run`, as the agent declares it. Each table is exactly one of an
//! interval (`every`), a five-field UTC cron expression (`cron`, see
//! [`super::cron`]) or a signed webhook (`webhook = true`). Checked when
//! the agent is read; run by the application's scheduler and `serve`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::cron::Cron;

/// One `[[triggers]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerConfig {
    /// Unique within the agent: letters, digits, `-` and `_`. A webhook's
    /// path is `/hooks/<name>`.
    pub name: String,
    /// A fixed interval, e.g. `"15m"`, `"1h"`.
    #[serde(default)]
    pub every: Option<String>,
    /// A cron expression, UTC.
    #[serde(default)]
    pub cron: Option<String>,
    /// Fired by a signed `POST /hooks/<name>`.
    #[serde(default)]
    pub webhook: bool,
    /// The host environment variable holding a webhook's HMAC secret
    /// (required with `webhook`; read by the server at start).
    #[serde(default)]
    pub secret_env: Option<String>,
    /// The goal of each firing's session; default the agent's `goal`.
    #[serde(default)]
    pub goal: Option<String>,
    /// Timers only: what a scheduler that was down does about firing
    /// times it missed. Default `skip`.
    #[serde(default)]
    pub missed: Missed,
}

/// What to do about timer firings the scheduler was not running for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Missed {
    /// Drop them; fire at the next time.
    #[default]
    Skip,
    /// Fire once, at start, for all of them.
    Once,
}

/// When a trigger fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    /// Every this many milliseconds, counted from when it last fired.
    Every(u64),
    /// At the minutes a cron expression names.
    Cron(Box<Cron>),
    /// On a signed request.
    Webhook {
        /// The variable holding the secret.
        secret_env: String,
    },
}

impl TriggerConfig {
    /// What fires it, or why the table is wrong.
    pub fn when(&self) -> Result<When, String> {
        let what = format!("[[triggers]] `{}`", self.name);
        match (&self.every, &self.cron, self.webhook) {
            (Some(every), None, false) => {
                let d = humantime::parse_duration(every).map_err(|e| {
                    format!("{what}: every = \"{every}\" is not a duration ({e}); e.g. \"15m\"")
                })?;
                if d < Duration::from_secs(1) {
                    return Err(format!("{what}: every = \"{every}\" is under one second"));
                }
                Ok(When::Every(
                    u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
                ))
            }
            (None, Some(expr), false) => Ok(When::Cron(Box::new(
                Cron::parse(expr).map_err(|e| format!("{what}: {e}"))?,
            ))),
            (None, None, true) => match &self.secret_env {
                Some(var) if !var.trim().is_empty() => Ok(When::Webhook {
                    secret_env: var.clone(),
                }),
                _ => Err(format!(
                    "{what}: a webhook needs `secret_env`, the host variable holding its HMAC secret"
                )),
            },
            _ => Err(format!(
                "{what}: give exactly one of `every`, `cron` or `webhook = true`"
            )),
        }
    }
}

/// Check an agent's `[[triggers]]`: names, schedules, secrets named.
pub fn check_all(triggers: &[TriggerConfig]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for t in triggers {
        if t.name.is_empty()
            || t.name.len() > 64
            || !t
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
        {
            return Err(format!(
                "[[triggers]] name `{}`: 1-64 letters, digits, `_` and `-`",
                t.name
            ));
        }
        if !seen.insert(&t.name) {
            return Err(format!("[[triggers]] `{}` is named twice", t.name));
        }
        let when = t.when()?;
        if matches!(when, When::Webhook { .. }) && t.missed != Missed::Skip {
            return Err(format!(
                "[[triggers]] `{}`: `missed` is for timers; a webhook fires when called",
                t.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_trigger_tables_are_refused_with_the_reason() {
        let base = TriggerConfig {
            name: "t".into(),
            every: None,
            cron: None,
            webhook: false,
            secret_env: None,
            goal: None,
            missed: Missed::Skip,
        };
        let with = |f: &dyn Fn(&mut TriggerConfig)| {
            let mut t = base.clone();
            f(&mut t);
            check_all(&[t]).unwrap_err()
        };
        assert!(with(&|_| {}).contains("exactly one of"));
        assert!(
            with(&|t| {
                t.every = Some("1h".into());
                t.cron = Some("* * * * *".into());
            })
            .contains("exactly one of")
        );
        assert!(with(&|t| t.every = Some("soon".into())).contains("not a duration"));
        assert!(with(&|t| t.every = Some("10ms".into())).contains("under one second"));
        assert!(with(&|t| t.cron = Some("0 25 * * *".into())).contains("hour field"));
        assert!(with(&|t| t.webhook = true).contains("secret_env"));
        assert!(
            with(&|t| {
                t.webhook = true;
                t.secret_env = Some("S".into());
                t.missed = Missed::Once;
            })
            .contains("for timers")
        );
        assert!(
            with(&|t| {
                t.name = "../x".into();
                t.every = Some("1h".into());
            })
            .contains("letters, digits")
        );
        let ok = TriggerConfig {
            every: Some("1h".into()),
            ..base.clone()
        };
        assert!(
            check_all(&[ok.clone(), ok.clone()])
                .unwrap_err()
                .contains("named twice")
        );
        check_all(&[ok]).unwrap();
    }
}
