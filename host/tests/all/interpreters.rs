//! `longhand tool install python` and `tool install js` into a fresh home,
//! then snippets through `longhand tool call`: output, a REPL-like value, a
//! traceback as the tool error, a granted CSV, and escapes (a busy loop, a
//! huge allocation, an ungranted file, a socket to a listener the test
//! holds, `ctypes`) each contained, with the next call still working.
//!
//! The install builds each tool from the sources in the binary with the
//! toolchain `.ci/setup-componentize.sh` installs, named to the binary by
//! `LONGHAND_PY_VENV` / `LONGHAND_JS_MODULES` (the variables the binary
//! reads to use a toolchain already there instead of fetching one), so the
//! test fetches nothing. Without them each test says it was skipped, unless
//! `LONGHAND_REQUIRE_EXTERNAL=1`.

use std::io::ErrorKind;
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::author::missing;
use crate::support::{BIN, Ended, Home, Proc};

/// `longhand <args>` against `home` with the toolchain variables and what
/// the toolchains need from the environment (PATH, HOME), nothing else.
fn longhand(home: &Home, args: &[&str]) -> Ended {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(home.path())
        .env_clear()
        .env("LONGHAND_HOME", home.path());
    for keep in ["PATH", "HOME", "LONGHAND_PY_VENV", "LONGHAND_JS_MODULES"] {
        if let Some(v) = std::env::var_os(keep) {
            cmd.env(keep, v);
        }
    }
    // Building CPython's component is about a minute on two busy cores.
    Proc::spawn(cmd)
        .with_limit(Duration::from_secs(600))
        .finish()
}

/// Install `name` into a fresh home, or `None` (said, or failed under
/// `LONGHAND_REQUIRE_EXTERNAL=1`) when its toolchain is not set up.
fn installed(name: &str, var: &str, what: &str) -> Option<Home> {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(dir) if Path::new(&dir).is_dir() => {}
        Some(_) => {
            missing(&format!("{what} ({var} names no directory)"));
            return None;
        }
        None => {
            missing(&format!("{what} ({var} is not set)"));
            return None;
        }
    }
    let home = Home::new();
    let out = longhand(&home, &["tool", "install", name]);
    out.expect_code(0);
    let text = out.stdout_text();
    assert!(text.contains(&format!("installed {name} from ")), "{text}");
    assert!(text.contains("from the sources in this binary"), "{text}");
    let listed = longhand(&home, &["tool", "list"]).stdout_text();
    assert!(listed.contains(name), "{listed}");
    Some(home)
}

/// `tool call NAME run --input {"code": code}` plus `extra` flags.
fn call(home: &Home, name: &str, code: &str, extra: &[&str]) -> Ended {
    let input = json!({ "code": code }).to_string();
    let mut args = vec!["tool", "call", name, "run", "--input", &input];
    args.extend_from_slice(extra);
    longhand(home, &args)
}

/// A call that succeeded, as its output.
fn ok(home: &Home, name: &str, code: &str, extra: &[&str]) -> Value {
    let out = call(home, name, code, extra);
    assert_eq!(out.code, Some(0), "{code}: {}", out.stderr);
    serde_json::from_str(&out.stdout_text()).unwrap()
}

/// A call that failed, as its stderr (the error the model would see).
fn failed(home: &Home, name: &str, code: &str, extra: &[&str]) -> String {
    let out = call(home, name, code, extra);
    assert_ne!(out.code, Some(0), "{code} succeeded: {:?}", out.stdout);
    out.stderr
}

/// The tool still answers after whatever came before.
fn still_works(home: &Home, name: &str) {
    let code = if name == "python" {
        "print(6 * 7)"
    } else {
        "console.log(6 * 7)"
    };
    assert_eq!(
        ok(home, name, code, &[])["stdout"],
        "42\n",
        "after an escape"
    );
}

#[test]
fn python_runs_snippets_and_contains_escapes() {
    let Some(home) = installed(
        "python",
        "LONGHAND_PY_VENV",
        "the componentize-py venv with the longhand_tool SDK",
    ) else {
        return;
    };
    let py = |code| ok(&home, "python", code, &[]);

    let out = py("print(2**10)");
    assert_eq!(
        out,
        json!({"stdout": "1024\n", "stderr": "", "value": null})
    );
    assert_eq!(py("xs = [3, 4]\nsum(x * x for x in xs)")["value"], 25);
    assert_eq!(py("{'a': [1, 2]}")["value"], json!({"a": [1, 2]}));
    assert_eq!(py("object")["value"], "<class 'object'>");
    let with_stdin = longhand(
        &home,
        &[
            "tool",
            "call",
            "python",
            "run",
            "--input",
            r#"{"code": "import sys; sys.stdin.read().upper()", "stdin": "abc"}"#,
        ],
    );
    with_stdin.expect_code(0);
    let with_stdin: Value = serde_json::from_str(&with_stdin.stdout_text()).unwrap();
    assert_eq!(with_stdin["value"], "ABC");
    assert_eq!(
        py("import sqlite3\nsqlite3.connect(':memory:').execute('select 1+1').fetchone()[0]")["value"],
        2
    );

    // The standard library beyond what the tool itself uses is there.
    assert_eq!(
        py(
            "import difflib, hashlib, zipfile, xml.etree.ElementTree as et\n[round(difflib.SequenceMatcher(None, 'ab', 'ac').ratio(), 2), hashlib.sha256(b'').hexdigest()[:6], et.fromstring('<a>1</a>').text]"
        )["value"],
        json!([0.5, "e3b0c4", "1"])
    );

    // An exception is the tool's error, with the snippet's traceback.
    let err = failed(
        &home,
        "python",
        "print('before')\ndef f():\n    return 1 / 0\nf()",
        &[],
    );
    assert!(err.contains("tool failed: Traceback"), "{err}");
    assert!(err.contains(r#"File "<snippet>", line 3, in f"#), "{err}");
    assert!(err.contains("ZeroDivisionError: division by zero"), "{err}");
    assert!(err.contains("before"), "the output so far is kept: {err}");
    assert!(
        !err.contains("app.py"),
        "the tool's own frames are left out: {err}"
    );

    // A CSV in a granted directory, read with csv and statistics.
    let data = tempfile::TempDir::new().unwrap();
    std::fs::write(
        data.path().join("scores.csv"),
        "name,score\nada,90\nbob,70\ncyd,80\n",
    )
    .unwrap();
    let dir = format!("{}:/data", data.path().display());
    let out = ok(
        &home,
        "python",
        "import csv, statistics\nwith open('/data/scores.csv') as f:\n    rows = list(csv.DictReader(f))\nprint(len(rows))\nstatistics.mean(int(r['score']) for r in rows)",
        &["--dir", &dir],
    );
    assert_eq!(out["stdout"], "3\n");
    assert_eq!(out["value"], 80);

    // A busy loop ends at the call's time limit.
    let err = failed(&home, "python", "while True: pass", &["--timeout", "2s"]);
    assert!(err.contains("limit"), "{err}");
    still_works(&home, "python");

    // More memory than the limit: CPython's own error, or the host's limit.
    let err = failed(&home, "python", "[0]*10**10", &[]);
    assert!(
        err.contains("MemoryError") || err.contains("OverflowError") || err.contains("memory"),
        "{err}"
    );
    let err = failed(&home, "python", "x = [0] * 10**8", &["--memory", "64"]);
    assert!(err.contains("MemoryError"), "{err}");
    still_works(&home, "python");

    // A file outside the grants is not there.
    let err = failed(&home, "python", "open('/etc/passwd').read()", &[]);
    assert!(err.contains("FileNotFoundError"), "{err}");
    still_works(&home, "python");

    // A socket to a listener the test holds: refused, and nothing arrives.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = failed(
        &home,
        "python",
        &format!("import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"),
        &[],
    );
    assert!(err.contains("PermissionError"), "{err}");
    assert!(
        err.contains("denied"),
        "the receipt lists the denial: {err}"
    );
    match listener.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the listener got a connection: {other:?}"),
    }
    still_works(&home, "python");

    // No native code: ctypes does not exist in the component.
    let err = failed(&home, "python", "import ctypes", &[]);
    assert!(err.contains("No module named"), "{err}");
    still_works(&home, "python");

    csv_report_example(&home);
}

/// `examples/csv-report` as the README says, `longhand run
/// examples/csv-report`, with the python tool installed above: the model's
/// turns replayed, the snippets run by CPython over `data/sales.csv`. The
/// figures in the report are checked against the same sums done here, so
/// a report the snippets did not compute from the data fails.
fn csv_report_example(home: &Home) {
    use std::collections::BTreeMap;

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/csv-report");
    let example = std::fs::canonicalize(&example).expect("examples/csv-report exists");
    let mut cmd = Command::new(BIN);
    cmd.args(["run", example.to_str().expect("utf-8 path")])
        .current_dir(home.path())
        .env_clear()
        .env("LONGHAND_HOME", home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    let mut proc = Proc::spawn(cmd).with_limit(Duration::from_secs(300));
    let guard = crate::example::RunDirGuard {
        out: example.join("out"),
        pid: proc.pid(),
    };
    let run = proc.finish();
    run.expect_code(0);
    assert!(
        run.stdout.iter().any(|l| l.starts_with("finished: ")),
        "{:?}",
        run.stdout
    );

    // The answer, from the CSV, without Python.
    let csv = std::fs::read_to_string(example.join("data/sales.csv")).unwrap();
    let mut q3: BTreeMap<&str, f64> = BTreeMap::new();
    let mut units: BTreeMap<&str, u64> = BTreeMap::new();
    let mut rows = 0;
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (month, region, product) = (f[0], f[1], f[2]);
        let n: u64 = f[3].parse().unwrap();
        let price: f64 = f[4].parse().unwrap();
        *units.entry(product).or_default() += n;
        if ["2026-07", "2026-08", "2026-09"].contains(&month) {
            *q3.entry(region).or_default() += n as f64 * price;
        }
        rows += 1;
    }
    let mut ranked: Vec<(&str, f64)> = q3.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (top, sold) = units.iter().max_by_key(|(_, n)| **n).unwrap();
    let money = |x: f64| {
        let cents = format!("{x:.2}");
        let (whole, frac) = cents.split_once('.').unwrap();
        let mut grouped = String::new();
        for (i, c) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(c);
        }
        format!("{grouped}.{frac}")
    };

    let dirs = guard.dirs();
    assert_eq!(dirs.len(), 1, "one run directory: {dirs:?}");
    let report = std::fs::read_to_string(dirs[0].join("report.md")).expect("the report");
    let lead = format!(
        "**{}** had the highest revenue from July to September: {}, ahead of {} ({}) by {}.",
        ranked[0].0,
        money(ranked[0].1),
        ranked[1].0,
        money(ranked[1].1),
        money(ranked[0].1 - ranked[1].1)
    );
    assert!(report.contains(&lead), "expected {lead:?} in:\n{report}");
    assert!(
        report.contains(&format!(
            "**{top}** ({} units)",
            money(*sold as f64).trim_end_matches(".00")
        )),
        "{report}"
    );
    for (region, revenue) in &ranked {
        assert!(
            report.contains(&format!("| {region} | {} |", money(*revenue))),
            "{region}: {report}"
        );
    }
    assert!(report.contains(&format!("({rows} rows)")), "{report}");
}

#[test]
fn js_runs_snippets_and_contains_escapes() {
    let Some(home) = installed(
        "js",
        "LONGHAND_JS_MODULES",
        "the node_modules with componentize-qjs, esbuild and @longhand/tool",
    ) else {
        return;
    };
    let js = |code| ok(&home, "js", code, &[]);

    assert_eq!(
        js("console.log(2**10)"),
        json!({"stdout": "1024\n", "value": null})
    );
    assert_eq!(
        js("const xs = [3, 4];\nxs.map((x) => x * x)")["value"],
        json!([9, 16])
    );
    assert_eq!(js("({a: 1})")["value"], json!({"a": 1}));
    assert_eq!(js("10n ** 3n")["value"], "1000");

    let err = failed(
        &home,
        "js",
        "console.log('before');\nfunction f() { throw new Error('boom'); }\nf();",
        &[],
    );
    assert!(err.contains("tool failed: Error: boom"), "{err}");
    assert!(err.contains("at f (<input>:2"), "{err}");
    assert!(err.contains("before"), "{err}");
    assert!(
        !err.contains("bundle.js"),
        "the tool's own frames are left out: {err}"
    );

    let err = failed(&home, "js", "while (true) {}", &["--timeout", "2s"]);
    assert!(err.contains("limit"), "{err}");
    still_works(&home, "js");

    let err = failed(
        &home,
        "js",
        "const a = []; for (;;) a.push(new Array(1e6).fill(1));",
        &["--memory", "64"],
    );
    assert!(
        err.contains("out of memory") || err.contains("memory"),
        "{err}"
    );
    still_works(&home, "js");

    // Nothing to reach the world with.
    assert_eq!(
        js("[typeof fetch, typeof require, typeof std, typeof os].join()")["value"],
        "undefined,undefined,undefined,undefined"
    );
}
