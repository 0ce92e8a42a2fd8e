//! The compile cache runs only what the host wrote (issue 26, part 1).
//!
//! `$LONGHAND_HOME/cache/components/<digest>-<engine>.cwasm` holds native
//! code. Each test here changes an entry the way an attacker would
//! (another component's entry copied over it, a truncated one, `.text`
//! filled with `int3`, a guest granted the home renaming one over another)
//! and checks that the next load compiles again, describes the right
//! component and rewrites the entry: never runs the bytes it found.
//!
//! These homes have a compile cache of their own (not the shared one of
//! `support`): they tamper with it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use longhand_hands::dev;
use serde_json::Value;
use tempfile::TempDir;

use crate::support::{self, Ended};

/// The probe fixture (it can rename files in a granted directory).
fn probe() -> &'static str {
    static WASM: OnceLock<PathBuf> = OnceLock::new();
    WASM.get_or_init(|| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/probe");
        dev::build_component(&crate_dir)
            .unwrap_or_else(|e| panic!("building the probe fixture: {e:#}"))
    })
    .to_str()
    .expect("utf-8 path")
}

/// A home whose cache is its own directory, and a key directory outside it.
struct Lab {
    home: TempDir,
    keys: TempDir,
}

impl Lab {
    fn new() -> Self {
        Self {
            home: TempDir::new().unwrap(),
            keys: TempDir::new().unwrap(),
        }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = support::command(self.home.path(), args);
        cmd.env("LONGHAND_KEY_DIR", self.keys.path());
        cmd
    }

    fn run(&self, args: &[&str]) -> Ended {
        support::run(self.cmd(args))
    }

    fn components(&self) -> PathBuf {
        self.home.path().join("cache/components")
    }

    fn entries(&self) -> Vec<PathBuf> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(self.components())
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
                    .collect()
            })
            .unwrap_or_default();
        entries.sort();
        entries
    }

    /// Describe `component` (compiling and caching it) and return the
    /// cache entry that appeared, and the description.
    fn cached(&self, component: &str) -> (PathBuf, Value) {
        let before = self.entries();
        let described = self.describe(component);
        let new: Vec<PathBuf> = self
            .entries()
            .into_iter()
            .filter(|e| !before.contains(e))
            .collect();
        assert_eq!(new.len(), 1, "one new cache entry for {component}: {new:?}");
        (new[0].clone(), described)
    }

    fn describe(&self, component: &str) -> Value {
        let out = self.run(&["tool", "describe", component, "--json"]);
        out.expect_code(0);
        let v: Value =
            serde_json::from_str(&out.stdout_text()).expect("describe --json prints JSON");
        v["info"].clone()
    }
}

/// The tool names a description lists.
fn tools(described: &Value) -> Vec<String> {
    described["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect()
}

/// Load `component` again after its entry was tampered with: it must
/// describe as before (so it was compiled again, not run from the entry),
/// and the entry must have been rewritten to what it was.
fn loads_as_before(lab: &Lab, component: &str, entry: &Path, original: &[u8], described: &Value) {
    let out = lab.run(&["tool", "describe", component, "--json"]);
    assert_eq!(
        out.code,
        Some(0),
        "the host must not die running a tampered cache entry (killed by a signal: {:?})\n{}",
        out.code,
        out.stderr
    );
    let now: Value = serde_json::from_str(&out.stdout_text()).expect("JSON");
    let now = &now["info"];
    assert_eq!(now["name"], described["name"], "{}", out.stderr);
    assert_eq!(tools(now), tools(described));
    assert!(
        out.stderr.contains("compiling it again"),
        "a warning names the rejected entry: {}",
        out.stderr
    );
    assert_eq!(
        std::fs::read(entry).unwrap(),
        original,
        "the entry is rewritten with what the host compiles"
    );
}

#[test]
fn another_components_entry_copied_over_is_compiled_again_not_run() {
    let lab = Lab::new();
    let (http, described) = lab.cached("http");
    let (other, _) = lab.cached(probe());
    let original = std::fs::read(&http).unwrap();
    std::fs::copy(&other, &http).unwrap();
    loads_as_before(&lab, "http", &http, &original, &described);
}

#[test]
fn a_truncated_entry_is_compiled_again() {
    let lab = Lab::new();
    let (http, described) = lab.cached("http");
    let original = std::fs::read(&http).unwrap();
    // Cut inside the code, and cut only the last bytes (whatever follows
    // the code: with a seal, the seal).
    for keep in [original.len() / 2, original.len() - 32] {
        std::fs::write(&http, &original[..keep]).unwrap();
        loads_as_before(&lab, "http", &http, &original, &described);
    }
}

/// The file range of the ELF section `name` in `elf` (64-bit little endian).
fn elf_section(elf: &[u8], name: &str) -> Option<(usize, usize)> {
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    assert_eq!(
        &elf[..4],
        b"\x7fELF",
        "a compiled component is an ELF image"
    );
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28), u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let header = |i: usize| shoff + i * shentsize;
    let strtab = u64_at(header(shstrndx) + 0x18);
    (0..shnum).find_map(|i| {
        let h = header(i);
        let start = strtab + u32_at(h);
        let end = start + elf[start..].iter().position(|b| *b == 0)?;
        (&elf[start..end] == name.as_bytes()).then(|| {
            let offset = u64_at(h + 0x18);
            (offset, offset + u64_at(h + 0x20))
        })
    })
}

#[test]
fn an_entry_whose_code_is_int3_is_compiled_again_not_run() {
    let lab = Lab::new();
    let (http, described) = lab.cached("http");
    let original = std::fs::read(&http).unwrap();
    let (start, end) = elf_section(&original, ".text").expect("a .text section");
    assert!(end > start && end <= original.len());
    let mut trapping = original.clone();
    trapping[start..end].fill(0xcc);
    std::fs::write(&http, &trapping).unwrap();
    loads_as_before(&lab, "http", &http, &original, &described);
}

#[test]
fn a_guest_granted_the_home_cannot_swap_cache_entries() {
    let lab = Lab::new();
    let (http, described) = lab.cached("http");
    let (other, _) = lab.cached(probe());
    let original = std::fs::read(&http).unwrap();
    let guest = |p: &Path| {
        format!(
            "/home/cache/components/{}",
            p.file_name().unwrap().to_str().unwrap()
        )
    };
    let input = serde_json::json!({ "from": guest(&other), "to": guest(&http) }).to_string();
    let grant = format!("{}:/home:rw", lab.home.path().display());
    let call = |allow: bool| {
        let mut cmd = lab.cmd(&[
            "tool",
            "call",
            probe(),
            "rename",
            "--input",
            &input,
            "--dir",
            &grant,
            "--json",
        ]);
        if allow {
            cmd.env("LONGHAND_ALLOW_HOME_GRANTS", "1");
        }
        support::run(cmd)
    };

    // Without the operator's word, the grant is refused before anything runs.
    let refused = call(false);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("the data directory"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("LONGHAND_ALLOW_HOME_GRANTS"),
        "{}",
        refused.stderr
    );
    assert_eq!(std::fs::read(&http).unwrap(), original);

    // With it, the guest does rename one entry over the other...
    let renamed = call(true);
    renamed.expect_code(0);
    assert!(!other.exists(), "the guest renamed the entry");
    // ...and the next process compiles `http` again rather than run it.
    loads_as_before(&lab, "http", &http, &original, &described);
}

#[test]
fn grants_reaching_the_home_the_cache_or_the_key_are_refused_however_named() {
    let lab = Lab::new();
    let home = lab.home.path();
    std::fs::create_dir_all(home.join("cache/components")).unwrap();
    std::fs::create_dir_all(home.join("work")).unwrap();
    std::fs::create_dir_all(home.join("tools")).unwrap();
    let refused = |dir: String, allow: bool, keys_outside: bool| {
        let mut cmd = support::command(
            home,
            &[
                "tool",
                "call",
                "fs",
                "list",
                "--input",
                r#"{"path":"/g"}"#,
                "--dir",
                &dir,
            ],
        );
        if keys_outside {
            cmd.env("LONGHAND_KEY_DIR", lab.keys.path());
        }
        if allow {
            cmd.env("LONGHAND_ALLOW_HOME_GRANTS", "1");
        }
        let out = support::run(cmd);
        out.expect_code(2);
        out.stderr
    };
    let h = home.display();
    // The home, through `..`, and the cache inside it.
    for dir in [
        format!("{h}:/g"),
        format!("{h}/work/..:/g"),
        format!("{h}/cache/components:/g:rw"),
        format!("{h}/tools:/g:rw"),
    ] {
        let stderr = refused(dir.clone(), false, true);
        assert!(stderr.contains("directory grant"), "{dir}: {stderr}");
    }
    // A parent of the home, through a symbolic link to it.
    let parent = home.parent().unwrap().display();
    let stderr = refused(format!("{parent}:/g"), false, true);
    assert!(stderr.contains("contains the data directory"), "{stderr}");
    #[cfg(unix)]
    {
        let links = TempDir::new().unwrap();
        let link = links.path().join("to-home");
        std::os::unix::fs::symlink(home, &link).unwrap();
        let stderr = refused(format!("{}:/g", link.display()), true, true);
        assert!(stderr.contains("symbolic link"), "{stderr}");
    }
    // With the override, but the key inside the home: still refused,
    // naming the key.
    let stderr = refused(format!("{h}:/g"), true, false);
    assert!(stderr.contains("the host key"), "{stderr}");
    // A grant of the key's own directory, whatever the override says.
    let stderr = refused(format!("{}:/g", lab.keys.path().display()), true, true);
    assert!(stderr.contains("the host key"), "{stderr}");
    // A workspace kept inside the home reaches none of its stores.
    let mut cmd = support::command(
        home,
        &[
            "tool",
            "call",
            "fs",
            "list",
            "--input",
            r#"{"path":"/g"}"#,
            "--dir",
            &format!("{h}/work:/g"),
        ],
    );
    cmd.env("LONGHAND_KEY_DIR", lab.keys.path());
    support::run(cmd).expect_code(0);
    // And a directory beside the home is granted as before.
    let beside = TempDir::new().unwrap();
    let mut cmd = support::command(
        home,
        &[
            "tool",
            "call",
            "fs",
            "list",
            "--input",
            r#"{"path":"/g"}"#,
            "--dir",
            &format!("{}:/g", beside.path().display()),
        ],
    );
    cmd.env("LONGHAND_KEY_DIR", lab.keys.path());
    support::run(cmd).expect_code(0);
}

#[test]
fn a_rewritten_install_record_or_a_planted_trusted_key_is_refused() {
    let lab = Lab::new();
    lab.run(&[
        "tool",
        "install",
        probe(),
        "--name",
        "probe",
        "--allow-unsigned",
    ])
    .expect_code(0);
    lab.run(&["tool", "describe", "probe"]).expect_code(0);
    // What a tool granted the home could do: rewrite the record (here only
    // its source; a real attack would name other bytes).
    let record = lab.home.path().join("tools/probe.json");
    let text = std::fs::read_to_string(&record).unwrap();
    let mut value: Value = serde_json::from_str(&text).unwrap();
    value["source"] = Value::String("/elsewhere/probe.wasm".to_owned());
    std::fs::write(&record, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    let out = lab.run(&["tool", "describe", "probe"]);
    out.expect_code(3);
    assert!(out.stderr.contains("reinstall it"), "{}", out.stderr);
    // The same record under another name is not that name's either.
    std::fs::write(&record, &text).unwrap();
    lab.run(&["tool", "describe", "probe"]).expect_code(0);
    std::fs::copy(&record, lab.home.path().join("tools/other.json")).unwrap();
    lab.run(&["tool", "describe", "other"]).expect_code(3);

    // A key file planted in the trust store, owned by the user, mode 0600
    // (a guest writes as the user), trusts nobody.
    let keys = TempDir::new().unwrap();
    let secret = keys.path().join("k");
    lab.run(&["tool", "keygen", secret.to_str().unwrap()])
        .expect_code(0);
    let trust = lab.home.path().join("trust");
    std::fs::create_dir_all(&trust).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&trust, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let planted = trust.join("planted.pub");
    std::fs::copy(keys.path().join("k.pub"), &planted).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let out = lab.run(&["trust", "list"]);
    out.expect_code(0);
    assert!(
        out.stdout.is_empty(),
        "a planted key is trusted: {:?}",
        out.stdout
    );
    assert!(out.stderr.contains("trust add"), "{}", out.stderr);
    // Added by `trust add`, the same key is trusted.
    std::fs::remove_file(&planted).unwrap();
    lab.run(&["trust", "add", keys.path().join("k.pub").to_str().unwrap()])
        .expect_code(0);
    assert_eq!(lab.run(&["trust", "list"]).stdout.len(), 1);
}
