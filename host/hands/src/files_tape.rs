//! The file tape: what one call found in its granted directories, and what
//! it left there, for tool tests over files (`longhand tool call --dir …
//! --record`, `longhand tool test`).
//!
//! A [`FilesTape`] is a per-call option of [`super::Hands::call_with`], set
//! only when recording; a call without one is untouched. While the call
//! runs, the guarded filesystem ([`super::fs`]) tells it each entry the
//! guest reached, by grant and path:
//!
//! - a file opened to be read is copied, as it was at that moment (before
//!   the call could change it);
//! - a directory opened or listed is kept as a directory, and a listed or
//!   looked-up entry that is never read is kept by kind, size and time
//!   only, so a replay lists and stats the same names;
//! - an entry the call itself creates, truncates or opens for writing
//!   first is not an input: it is remembered as written, and its content
//!   after the call is what [`FilesTape::finish`] reads back, for the
//!   replay to compare.
//!
//! The first thing the call does to an entry decides what it is. Nothing
//! outside what the guest reached is kept: a directory of a thousand files
//! of which the call read one gives a fixture of one file (and, if the call
//! listed the directory, the other names and sizes).
//!
//! Bounds: file bytes kept (read and written together) count against
//! [`MAX_FILE_BYTES`], entries against [`MAX_ENTRIES`]. Past either the
//! tape stops copying and says so ([`FilesTape::problems`]): a recording
//! that was cut is not a recording, and the CLI refuses to write it.
//!
//! What this module must not do: decide what a guest may open (that is the
//! grant and [`super::fs`]), or know about fixture files (the CLI owns
//! their shape). A replay is not done here: the CLI makes a fresh directory
//! from [`FileEntry`]s and grants it.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use cap_primitives::fs::FollowSymlinks;
use serde::{Deserialize, Serialize};

use super::tape::TapeBody;

/// Most file bytes one call's tape keeps: 8 MiB.
pub const MAX_FILE_BYTES: u64 = 8 << 20;

/// Most entries (files and directories) one call's tape keeps.
pub const MAX_ENTRIES: usize = 10_000;

/// One entry under a granted directory, by its guest path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Guest path: the grant's guest path, then the path beneath it.
    pub path: String,
    /// Its content when the call read it (text when UTF-8, else
    /// `{"base64": …}`); `None` for a directory or an entry only listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<TapeBody>,
    /// `true` for a directory.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dir: bool,
    /// Size of a file whose content was not read (a replay makes a file
    /// this long that reads as zeros).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Last modified, in seconds since the Unix epoch (with fractions),
    /// so a replay stats the same time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<f64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl FileEntry {
    /// The entry's modification time, if kept.
    pub fn modified_time(&self) -> Option<SystemTime> {
        let secs = self.modified.filter(|s| s.is_finite() && *s >= 0.0)?;
        SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs_f64(secs))
    }
}

/// What the call did first to an entry.
#[derive(Debug, Clone)]
enum Seen {
    /// Read: its content then.
    Read {
        content: Vec<u8>,
        modified: Option<f64>,
    },
    /// Listed or looked up, never read.
    Present {
        size: u64,
        modified: Option<f64>,
    },
    Dir,
    /// Created, truncated or opened for writing first: output, not input.
    Written,
}

/// A granted directory as the tape knows it.
struct Root {
    guest_path: String,
    dir: Arc<std::fs::File>,
}

#[derive(Default)]
struct State {
    roots: Vec<Root>,
    /// By root index and the normalised path beneath it ("" is the root).
    seen: BTreeMap<(usize, String), Seen>,
    /// Entries the call wrote, in the order it first wrote them.
    wrote: Vec<(usize, String)>,
    kept: u64,
    problems: Vec<String>,
}

/// The files one call touched; cheap to clone (clones share the tape).
#[derive(Clone, Default)]
pub struct FilesTape {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FilesTape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("FilesTape")
            .field("entries", &s.seen.len())
            .field("kept", &s.kept)
            .finish()
    }
}

/// Seconds since the epoch of a file's modification time.
fn seconds(meta: &cap_primitives::fs::Metadata) -> Option<f64> {
    let t = meta.modified().ok()?.into_std();
    t.duration_since(SystemTime::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs_f64())
}

/// `base` joined with the guest's `path`, with `.` and `..` resolved; `None`
/// when it would leave the grant (the open fails for the guest anyway) or
/// is absolute.
pub(crate) fn join(base: &str, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

impl FilesTape {
    /// An empty tape that records.
    pub fn record() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A granted directory was opened for the call: entries beneath it are
    /// kept under `guest_path`. Returns the root's index.
    pub(crate) fn root(&self, guest_path: &str, dir: Arc<std::fs::File>) -> usize {
        let mut s = self.lock();
        s.roots.push(Root {
            guest_path: guest_path.to_owned(),
            dir,
        });
        s.roots.len() - 1
    }

    /// Room for one more entry, or a problem written down.
    fn admit(s: &mut State, key: &(usize, String)) -> bool {
        if s.seen.contains_key(key) {
            return true;
        }
        if s.seen.len() >= MAX_ENTRIES {
            if s.problems.is_empty() {
                s.problems.push(format!(
                    "the call reached more than {MAX_ENTRIES} files and directories; a fixture \
                     keeps at most that many (grant a smaller directory)"
                ));
            }
            return false;
        }
        true
    }

    /// The guest opened the file at `path` under root `root` to read it:
    /// keep its content now, unless the call wrote it first.
    pub(crate) fn read(&self, root: usize, path: String, file: &std::fs::File) {
        let mut s = self.lock();
        let key = (root, path);
        if matches!(
            s.seen.get(&key),
            Some(Seen::Read { .. } | Seen::Written | Seen::Dir)
        ) || !Self::admit(&mut s, &key)
        {
            return;
        }
        let meta = file.metadata();
        let len = meta.as_ref().map(|m| m.len()).unwrap_or(0);
        if s.kept.saturating_add(len) > MAX_FILE_BYTES {
            let (shown, kept) = (Self::shown(&s, &key), s.kept);
            s.problems.push(format!(
                "{shown} is {len} bytes; the files a fixture keeps may hold {MAX_FILE_BYTES} \
                 bytes in all ({kept} kept before it)"
            ));
            return;
        }
        let modified = meta
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64());
        let mut content = Vec::with_capacity(len as usize);
        // A fresh descriptor of the same open file would share its offset;
        // read through positioned reads so the guest's offset is untouched.
        let read = read_all_at(file, &mut content, len);
        match read {
            Ok(()) => {
                s.kept += content.len() as u64;
                s.seen.insert(key, Seen::Read { content, modified });
            }
            Err(e) => {
                let shown = Self::shown(&s, &key);
                s.problems.push(format!("{shown} could not be kept: {e}"));
            }
        }
    }

    /// The guest reached a directory at `path` (opened or listed it).
    pub(crate) fn dir(&self, root: usize, path: String) {
        let mut s = self.lock();
        let key = (root, path);
        if !s.seen.contains_key(&key) && Self::admit(&mut s, &key) {
            s.seen.insert(key, Seen::Dir);
        }
    }

    /// The guest created, truncated or opened for writing `path`: what is
    /// there after the call is output. An entry already read keeps its
    /// content (the input), and is compared after the replay too.
    pub(crate) fn written(&self, root: usize, path: String) {
        let mut s = self.lock();
        let key = (root, path);
        match s.seen.get(&key) {
            None => {
                if Self::admit(&mut s, &key) {
                    s.seen.insert(key.clone(), Seen::Written);
                }
            }
            Some(Seen::Present { .. }) => {
                s.seen.insert(key.clone(), Seen::Written);
            }
            Some(_) => {}
        }
        s.wrote_too(key);
    }

    /// The guest listed the directory at `path`: keep its entries' names,
    /// kinds, sizes and times (not contents).
    pub(crate) fn listed(&self, root: usize, path: String) {
        let dir = {
            let mut s = self.lock();
            if !s.seen.contains_key(&(root, path.clone())) {
                let key = (root, path.clone());
                if Self::admit(&mut s, &key) {
                    s.seen.insert(key, Seen::Dir);
                }
            }
            match s.roots.get(root) {
                Some(r) => r.dir.clone(),
                None => return,
            }
        };
        let entries = if path.is_empty() {
            cap_primitives::fs::read_base_dir(&dir)
        } else {
            cap_primitives::fs::read_dir(&dir, path.as_ref())
        };
        let Ok(entries) = entries else { return };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Ok(meta) = entry.metadata() else { continue };
            let child = join(&path, &name).unwrap_or(name);
            self.present(root, child, &meta);
        }
    }

    /// The guest is about to move, link or remove `path`: what is there now
    /// is input, content and all (a replay must have it to move it).
    pub(crate) fn taken(&self, root: usize, path: String) {
        let dir = match self.lock().roots.get(root) {
            Some(r) => r.dir.clone(),
            None => return,
        };
        let mut options = cap_primitives::fs::OpenOptions::new();
        options.read(true);
        options._cap_fs_ext_follow(FollowSymlinks::No);
        let opened = cap_primitives::fs::open(&dir, path.as_ref(), &options);
        match opened {
            Ok(file) if file.metadata().is_ok_and(|m| m.is_file()) => self.read(root, path, &file),
            Ok(file) if file.metadata().is_ok_and(|m| m.is_dir()) => self.dir(root, path),
            _ => {}
        }
    }

    /// The guest looked `path` up (stat).
    pub(crate) fn looked_up(&self, root: usize, path: String) {
        let dir = match self.lock().roots.get(root) {
            Some(r) => r.dir.clone(),
            None => return,
        };
        let at = if path.is_empty() { "." } else { &path };
        if let Ok(meta) = cap_primitives::fs::stat(&dir, at.as_ref(), FollowSymlinks::No) {
            self.present(root, path, &meta);
        }
    }

    fn present(&self, root: usize, path: String, meta: &cap_primitives::fs::Metadata) {
        let mut s = self.lock();
        let key = (root, path);
        if s.seen.contains_key(&key) || !Self::admit(&mut s, &key) {
            return;
        }
        let seen = if meta.is_dir() {
            Seen::Dir
        } else if meta.is_file() {
            Seen::Present {
                size: meta.len(),
                modified: seconds(meta),
            }
        } else {
            // Links and special files are not kept: a replay has no way to
            // make them faithfully, and the guard refuses to open specials.
            return;
        };
        s.seen.insert(key, seen);
    }

    fn shown(s: &State, key: &(usize, String)) -> String {
        let root = s
            .roots
            .get(key.0)
            .map(|r| r.guest_path.trim_end_matches('/'))
            .unwrap_or("");
        format!("{root}/{}", key.1)
    }

    /// What went wrong while recording; a tape with problems is not a
    /// recording.
    pub fn problems(&self) -> Vec<String> {
        self.lock().problems.clone()
    }

    /// After the call: the entries it found (its inputs), and the files it
    /// wrote with their content now, both by guest path in path order.
    pub fn finish(&self) -> (Vec<FileEntry>, Vec<FileEntry>) {
        let mut s = self.lock();
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        let wrote = s.wrote.to_vec();
        for (key, seen) in &s.seen {
            let path = Self::shown(&s, key);
            let path = path.trim_end_matches('/').to_owned();
            let path = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            let entry = match seen {
                Seen::Read { content, modified } => FileEntry {
                    path,
                    content: Some(TapeBody(content.clone())),
                    dir: false,
                    size: None,
                    modified: *modified,
                },
                Seen::Present { size, modified } => FileEntry {
                    path,
                    content: None,
                    dir: false,
                    size: Some(*size),
                    modified: *modified,
                },
                Seen::Dir => FileEntry {
                    path,
                    content: None,
                    dir: true,
                    size: None,
                    modified: None,
                },
                Seen::Written => continue,
            };
            inputs.push(entry);
        }
        for key in wrote {
            let Some(root) = s.roots.get(key.0) else {
                continue;
            };
            let dir = root.dir.clone();
            let path = Self::shown(&s, &key);
            let meta = cap_primitives::fs::stat(&dir, key.1.as_ref(), FollowSymlinks::No);
            let entry = match meta {
                Ok(m) if m.is_dir() => FileEntry {
                    path,
                    content: None,
                    dir: true,
                    size: None,
                    modified: None,
                },
                Ok(m) if m.is_file() => {
                    if s.kept.saturating_add(m.len()) > MAX_FILE_BYTES {
                        s.problems.push(format!(
                            "{path} (written by the call) is {} bytes; the files a fixture \
                             keeps may hold {MAX_FILE_BYTES} bytes in all",
                            m.len()
                        ));
                        continue;
                    }
                    let mut content = Vec::new();
                    let mut options = cap_primitives::fs::OpenOptions::new();
                    options.read(true);
                    let opened = cap_primitives::fs::open(&dir, key.1.as_ref(), &options);
                    match opened.and_then(|mut f| f.read_to_end(&mut content)) {
                        Ok(_) => {
                            s.kept += content.len() as u64;
                            FileEntry {
                                path,
                                content: Some(TapeBody(content)),
                                dir: false,
                                size: None,
                                modified: None,
                            }
                        }
                        Err(e) => {
                            s.problems.push(format!(
                                "{path} (written by the call) could not be read: {e}"
                            ));
                            continue;
                        }
                    }
                }
                // Removed again, or not a plain file: nothing to compare.
                _ => continue,
            };
            outputs.push(entry);
        }
        (inputs, outputs)
    }
}

impl State {
    fn wrote_too(&mut self, key: (usize, String)) {
        if !self.wrote.contains(&key) {
            self.wrote.push(key);
        }
    }
}

/// Read `len` bytes of `file` from offset 0 without moving its offset.
#[cfg(unix)]
fn read_all_at(file: &std::fs::File, out: &mut Vec<u8>, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 64 << 10];
    let mut at = 0u64;
    while at < len {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        at += n as u64;
    }
    Ok(())
}

#[cfg(not(unix))]
fn read_all_at(file: &std::fs::File, out: &mut Vec<u8>, len: u64) -> std::io::Result<()> {
    let mut clone = file.try_clone()?;
    let _ = len;
    clone.read_to_end(out).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_paths_join_and_never_leave_the_grant() {
        assert_eq!(join("", "a/b.csv").as_deref(), Some("a/b.csv"));
        assert_eq!(join("a", "./b/../c").as_deref(), Some("a/c"));
        assert_eq!(join("a", "..").as_deref(), Some(""));
        assert_eq!(join("", ".."), None);
        assert_eq!(join("a", "/etc/passwd"), None);
    }

    #[test]
    fn the_first_touch_decides_and_only_what_was_reached_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("in.csv"), "a,b\n1,2\n").unwrap();
        std::fs::write(tmp.path().join("other.bin"), [0u8; 100]).unwrap();
        std::fs::write(tmp.path().join("out.txt"), "old").unwrap();
        let dir = Arc::new(std::fs::File::open(tmp.path()).unwrap());
        let tape = FilesTape::record();
        let root = tape.root("/data/", dir);
        let file = std::fs::File::open(tmp.path().join("in.csv")).unwrap();
        tape.read(root, "in.csv".into(), &file);
        tape.written(root, "out.txt".into());
        // Read after writing: still output, not input.
        tape.read(root, "out.txt".into(), &file);
        std::fs::write(tmp.path().join("out.txt"), "new").unwrap();
        let (inputs, outputs) = tape.finish();
        assert!(tape.problems().is_empty(), "{:?}", tape.problems());
        assert_eq!(inputs.len(), 1, "{inputs:?}");
        assert_eq!(inputs[0].path, "/data/in.csv");
        assert_eq!(inputs[0].content.as_ref().unwrap().0, b"a,b\n1,2\n");
        assert!(inputs[0].modified.is_some());
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs[0].path, "/data/out.txt");
        assert_eq!(outputs[0].content.as_ref().unwrap().0, b"new");

        // A listing keeps names and sizes, not contents.
        let tape = FilesTape::record();
        let dir = Arc::new(std::fs::File::open(tmp.path()).unwrap());
        let root = tape.root("/data", dir);
        tape.listed(root, String::new());
        let (inputs, _) = tape.finish();
        let other = inputs.iter().find(|e| e.path == "/data/other.bin").unwrap();
        assert_eq!((other.size, other.content.is_none()), (Some(100), true));
        assert!(inputs.iter().any(|e| e.path == "/data" && e.dir));
    }

    #[test]
    fn a_file_over_the_bound_is_a_problem_not_a_short_copy() {
        let tmp = tempfile::tempdir().unwrap();
        let big = tmp.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let dir = Arc::new(std::fs::File::open(tmp.path()).unwrap());
        let tape = FilesTape::record();
        let root = tape.root("/d", dir);
        tape.read(root, "big".into(), &std::fs::File::open(&big).unwrap());
        let problems = tape.problems();
        assert!(problems[0].contains("/d/big"), "{problems:?}");
        assert!(tape.finish().0.is_empty());
    }
}
