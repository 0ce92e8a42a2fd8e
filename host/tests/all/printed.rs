//! Printed size: nothing someone else chose makes the CLI print without
//! bound. A component or tool name of any length is cut in the error that
//! names it; output that indentation would blow up (deeply nested arrays)
//! is printed compact past a bounded factor of its compact size.

use serde_json::Value;

use crate::support::{Home, write};

/// Longest error line these tests accept: far below what was given, far
/// above any honest message.
const ERROR_BOUND: usize = 16 << 10;

#[test]
fn long_component_and_tool_names_are_cut_in_errors() {
    let home = Home::new();
    // argv takes at most 128 KiB per argument.
    let name = "c".repeat(120_000);
    let out = home.run(&["tool", "call", &name, "read"]);
    out.expect_code(2);
    assert!(out.stderr.len() < ERROR_BOUND, "{} bytes", out.stderr.len());
    assert!(
        out.stderr.contains("no built-in or installed tool named"),
        "{}",
        &out.stderr[..200]
    );
    assert!(
        out.stderr.contains("bytes dropped]"),
        "{}",
        &out.stderr[..400]
    );

    let tool = "t".repeat(120_000);
    let out = home.run(&["tool", "call", "json", &tool]);
    out.expect_code(2);
    assert!(out.stderr.len() < ERROR_BOUND, "{} bytes", out.stderr.len());
    assert!(out.stderr.contains("has no tool"), "{}", &out.stderr[..200]);

    // An agent file is not bounded by argv: a 64 MiB component name.
    let agent = home.path().join("agent");
    write(
        &agent.join("agent.toml"),
        &format!(
            "name = \"long\"\ninstructions = \"x\"\n\n[model]\nprovider = \"replay\"\n\
             model = \"m\"\ncassette = \"c.json\"\n\n[[tools]]\ncomponent = \"{}\"\n",
            "c".repeat(64 << 20)
        ),
    );
    let out = home.run(&["mcp", "--stdio", "--agent", agent.to_str().expect("utf-8")]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.len() < ERROR_BOUND, "{} bytes", out.stderr.len());
    assert!(
        out.stderr.contains("bytes dropped]"),
        "{}",
        &out.stderr[..400]
    );
    // A name in `only` is cut too.
    write(
        &agent.join("agent.toml"),
        &format!(
            "name = \"long\"\ninstructions = \"x\"\n\n[model]\nprovider = \"replay\"\n\
             model = \"m\"\ncassette = \"c.json\"\n\n[[tools]]\ncomponent = \"json\"\n\
             only = [\"{}\"]\n",
            "t".repeat(64 << 20)
        ),
    );
    let out = home.run(&["mcp", "--stdio", "--agent", agent.to_str().expect("utf-8")]);
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.len() < ERROR_BOUND, "{} bytes", out.stderr.len());
}

#[test]
fn nested_output_prints_within_a_bounded_factor_of_its_size() {
    let home = Home::new();
    // 1000 arrays nested 100 deep: about 200 KB compact, about 21 MB
    // indented.
    let input = r#"{"filter": "[range(1000) | reduce range(100) as $i (0; [.])]", "input": null}"#;
    for json in [false, true] {
        let mut args = vec!["tool", "call", "json", "query", "--input", input];
        if json {
            args.push("--json");
        }
        let out = home.run(&args);
        out.expect_code(0);
        let printed = out.stdout_text();
        let value: Value = serde_json::from_str(&printed).expect("still JSON");
        let compact = serde_json::to_string(&value).expect("json").len();
        let pretty = serde_json::to_string_pretty(&value).expect("json").len();
        assert!(
            pretty > 50 * compact,
            "the case is not explosive: {pretty} vs {compact}"
        );
        eprintln!(
            "printed {} bytes for {compact} compact ({pretty} indented)",
            printed.len()
        );
        assert!(
            printed.len() <= 3 * compact + 4096 + 1,
            "printed {} bytes for {compact} compact",
            printed.len()
        );
    }
    // An ordinary output is still indented.
    let out = home.run(&[
        "tool",
        "call",
        "json",
        "query",
        "--input",
        r#"{"filter": "{a: 1, b: [2, 3]}", "input": null}"#,
    ]);
    out.expect_code(0);
    assert!(out.stdout_text().contains("\n  "), "{}", out.stdout_text());
}
