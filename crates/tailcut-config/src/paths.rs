//! Whether a configured output file (ledger, job store, trace) can be written, checked
//! without creating or changing anything, so `tailcut config check` and `serve` refuse
//! an unwritable path at start instead of failing on the first request.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

/// Why a configured output path cannot be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unwritable {
    /// The path is a directory.
    #[error("is a directory, expected a file")]
    IsDirectory,
    /// The file exists but cannot be opened for appending.
    #[error("cannot be opened for writing: {source}")]
    CannotOpen {
        /// The open's error.
        source: std::io::Error,
    },
    /// The file's metadata cannot be read.
    #[error("cannot be read: {source}")]
    CannotRead {
        /// The stat's error.
        source: std::io::Error,
    },
    /// An ancestor of the path is not a directory.
    #[error("`{}` is not a directory", dir.display())]
    NotADirectory {
        /// The ancestor.
        dir: PathBuf,
    },
    /// An ancestor's metadata cannot be read.
    #[error("`{}` cannot be read: {source}", dir.display())]
    DirCannotRead {
        /// The ancestor.
        dir: PathBuf,
        /// The stat's error.
        source: std::io::Error,
    },
    /// No ancestor of the path exists.
    #[error("has no existing parent directory")]
    NoParent,
    /// Files cannot be created in the directory.
    #[error("directory `{}` is not writable: {source}", dir.display())]
    DirNotWritable {
        /// The directory.
        dir: PathBuf,
        /// The probe's error.
        source: std::io::Error,
    },
}

/// `Ok` if `path` can be opened for writing (or created), with a reason otherwise.
pub(crate) fn writable(path: &Path) -> Result<(), Unwritable> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return Err(Unwritable::IsDirectory),
        Ok(_) => {
            // Opening for append changes nothing, and fails on a read-only file.
            OpenOptions::new().append(true).open(path).map_err(|source| Unwritable::CannotOpen { source })?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                dir_writable(dir)?;
            }
            return Ok(());
        }
        Err(e) if missing(&e) => {}
        Err(source) => return Err(Unwritable::CannotRead { source }),
    }
    // The nearest ancestor that exists must be a writable directory.
    let mut dir = path.parent();
    while let Some(d) = dir {
        let d = if d.as_os_str().is_empty() { Path::new(".") } else { d };
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() => return dir_writable(d),
            Ok(_) => return Err(Unwritable::NotADirectory { dir: d.to_path_buf() }),
            Err(e) if missing(&e) => dir = d.parent(),
            Err(source) => return Err(Unwritable::DirCannotRead { dir: d.to_path_buf(), source }),
        }
    }
    Err(Unwritable::NoParent)
}

/// Not there (or under something that is not a directory): look further up.
fn missing(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
}

/// Whether files can be created in `dir`: a probe file is created and removed.
fn dir_writable(dir: &Path) -> Result<(), Unwritable> {
    let probe = dir.join(format!(".tailcut-write-check-{}", std::process::id()));
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        // A probe left behind by an earlier check of this process: creating it worked.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(source) => Err(Unwritable::DirNotWritable { dir: dir.to_path_buf(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_missing_and_unwritable_paths() {
        let dir = tempfile::tempdir().unwrap();
        assert!(writable(&dir.path().join("new.sqlite")).is_ok());
        assert!(writable(&dir.path().join("a/b/new.sqlite")).is_ok(), "missing directories are created at start");
        assert!(!dir.path().join("a").exists(), "the check creates nothing");
        let e = writable(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        let e = writable(&dir.path().join("file/ledger.sqlite")).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        assert!(writable(Path::new("/proc/tailcut/ledger.sqlite")).is_err() || !Path::new("/proc").exists());
    }
}
