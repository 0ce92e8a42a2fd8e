//! `write`: create or replace a whole file.
//!
//! Replacing the whole file is what makes this tool idempotent: running it
//! twice with the same input leaves the same file. (Appending would not be,
//! which is why there is no append mode.) Missing parent directories are an
//! error unless the input asks for them, so that a typo in a directory name
//! does not silently grow a new tree.

use std::fs;

use longhand_sdk::{Effect, IoResultExt, Tool, ToolError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::resolve;

/// Input of `write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteInput {
    /// The file to create or replace: a guest path, or a path relative to
    /// `/workspace`.
    path: String,
    /// The complete new content of the file.
    content: String,
    /// Create missing parent directories. Default: false (a missing parent is
    /// an error).
    #[serde(default)]
    create_dirs: bool,
}

/// Output of `write`.
#[derive(Debug, Serialize)]
pub(crate) struct WriteOutput {
    path: String,
    bytes_written: u64,
    /// True if the file did not exist before.
    created: bool,
}

/// The `write` tool.
pub(crate) struct Write;

impl Tool for Write {
    const NAME: &'static str = "write";
    const DESCRIPTION: &'static str = "Create a file or replace its entire content. To change part \
        of an existing file, prefer `edit`. Fails if the parent directory is missing, unless \
        `create_dirs` is true.";
    const EFFECT: Effect = Effect::Idempotent;
    type Input = WriteInput;
    type Output = WriteOutput;

    fn call(input: WriteInput) -> Result<WriteOutput, ToolError> {
        let path = resolve("path", &input.path)?;
        let label = path.display().to_string();
        let created = match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {
                return Err(ToolError::invalid_input(format!("{label} is a directory")));
            }
            Ok(_) => false,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(ToolError::from_io(&label, &e)),
        };
        if let Some(parent) = path.parent() {
            let parent_label = parent.display().to_string();
            if input.create_dirs {
                fs::create_dir_all(parent).for_resource(&parent_label)?;
            } else if created && !parent.is_dir() {
                return Err(ToolError::not_found(format!(
                    "{parent_label} (set `create_dirs` to create missing directories)"
                )));
            }
        }
        crate::replace_file(&path, input.content.as_bytes()).for_resource(&label)?;
        Ok(WriteOutput {
            path: label,
            bytes_written: input.content.len() as u64,
            created,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Scratch;

    fn write(path: String, content: &str, create_dirs: bool) -> Result<WriteOutput, ToolError> {
        Write::call(WriteInput {
            path,
            content: content.to_owned(),
            create_dirs,
        })
    }

    #[test]
    fn creates_then_replaces() {
        let s = Scratch::new();
        let out = write(s.join("a.txt"), "one", false).unwrap();
        assert!(out.created);
        let out = write(s.join("a.txt"), "two", false).unwrap();
        assert!(!out.created);
        assert_eq!(out.bytes_written, 3);
        assert_eq!(fs::read_to_string(s.path().join("a.txt")).unwrap(), "two");
    }

    #[test]
    fn missing_parents_need_create_dirs() {
        let s = Scratch::new();
        let err = write(s.join("x/y/a.txt"), "", false).unwrap_err();
        assert!(matches!(err, ToolError::NotFound(m) if m.contains("create_dirs")));
        write(s.join("x/y/a.txt"), "hi", true).unwrap();
        assert_eq!(
            fs::read_to_string(s.path().join("x/y/a.txt")).unwrap(),
            "hi"
        );
    }

    #[test]
    fn refuses_to_replace_a_directory() {
        let s = Scratch::new();
        let err = write(s.join(""), "", false).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(_)));
    }
}
