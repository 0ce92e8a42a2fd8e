//! Skills: instructions an agent loads on demand, one directory each in the
//! agent's skills dir.
//!
//! A skill is `<skills dir>/<name>/SKILL.md`: front matter between `---`
//! lines (`name`, `description`, optional `tools` and `grants`), then the
//! Markdown instructions. The model sees only the names and descriptions
//! ([`catalogue`]) and loads a skill's instructions with the host tool
//! `skill__load` ([`load_tool_def`], [`load`]).
//!
//! This room owns discovery, parsing, the check of a skill against its
//! agent (tools by name, grants by the one rule of
//! [`attenuation`](super::attenuation)) and the tool's answer. It does not
//! touch the loop, the log or the agent file:
//! the loop discovers and checks the skills when it freezes the agent
//! ([`discover`], [`check_against`]) and keeps the [`Skill`] values,
//! instructions included, in the session's first event — a session keeps
//! the skills it started with whatever the directory holds later.
//!
//! A skill grants nothing. Its `tools` and `grants` say what it needs, and
//! [`check_against`] refuses a skill that needs more than the agent holds:
//! instructions written for a wider agent would only fail mid-task, so the
//! mismatch is a configuration error at start.
//!
//! Its files, each on the ones before it (this door only re-exports):
//! `types` (what a skill is, its limits, [`SkillError`]); `parse` (a
//! `SKILL.md`'s text, by the strict front-matter reader of
//! `agent::frontmatter`); `discover` (the skills dir on disk); `check`
//! (a skill against its agent, on `agent::attenuation`). The catalogue and
//! the `skill__load` tool are `agent::skill_tool`'s, on `types`.

mod check;
mod discover;
mod parse;
pub(super) mod types;

pub use super::skill_tool::{catalogue, load, load_tool_def};
pub use check::{AgentView, check_against};
pub use discover::discover;
pub use parse::parse;
pub use types::{
    COMPONENT, HOST_DIGEST, LOAD, MAX_CATALOGUE, MAX_DESCRIPTION, MAX_FRONT_MATTER,
    MAX_INSTRUCTIONS, MAX_LIST, MAX_NAME, MAX_SKILLS, MAX_TOTAL_INSTRUCTIONS, SKILL_FILE, Skill,
    SkillDir, SkillError, SkillGrants,
};

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use std::path::Path;

    use super::*;
    use crate::model::types::valid_tool_name;
    use longhand_hands::{Access, DirSpec, GrantSpec};

    const GOOD: &str = r#"---
name: csv-report
# A comment line.
description: Summarise a CSV file of the data directory into a Markdown
  report in the output directory.
tools: [fs__read, fs__write]
grants:
  dirs:
    - /data:ro
    - /out/reports:rw
  hosts: ["*.example.com", api.other.org:8443]
  env: [LANG]
  secrets:
    - API_TOKEN
---

# CSV report

1. Read the file with fs__read.
"#;

    fn parsed(text: &str) -> Result<Skill, SkillError> {
        parse(Path::new("skills/x/SKILL.md"), text)
    }

    /// The line and message of a parse error.
    fn parse_error(text: &str) -> (usize, String) {
        match parsed(text) {
            Err(SkillError::Parse { line, message, .. }) => (line, message),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    fn with_front(front: &str) -> String {
        format!("---\n{front}\n---\nDo the thing.\n")
    }

    #[test]
    fn a_good_skill_parses() {
        let skill = parsed(GOOD).unwrap();
        assert_eq!(skill.name, "csv-report");
        assert_eq!(
            skill.description,
            "Summarise a CSV file of the data directory into a Markdown report in the output \
             directory."
        );
        assert_eq!(skill.tools, ["fs__read", "fs__write"]);
        assert_eq!(
            skill.grants.dirs,
            [
                SkillDir {
                    guest: "/data".into(),
                    access: Access::ReadOnly
                },
                SkillDir {
                    guest: "/out/reports".into(),
                    access: Access::ReadWrite
                }
            ]
        );
        assert_eq!(skill.grants.hosts, ["*.example.com", "api.other.org:8443"]);
        assert_eq!(skill.grants.env, ["LANG"]);
        assert_eq!(skill.grants.secrets, ["API_TOKEN"]);
        assert_eq!(
            skill.instructions,
            "# CSV report\n\n1. Read the file with fs__read."
        );
        // The frozen form round-trips.
        let json = serde_json::to_value(&skill).unwrap();
        assert_eq!(serde_json::from_value::<Skill>(json).unwrap(), skill);
    }

    #[test]
    fn quoting_crlf_and_minimal_front_matter() {
        let skill = parsed(
            "\u{feff}---\r\nname: 'it-s'\r\ndescription: \"Say \\\"hi\\\": it's fine\"\r\n---\r\nBody\r\n",
        )
        .unwrap();
        assert_eq!(skill.name, "it-s");
        assert_eq!(skill.description, "Say \"hi\": it's fine");
        assert!(skill.tools.is_empty() && skill.grants.is_empty());
        assert_eq!(skill.instructions, "Body");
        let json = serde_json::to_value(&skill).unwrap();
        assert!(json.get("grants").is_none() && json.get("tools").is_none());
    }

    #[test]
    fn front_matter_errors_name_the_line_and_the_fix() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "name: a\ndescription: d\ncolour: red",
                4,
                "unknown key `colour`",
            ),
            (
                "name: a\nname: b\ndescription: d",
                3,
                "appears twice (also line 2)",
            ),
            ("name: Big_Name\ndescription: d", 2, "a-z, 0-9"),
            (
                &format!("name: {}\ndescription: d", "a".repeat(65)),
                2,
                "1 to 64",
            ),
            ("description: d", 1, "no `name`"),
            ("name: a", 1, "no `description`"),
            (
                &format!("name: a\ndescription: {}", "x".repeat(1025)),
                3,
                "more than 1024",
            ),
            ("name: a\ndescription:\n  - x", 3, "one paragraph"),
            ("name: a\ndescription: d\ntools: fs__read", 4, "is a list"),
            (
                "name: a\ndescription: d\ntools: [fs.read]",
                4,
                "not a tool name",
            ),
            ("name: a\ndescription: d\ntools: [a, a]", 4, "listed twice"),
            ("name: a\ndescription: d\ntools: [a, ]", 4, "empty item"),
            ("name: a\ndescription: d\ntools: [a", 4, "ends with `]`"),
            (
                "name: a\ndescription: d\ngrants:\n  files: [/x]",
                5,
                "unknown grant `files`",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  dirs: [../x]",
                5,
                "not a guest directory",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  dirs:\n    - /x/\n",
                6,
                "trailing `/`",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  hosts: [*.x.com]",
                5,
                "quote this value",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  hosts: [\"http://x.com\"]",
                5,
                "not a URL",
            ),
            (
                "name: a\ndescription: d\ngrants:\n  env: [1X]",
                5,
                "not a variable name",
            ),
            (
                "name: a\ndescription: d\ngrants: all",
                4,
                "indented `dirs:`",
            ),
            ("name: a\n\tdescription: d", 3, "not tabs"),
            ("name: a\n  description: d", 3, "unexpected indentation"),
            ("name: a\ndescription: d: e", 3, "quote this value"),
            ("name: a\ndescription: &anchor d", 3, "quote this value"),
            ("name: a\ndescription: \"open", 3, "must end with"),
            ("name: a\ndescription: d\ntools:", 4, "has no value"),
            (
                "name: a\ndescription: d\nnot a key",
                4,
                "expected `key: value`",
            ),
            (
                "name: a\ndescription: d\ntools: [a]\n  - b",
                5,
                "belongs to nothing",
            ),
        ];
        for (front, line, needle) in cases {
            let (got_line, message) = parse_error(&with_front(front));
            assert!(
                message.contains(needle),
                "{front:?}: `{message}` lacks `{needle}`"
            );
            assert_eq!(got_line, *line, "{front:?}: {message}");
        }
    }

    #[test]
    fn inline_lists_split_as_yaml_does() {
        let skill = needing(
            "grants:\n  env: [A, 'B']\n  dirs: [\"/a,b:rw\", '/it''s', \"/q\\\"x\", /its'x, /y]",
        );
        assert_eq!(skill.grants.env, ["A", "B"]);
        let dirs: Vec<&str> = skill.grants.dirs.iter().map(|d| d.guest.as_str()).collect();
        assert_eq!(dirs, ["/a,b", "/it's", "/q\"x", "/its'x", "/y"]);
        assert_eq!(skill.grants.dirs[0].access, Access::ReadWrite);
    }

    #[test]
    fn the_frame_and_the_body_are_checked() {
        assert!(
            parse_error("name: a\n---\nx")
                .1
                .contains("begins with a `---`")
        );
        assert!(
            parse_error("---\nname: a\ndescription: d\n")
                .1
                .contains("not closed")
        );
        let (line, message) = parse_error("---\nname: a\ndescription: d\n---\n\n  \n");
        assert_eq!(line, 4);
        assert!(message.contains("no instructions"), "{message}");
        let big = format!(
            "---\nname: a\ndescription: d\n---\n{}",
            "x".repeat(MAX_INSTRUCTIONS + 1)
        );
        assert!(parse_error(&big).1.contains("more than 65536"));
        let at_limit = format!(
            "---\nname: a\ndescription: d\n---\n{}",
            "x".repeat(MAX_INSTRUCTIONS)
        );
        assert!(parsed(&at_limit).is_ok());
    }

    fn write_skill(root: &Path, dir: &str, text: &str) {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::write(root.join(dir).join(SKILL_FILE), text).unwrap();
    }

    fn skill_text(name: &str, body: &str) -> String {
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\n{body}\n")
    }

    #[test]
    fn discover_reads_every_skill_dir_sorted() {
        let root = tempfile::tempdir().unwrap();
        write_skill(root.path(), "zeta", &skill_text("zeta", "Z."));
        write_skill(root.path(), "alpha", &skill_text("alpha", "A."));
        std::fs::write(root.path().join("README.md"), "not a skill").unwrap();
        std::fs::create_dir(root.path().join(".git")).unwrap();
        let skills = discover(root.path()).unwrap();
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta"]);
        assert!(discover(&root.path().join("absent")).unwrap().is_empty());
    }

    #[test]
    fn the_fixture_skills_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/skills");
        let skills = discover(&dir).unwrap();
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["csv-report", "plain-notes"]);
        assert_eq!(skills[0].grants.dirs.len(), 2);
        assert!(skills[1].tools.is_empty() && skills[1].grants.is_empty());
    }

    #[test]
    fn discover_refuses_bad_directories() {
        let root = tempfile::tempdir().unwrap();
        write_skill(root.path(), "alpha", &skill_text("beta", "B."));
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(
            e.contains("named `beta` but its directory is `alpha`"),
            "{e}"
        );

        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("empty")).unwrap();
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(e.contains("no SKILL.md"), "{e}");

        let root = tempfile::tempdir().unwrap();
        write_skill(root.path(), "bad", "---\nname: bad\n---\nx\n");
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(e.contains("bad/SKILL.md:1: no `description`"), "{e}");

        // Five skills of 60 KiB each: more than a session keeps.
        let root = tempfile::tempdir().unwrap();
        for i in 0..5 {
            let name = format!("s{i}");
            write_skill(
                root.path(),
                &name,
                &skill_text(&name, &"x".repeat(60 * 1024)),
            );
        }
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(e.contains("more than the 262144"), "{e}");

        let root = tempfile::tempdir().unwrap();
        for i in 0..=MAX_SKILLS {
            std::fs::create_dir(root.path().join(format!("s{i}"))).unwrap();
        }
        let e = discover(root.path()).unwrap_err().to_string();
        assert!(e.contains("more than 64 skill directories"), "{e}");
    }

    fn agent() -> AgentView {
        let mut view = AgentView {
            tools: vec!["fs__read".into(), "fs__write".into()],
            ..AgentView::default()
        };
        view.add_grants(&GrantSpec {
            digest: None,
            dirs: vec![
                DirSpec::parse("data:/data:ro", Path::new("/base")).unwrap(),
                DirSpec::parse("out:/out:rw", Path::new("/base")).unwrap(),
            ],
            hosts: vec!["*.example.com".into(), "api.other.org:8443".into()],
            env: vec!["LANG".into()],
            secrets: vec!["API_TOKEN@api.other.org:8443".into()],
            ..GrantSpec::default()
        });
        view
    }

    fn needing(front: &str) -> Skill {
        parsed(&with_front(&format!("name: s\ndescription: d\n{front}"))).unwrap()
    }

    #[test]
    fn a_skill_within_the_agent_is_accepted() {
        let skill = parsed(GOOD).unwrap();
        assert_eq!(check_against(&skill, &agent()), Ok(()));
        // Narrower than the grants: a sub-directory, ro under rw, a host
        // under the wildcard.
        let narrower = needing(
            "grants:\n  dirs: [/data/2024, /out/x:ro, /out/y:rw]\n  hosts: [a.b.example.com]",
        );
        assert_eq!(check_against(&narrower, &agent()), Ok(()));
    }

    #[test]
    fn a_skill_asking_for_more_is_refused_one_sentence_each() {
        let cases = [
            (
                "tools: [shell__run]",
                "uses tool `shell__run`, which this agent does not have",
            ),
            (
                "grants:\n  dirs: [/]",
                "directory /, which is outside every directory",
            ),
            ("grants:\n  dirs: [/etc]", "outside every directory"),
            ("grants:\n  dirs: [/database]", "outside every directory"),
            (
                "grants:\n  dirs: [/data/x:rw]",
                "/data/x read-write, but this agent holds it read-only",
            ),
            (
                "grants:\n  hosts: [other.com]",
                "host other.com, which this agent may not reach",
            ),
            ("grants:\n  hosts: [\"*\"]", "host *,"),
            ("grants:\n  hosts: [example.com]", "host example.com,"),
            ("grants:\n  hosts: [\"*.com\"]", "host *.com,"),
            ("grants:\n  hosts: [api.other.org]", "host api.other.org,"),
            (
                "grants:\n  hosts: [a.example.com:22]",
                "host a.example.com:22,",
            ),
            ("grants:\n  hosts: [\"10.0.0.1:443\"]", "host 10.0.0.1:443,"),
            ("grants:\n  env: [HOME]", "environment variable HOME"),
            (
                "grants:\n  secrets: [OTHER_TOKEN]",
                "secret OTHER_TOKEN, which this agent does not hold",
            ),
        ];
        for (front, needle) in cases {
            let refusals = check_against(&needing(front), &agent()).unwrap_err();
            assert_eq!(refusals.len(), 1, "{front}: {refusals:?}");
            assert!(refusals[0].contains(needle), "{front}: {refusals:?}");
        }
        let all = needing(
            "tools: [x__y]\ngrants:\n  dirs: [/etc:rw]\n  hosts: [x.org]\n  env: [A]\n  secrets: [B]",
        );
        assert_eq!(check_against(&all, &agent()).unwrap_err().len(), 5);
    }

    #[test]
    fn literal_addresses_need_a_literal_grant() {
        let view = AgentView {
            hosts: vec!["*".into(), "127.0.0.1:9000".into(), "[::1]:9000".into()],
            ..AgentView::default()
        };
        let ok = needing("grants:\n  hosts: [\"127.0.0.1:9000\", \"[::1]:9000\", \"*.any.org\"]");
        assert_eq!(check_against(&ok, &view), Ok(()));
        let loopback = needing("grants:\n  hosts: [\"127.0.0.1:9001\", localhost]");
        assert_eq!(check_against(&loopback, &view).unwrap_err().len(), 2);
    }

    fn many(count: usize, description: &str) -> Vec<Skill> {
        (0..count)
            .map(|i| Skill {
                name: format!("skill-{i:02}"),
                description: description.to_owned(),
                tools: Vec::new(),
                grants: SkillGrants::default(),
                instructions: "x".into(),
            })
            .collect()
    }

    #[test]
    fn the_catalogue_is_bounded() {
        assert_eq!(catalogue(&[]), "");
        let few = many(2, "Does a thing.");
        let text = catalogue(&few);
        assert!(text.contains("- skill-00: Does a thing.\n- skill-01: Does a thing.\n"));
        assert!(!text.contains("Also"));

        let long = "d".repeat(MAX_DESCRIPTION);
        let text = catalogue(&many(MAX_SKILLS, &long));
        assert!(text.len() <= MAX_CATALOGUE, "{}", text.len());
        assert!(text.contains("- skill-00: ddd"));
        assert!(text.contains("Also (load to read what they do): skill-07"));
        assert!(text.contains("skill-63"), "every name fits: {text}");

        // Names that do not fit are counted.
        let mut long_names = many(200, "d");
        for (i, s) in long_names.iter_mut().enumerate() {
            s.name = format!("{i:03}-{}", "n".repeat(60));
        }
        let text = catalogue(&long_names);
        assert!(text.len() <= MAX_CATALOGUE, "{}", text.len());
        assert!(text.trim_end().ends_with("more"), "{text}");
    }

    #[test]
    fn the_tool_lists_the_names() {
        let def = load_tool_def(&many(2, "d"));
        assert_eq!(def.name, LOAD);
        assert!(valid_tool_name(&def.name));
        assert_eq!(
            def.input_schema["properties"]["name"]["enum"],
            json!(["skill-00", "skill-01"])
        );
    }

    #[test]
    fn load_answers_known_unknown_and_hostile_input() {
        let skills = vec![parsed(GOOD).unwrap()];
        let ok = load(&skills, &json!({"name": "csv-report"})).unwrap();
        assert_eq!(ok["name"], "csv-report");
        assert_eq!(ok["tools"], json!(["fs__read", "fs__write"]));
        assert!(
            ok["instructions"]
                .as_str()
                .unwrap()
                .starts_with("# CSV report")
        );

        let kind = |v: Value| {
            let e = load(&skills, &v).unwrap_err();
            let message = e["error"]["message"].as_str().unwrap().to_owned();
            assert!(message.len() < 400, "{message}");
            (e["error"]["kind"].as_str().unwrap().to_owned(), message)
        };
        let (k, m) = kind(json!({"name": "nope"}));
        assert_eq!(k, "not-found");
        assert!(m.contains("`nope`") && m.contains("csv-report"), "{m}");
        let huge = "x".repeat(1 << 20);
        let (k, m) = kind(json!({ "name": huge }));
        assert_eq!(k, "not-found");
        assert!(m.contains('…'), "{m}");
        let (k, m) = kind(json!({ "name": "csv-report", huge.clone(): 1 }));
        assert_eq!(k, "invalid-input");
        assert!(m.contains("unknown field"), "{m}");
        for bad in [
            json!(null),
            json!("csv-report"),
            json!([1]),
            json!({}),
            json!({"name": 7}),
        ] {
            assert_eq!(kind(bad).0, "invalid-input");
        }
        // A multi-byte name is cut at a char boundary.
        let (_, m) = kind(json!({"name": "é".repeat(100)}));
        assert!(m.contains('…'));
    }
}
