//! Reading sources and writing outputs without ever losing data.
//!
//! An output file is written under a temporary name in its own directory, flushed and synced,
//! given the source's permissions and times, and only then renamed onto its name: a reader
//! never sees half a file, an error or a signal leaves the old target untouched, and the source
//! may be removed once the rename is on disk.

use std::fs::{self, File, FileTimes, Metadata};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tempfile::NamedTempFile;

use super::settings::Input;
use super::signals::PendingFile;

/// Input buffer size: the container is read in small pieces (lengths, checksums).
const READ_BUFFER: usize = 1 << 16;

/// An opened input.
pub struct Source {
    pub reader: Box<dyn Read>,
    /// The file's path and metadata; `None` for standard input.
    pub file: Option<(PathBuf, Metadata)>,
}

impl Source {
    /// Opens an input, refusing directories.
    pub fn open(input: &Input) -> Result<Self> {
        match input {
            Input::Stdin => Ok(Source {
                reader: Box::new(io::stdin().lock()),
                file: None,
            }),
            Input::File(path) => {
                let file = File::open(path).context("cannot open")?;
                let meta = file.metadata().context("cannot read file metadata")?;
                if meta.is_dir() {
                    bail!("is a directory");
                }
                Ok(Source {
                    reader: Box::new(BufReader::with_capacity(READ_BUFFER, file)),
                    file: Some((path.clone(), meta)),
                })
            }
        }
    }

    /// The input's length when it is known in advance (a regular file).
    pub fn len(&self) -> Option<u64> {
        match &self.file {
            Some((_, meta)) if meta.is_file() => Some(meta.len()),
            _ => None,
        }
    }

    pub fn metadata(&self) -> Option<&Metadata> {
        self.file.as_ref().map(|(_, meta)| meta)
    }

    /// Removes the source file (`--rm`); standard input is left alone.
    pub fn remove(&self) -> Result<()> {
        if let Some((path, _)) = &self.file {
            fs::remove_file(path).with_context(|| {
                format!("output is complete, but cannot remove {}", path.display())
            })?;
        }
        Ok(())
    }
}

/// Whether two existing paths name the same file (the same device and inode on Unix, so hard
/// links and symbolic links are seen through).
fn same_file(a: &Metadata, a_path: &Path, b: &Metadata, b_path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = (a_path, b_path);
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        matches!(
            (fs::canonicalize(a_path), fs::canonicalize(b_path)),
            (Ok(x), Ok(y)) if x == y
        )
    }
}

/// Checks that `target` may receive the output of `source`: it is not the source itself, not
/// a directory, and (unless `force`) does not exist yet.
pub fn check_target(source: &Source, target: &Path, force: bool) -> Result<()> {
    let Ok(existing) = fs::metadata(target) else {
        // Absent (or unreachable: then creating the temporary file will say why).
        return Ok(());
    };
    if let Some((path, meta)) = &source.file
        && same_file(meta, path, &existing, target)
    {
        bail!("input and output are the same file ({})", target.display());
    }
    if existing.is_dir() {
        bail!("{} is a directory", target.display());
    }
    if !force {
        bail!("{} already exists (use -f to overwrite)", target.display());
    }
    Ok(())
}

/// An output file being written under a temporary name; dropped without [`StagedFile::commit`],
/// it removes itself.
pub struct StagedFile {
    temp: NamedTempFile,
    target: PathBuf,
    _pending: PendingFile,
}

impl StagedFile {
    /// Creates the temporary file beside `target`. With no source file to copy permissions
    /// from, it gets the permissions of a newly created file (0666 less the umask).
    pub fn create(target: &Path, source: Option<&Metadata>) -> Result<Self> {
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = target.file_name().unwrap_or_default().to_string_lossy();
        let prefix = format!(".{name}.tmp");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix);
        // With a source, the file stays private (0600) until it gets the source's permissions.
        if source.is_none() {
            ask_new_file_permissions(&mut builder);
        }
        let temp = builder
            .tempfile_in(dir)
            .map_err(without_path)
            .with_context(|| format!("cannot create a temporary file in {}", dir.display()))?;
        let pending = PendingFile::register(temp.path());
        Ok(StagedFile {
            temp,
            target: target.to_path_buf(),
            _pending: pending,
        })
    }

    pub fn file(&self) -> &File {
        self.temp.as_file()
    }

    /// Gives the file the source's permissions and times, syncs it, and renames it onto the
    /// target — refusing to replace an existing file unless `overwrite`.
    pub fn commit(self, source: Option<&Metadata>, overwrite: bool) -> Result<()> {
        let file = self.temp.as_file();
        let cannot = || format!("cannot write {}", self.target.display());
        if let Some(meta) = source {
            file.set_permissions(meta.permissions())
                .with_context(cannot)?;
            // Times last: every write would move the modification time again.
            let mut times = FileTimes::new();
            if let Ok(t) = meta.modified() {
                times = times.set_modified(t);
            }
            if let Ok(t) = meta.accessed() {
                times = times.set_accessed(t);
            }
            file.set_times(times).with_context(cannot)?;
        }
        file.sync_all().with_context(cannot)?;
        let persisted = if overwrite {
            self.temp.persist(&self.target)
        } else {
            self.temp.persist_noclobber(&self.target)
        };
        if let Err(e) = persisted {
            // Dropping `e.file` removes the temporary file.
            if e.error.kind() == io::ErrorKind::AlreadyExists {
                bail!(
                    "{} already exists (use -f to overwrite)",
                    self.target.display()
                );
            }
            return Err(without_path(e.error)).with_context(cannot);
        }
        sync_parent(&self.target);
        Ok(())
    }
}

/// The cause of an I/O error without the temporary file's name, which tempfile appends to its
/// errors (` at path "..."`) and which means nothing to the user: messages name the target.
fn without_path(e: io::Error) -> io::Error {
    let text = e.to_string();
    match text.split_once(" at path \"") {
        Some((cause, _)) => io::Error::new(e.kind(), cause.to_string()),
        None => e,
    }
}

/// Asks for the permissions an ordinary new file gets: 0666, less the umask (which the OS
/// applies when it creates the file).
fn ask_new_file_permissions(builder: &mut tempfile::Builder<'_, '_>) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    #[cfg(not(unix))]
    let _ = builder;
}

/// Makes a rename durable by syncing its directory. Best effort: some file systems refuse to
/// sync a directory, and the file's own data is synced already.
fn sync_parent(path: &Path) {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// The files under `dir`, in sorted order, subdirectories included; symbolic links are listed
/// as files (the job decides about them), never followed into directories.
pub fn walk(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<io::Result<_>>()?;
    entries.sort();
    for path in entries {
        if fs::symlink_metadata(&path)?.is_dir() {
            found.extend(walk(&path)?);
        } else {
            found.push(path);
        }
    }
    Ok(found)
}
