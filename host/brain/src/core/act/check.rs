//! Harness checks of a task: a `tool` check (a sandboxed call whose output
//! a jq predicate judges) or a `command` check (a native command named in
//! `[checks]`, confined), each recorded as `check_finished`. The judge's
//! checks are `act::judge`'s.

use crate::checks::resolve::{GrantedDir, resolve};
use crate::core::ctx::Ctx;
use crate::error::{RunError, inconsistent};
use crate::work::plan::Check;
use longhand_session::Event;

/// Bytes of a command's output kept in a check's detail (its tail: the
/// end of a test run says what failed).
const DETAIL_TAIL: usize = 2048;

impl Ctx<'_> {
    /// Run harness check `index` of `task_id` and record its result.
    pub(crate) async fn run_check(&mut self, task_id: String, index: u32) -> Result<(), RunError> {
        let check = self
            .journal
            .state
            .plan
            .as_ref()
            .and_then(|p| p.plan.task(&task_id))
            .and_then(|t| t.done_when.get(index as usize))
            .cloned()
            .ok_or_else(|| inconsistent(&format!("task {task_id} has no check {index}")))?;
        let event = match &check {
            Check::Command { name } => self.command_check(&task_id, index, name).await,
            Check::Tool {
                tool,
                input,
                expect,
            } => {
                self.tool_check(&task_id, index, tool, input, expect)
                    .await?
            }
            Check::Judge { .. } => {
                return Err(inconsistent("a judge check is not a harness check"));
            }
        };
        self.write(vec![event]).await
    }

    pub(crate) async fn command_check(&mut self, task: &str, index: u32, name: &str) -> Event {
        let finished = |passed: bool, detail: String, output, confinement| Event::CheckFinished {
            task: task.to_owned(),
            check: index,
            kind: "command".to_owned(),
            passed,
            detail,
            output,
            confinement,
        };
        let Some(config) = self.agent.frozen.checks.get(name).cloned() else {
            return finished(
                false,
                format!("the command check `{name}` is not defined in agent.toml"),
                None,
                None,
            );
        };
        let dirs = self.granted_dirs();
        let resolved = match resolve(name, &config, &dirs, |v| std::env::var(v).ok()) {
            Ok(resolved) => resolved,
            Err(error) => return finished(false, error.to_string(), None, None),
        };
        // One marker per check of this session, the same on every run: a
        // run after a crash first kills what the dead run left behind.
        let marker = format!("{}/{task}/{index}", self.session);
        match crate::checks::command::run_as(&resolved.spec, &marker).await {
            Err(error) => finished(false, format!("it could not run: {error}"), None, None),
            Ok(mut outcome) => {
                // The model knows the directories by their guest paths;
                // the host's layout is none of its business.
                outcome.stdout = to_guest_paths(&outcome.stdout, &dirs);
                outcome.stderr = to_guest_paths(&outcome.stderr, &dirs);
                let mut detail = match (outcome.timed_out, outcome.code) {
                    (true, _) => format!("timed out after {} ms", outcome.wall_ms),
                    (false, Some(code)) => format!("exit code {code}"),
                    (false, None) => "killed by a signal".to_owned(),
                };
                if !outcome.passed {
                    let tail = tail(
                        &format!("{}\n{}", outcome.stdout, outcome.stderr),
                        DETAIL_TAIL,
                    );
                    detail.push_str(&format!("; the end of its output:\n{tail}"));
                }
                let output = serde_json::json!({
                    "code": outcome.code,
                    "timed_out": outcome.timed_out,
                    "wall_ms": outcome.wall_ms,
                    "stdout": outcome.stdout,
                    "stderr": outcome.stderr,
                    "dropped_bytes": outcome.dropped_bytes,
                    "notes": resolved.notes,
                });
                let output = self.put(output.to_string().into_bytes());
                let confinement = serde_json::to_value(&outcome.confinement).ok();
                finished(outcome.passed, detail, Some(output), confinement)
            }
        }
    }

    pub(crate) async fn tool_check(
        &mut self,
        task: &str,
        index: u32,
        tool: &str,
        input: &serde_json::Value,
        expect: &str,
    ) -> Result<Event, RunError> {
        let crate::tools::Outcome { ok, result, .. } = self.execute(tool, input).await;
        let output = self.put(result.clone());
        let (passed, detail) = if !ok {
            (
                false,
                format!("the tool call failed: {}", String::from_utf8_lossy(&result)),
            )
        } else {
            match serde_json::from_slice::<serde_json::Value>(&result) {
                Err(e) => (false, format!("the tool's output is not JSON: {e}")),
                Ok(value) => {
                    match crate::checks::tool::predicate_holds(self.hands, expect, &value).await {
                        Ok(verdict) => (verdict.holds, verdict.detail),
                        Err(error) => (false, error.to_string()),
                    }
                }
            }
        };
        Ok(Event::CheckFinished {
            task: task.to_owned(),
            check: index,
            kind: "tool".to_owned(),
            passed,
            detail,
            output: Some(output),
            confinement: None,
        })
    }

    /// The agent's granted directories, as command checks see them.
    pub(crate) fn granted_dirs(&self) -> Vec<GrantedDir> {
        crate::agent::freeze::granted_dirs(
            self.agent
                .components
                .iter()
                .flat_map(|c| c.grants.dirs.iter()),
        )
    }
}

/// `text` with every granted directory's host path replaced by its guest
/// path (longest first, so a nested grant wins).
fn to_guest_paths(text: &str, dirs: &[GrantedDir]) -> String {
    let mut dirs: Vec<&GrantedDir> = dirs.iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.host.as_os_str().len()));
    let mut out = text.to_owned();
    for dir in dirs {
        let host = dir.host.to_string_lossy();
        if !host.is_empty() && host != "/" {
            out = out.replace(host.as_ref(), &dir.guest);
        }
    }
    out
}

/// The last `max` bytes of `text`, on a character boundary.
fn tail(text: &str, max: usize) -> String {
    let text = text.trim_end();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_output_names_guest_paths_not_host_ones() {
        let dirs = [
            GrantedDir {
                host: "/srv/agent/out/run-1".into(),
                guest: "/out".into(),
                writable: true,
            },
            GrantedDir {
                host: "/srv/agent/out/run-1/crate".into(),
                guest: "/crate".into(),
                writable: false,
            },
        ];
        let text = "error at /srv/agent/out/run-1/crate/src/lib.rs:3\n\
                    wrote /srv/agent/out/run-1/target/x";
        assert_eq!(
            to_guest_paths(text, &dirs),
            "error at /crate/src/lib.rs:3\nwrote /out/target/x"
        );
    }

    #[test]
    fn a_tail_is_cut_on_a_character_boundary() {
        let text = format!("{}é end", "x".repeat(10));
        let cut = tail(&text, 5);
        assert!(cut.starts_with('…'));
        assert!(cut.ends_with(" end"));
        assert_eq!(tail("short", 100), "short");
    }
}
