//! Reading a file the operator named (a component to install or publish,
//! a key to trust or sign with): a regular file only, through a bound.
//!
//! A path on the command line can name anything: `/dev/zero` (endless),
//! a FIFO (blocks forever on open), `/proc/self/…` (lies about its size),
//! a directory. Checking the size first is not enough: a device reports
//! 0. So the file is opened without blocking, judged by the opened file's
//! own metadata, and read through `take(limit + 1)`.

use std::io::Read;
use std::path::Path;

use super::error::DistError;

/// The bytes of the regular file at `path`, at most `limit` of them. A
/// device, FIFO, socket or directory, and a file over `limit`, are a
/// [`DistError::Usage`] naming it and saying what to give instead.
pub fn read_regular(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, DistError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO would block `open` until a writer comes; with O_NONBLOCK
        // the open returns and the metadata below refuses it.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options
        .open(path)
        .map_err(|e| DistError::Usage(format!("cannot read {what} {}: {e}", path.display())))?;
    let meta = file
        .metadata()
        .map_err(DistError::io(format!("reading {}", path.display())))?;
    if !meta.is_file() {
        return Err(DistError::Usage(format!(
            "{} is not a regular file ({}); give {what} as a file",
            path.display(),
            kind_of(&meta)
        )));
    }
    if meta.len() > limit {
        return Err(DistError::Usage(format!(
            "{} is {} bytes, over the {limit}-byte limit of {what}",
            path.display(),
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(DistError::io(format!("reading {}", path.display())))?;
    if bytes.len() as u64 > limit {
        return Err(DistError::Usage(format!(
            "{} grew past the {limit}-byte limit of {what} while it was read",
            path.display()
        )));
    }
    Ok(bytes)
}

/// What kind of thing `meta` describes, for an error.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    if meta.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_directories_are_refused_and_files_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_regular(Path::new("/dev/zero"), 1 << 20, "a component").unwrap_err();
        assert!(err.to_string().contains("a device"), "{err}");
        let err = read_regular(dir.path(), 1 << 20, "a component").unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        let file = dir.path().join("f");
        std::fs::write(&file, [1u8; 10]).unwrap();
        assert_eq!(read_regular(&file, 10, "x").unwrap().len(), 10);
        assert!(read_regular(&file, 9, "x").is_err());
    }
}
