//! `arca dump`: a file of a snapshot to stdout as it is, or a folder (or the whole snapshot) as
//! a tar or zip archive, streamed with bounded memory; `--target FILE` writes a file instead.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use arca_browse::dump::{Archive, Dump, DumpError, Target};
use arca_format::text::shown;
use clap::{Args, ValueEnum};

use crate::cli::{FilterArgs, Global};
use crate::util;

/// Archive formats of `--archive`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArchiveArg {
    /// POSIX pax tar: modes, owners, times in nanoseconds, links, devices, FIFOs, xattrs
    Tar,
    /// Zip (streamed): modes, owners (unzip -X), mtimes, symlinks; no hard links, FIFOs or devices
    Zip,
}

/// Options of `arca dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// Snapshot id, id prefix or "latest"; ID:SUBFOLDER reads PATH inside that folder
    pub snapshot: std::ffi::OsString,
    /// The file or folder in the snapshot ("/" for the whole snapshot)
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Archive format for a folder [default: tar]; given with a file, the file is archived
    /// alone
    #[arg(short, long, value_enum, value_name = "FORMAT")]
    pub archive: Option<ArchiveArg>,
    /// Write to FILE instead of stdout (written beside it and renamed into place once whole;
    /// `-` is stdout)
    #[arg(short, long, value_name = "FILE")]
    pub target: Option<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Two blobs of a pack closer than this are read as one range (default: from the backend)
    #[arg(long, hide = true, value_name = "SIZE", value_parser = crate::util::size_arg)]
    pub read_gap: Option<String>,
    /// Largest ranged read (default: from the backend)
    #[arg(long, hide = true, value_name = "SIZE", value_parser = crate::util::size_arg)]
    pub max_read: Option<String>,
    /// Ranged reads in flight (default: 4, 8 behind a network)
    #[arg(long, hide = true, value_name = "N")]
    pub reads: Option<usize>,
}

/// Where `--target` output goes. A regular file (or a new one) is written beside the target
/// and renamed onto it once complete, so a failed dump leaves the old file whole; the temporary
/// file is removed if dropped before. Anything else (a device such as `/dev/null`, a FIFO, a
/// socket, or a dangling symlink) is opened and written through, as restic does: renaming
/// onto it would replace the device or link instead of writing to it.
struct Pending {
    tmp: Option<PathBuf>,
    target: PathBuf,
    /// The target as given, which errors name (the temporary file is an internal name).
    shown: PathBuf,
    done: bool,
}

impl Pending {
    fn create(target: &Path) -> Result<(Self, File)> {
        let name = target
            .file_name()
            .with_context(|| format!("--target {}: not a file name", shown(target)))?;
        // Refused before anything is read: the rename at the end could not replace it.
        if target.as_os_str().as_bytes().ends_with(b"/") {
            bail!("--target {}: names a folder (name a file)", shown(target));
        }
        let through = |what: &str| -> Result<(Self, File)> {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(target)
                .with_context(|| format!("cannot open {} ({what})", shown(target)))?;
            let p = Pending {
                tmp: None,
                target: target.to_path_buf(),
                shown: target.to_path_buf(),
                done: false,
            };
            Ok((p, f))
        };
        // What the name leads to: a symlink is written through to its target.
        let (real, mode) = match std::fs::metadata(target) {
            Ok(m) if m.is_dir() => {
                bail!("--target {}: is a folder (name a file)", shown(target))
            }
            Ok(m) if !m.is_file() => return through("not a regular file: written through"),
            Ok(m) => {
                let real = std::fs::canonicalize(target)
                    .with_context(|| format!("cannot resolve {}", shown(target)))?;
                (real, Some(m.permissions()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if std::fs::symlink_metadata(target).is_ok() {
                    return through("a symlink to a missing file: created where it points");
                }
                (target.to_path_buf(), None)
            }
            Err(e) => {
                return Err(e).with_context(|| format!("cannot look at {}", shown(target)));
            }
        };
        let real_name = real.file_name().unwrap_or(name);
        let suffix = format!(".arca-dump-{}", std::process::id());
        // A name near the file system's limit (255 bytes) leaves no room for the suffix:
        // then the temporary file is named by the suffix alone (a 240-byte NAME was refused).
        let mut tmp_name = OsString::new();
        if real_name.len() + 1 + suffix.len() <= 255 {
            tmp_name.push(".");
            tmp_name.push(real_name);
        }
        tmp_name.push(&suffix);
        let tmp = real.with_file_name(tmp_name);
        // Ctrl-C ends the process without destructors: it removes the partial file itself.
        crate::lock_signals::remove_on_signal(&tmp, super::INTERRUPTED);
        // Named as given: the temporary file beside it fails for the same reason.
        let f = File::create(&tmp).with_context(|| format!("cannot create {}", shown(target)))?;
        let pending = Pending {
            tmp: Some(tmp),
            target: real,
            shown: target.to_path_buf(),
            done: false,
        };
        // The file replaced keeps its permissions.
        if let Some(mode) = mode {
            f.set_permissions(mode)
                .with_context(|| format!("cannot set the permissions of {}", shown(target)))?;
        }
        Ok((pending, f))
    }

    fn commit(mut self, f: File) -> Result<()> {
        let Some(tmp) = &self.tmp else {
            // A device or FIFO: nothing to sync or rename.
            self.done = true;
            return Ok(());
        };
        f.sync_all()
            .with_context(|| format!("cannot write {}", shown(&self.shown)))?;
        drop(f);
        std::fs::rename(tmp, &self.target).with_context(|| {
            format!(
                "cannot put {} in place (renaming the finished dump onto it)",
                shown(&self.shown)
            )
        })?;
        crate::lock_signals::keep_on_signal(tmp);
        self.done = true;
        Ok(())
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let (false, Some(tmp)) = (self.done, &self.tmp) {
            let _ = std::fs::remove_file(tmp);
            crate::lock_signals::keep_on_signal(tmp);
        }
    }
}

pub fn run(g: &Global, a: &DumpArgs) -> Result<u8> {
    let opened = util::open(g)?;
    let repo = &opened.repo;
    let _lock = util::lock(g, repo, arca_repo::LockKind::Shared, "dump")?;
    // `ID:SUBFOLDER` (as restic): PATH is looked up inside that folder. The snapshot is found
    // before the index is read (see subfolder::find).
    let spec = std::ffi::OsStr::new(&a.snapshot);
    let found = super::subfolder::find(repo, spec, &super::filter(&a.filter))?;
    let index = repo.load_index()?;
    let resolved = super::subfolder::resolve(repo, &index, found)?;
    let (id, tree) = (resolved.id, resolved.tree());
    let mut dump = Dump::new(repo, &index);
    if let Some(g) = &a.read_gap {
        dump.read_gap = util::parse_size(g)?;
    }
    if let Some(m) = &a.max_read {
        dump.max_read = util::parse_size(m)?.max(1);
    }
    if let Some(n) = a.reads {
        dump.reads_in_flight = n.max(1);
    }
    let target = match dump.resolve(tree, &a.path) {
        Ok(t) => t,
        Err(DumpError::NotFound { path }) => {
            let hint = resolved.missing_hint(repo, &index, a.path.as_os_str().as_bytes());
            bail!("{} is not in snapshot {}{hint}", shown(&path), id.short())
        }
        Err(e) => return Err(e).context(format!("snapshot {}", id.short())),
    };
    let archive = match (a.archive, target.is_folder()) {
        (Some(ArchiveArg::Tar), _) | (None, true) => Some(Archive::Tar),
        (Some(ArchiveArg::Zip), _) => Some(Archive::Zip),
        (None, false) => None,
    };
    if let (Target::Entry { path, node }, None) = (&target, archive)
        && node.kind() != arca_format::NodeKind::File
    {
        use arca_format::NodeKind as K;
        // Only the archives that can hold it are proposed (zip holds no FIFO or device, and
        // neither holds a socket).
        let how = match node.kind() {
            K::Symlink => ": dump it with --archive tar or zip",
            K::Socket => " (a socket has no content or archive entry)",
            _ => ": dump it with --archive tar",
        };
        bail!(
            "{} is a {}, not a file{how}",
            shown(path),
            node.kind().name()
        );
    }
    // Archived alone, an entry the archive cannot hold gave an empty archive (and a warning)
    // with success; refused before anything is written.
    if let Some(Err(e)) = archive.map(|kind| target.check_archive(kind)) {
        let hint = match e {
            DumpError::CannotHold { tar_can: true, .. } => " (dump it with --archive tar)",
            _ => "",
        };
        bail!("{e}{hint}");
    }
    // A listing or a file that cannot be read is named with its snapshot, as when the path
    // is looked up (it was "/: read …" for a whole snapshot).
    let in_snapshot =
        |e: DumpError| anyhow::Error::new(e).context(format!("snapshot {}", id.short()));
    // `--target -` is standard output, as `-` is for every file argument (it made a file
    // named `-`).
    let report = match a.target.as_deref().filter(|t| *t != Path::new("-")) {
        Some(t) => {
            let (pending, file) = Pending::create(t)?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            // A write that fails names the file written (stdout needs no name).
            let report = dump.write(&target, archive, &mut w).map_err(|e| match e {
                arca_browse::dump::DumpError::Write { what, source } => {
                    anyhow::anyhow!("writing the {what} {}: {source}", shown(t))
                }
                e => in_snapshot(e),
            })?;
            let file = w
                .into_inner()
                .map_err(|e| e.into_error())
                .with_context(|| format!("cannot write {}", shown(t)))?;
            pending.commit(file)?;
            report
        }
        None => {
            let stdout = std::io::stdout();
            if let Some(kind) = archive
                && stdout.is_terminal()
            {
                bail!(
                    "stdout is a terminal: not writing a {} archive there (redirect it, or use --target FILE)",
                    kind.name()
                );
            }
            // Straight to the descriptor: stdout's own buffer flushes at every newline.
            let fd = stdout
                .as_fd()
                .try_clone_to_owned()
                .context("cannot use stdout")?;
            let mut w = BufWriter::with_capacity(1 << 20, File::from(fd));
            // A write that fails says it was standard output's (the error is kept whole, so a
            // closed pipe is still recognised).
            let report = dump.write(&target, archive, &mut w).map_err(|e| match e {
                DumpError::Write { what, source } => anyhow::Error::new(source)
                    .context(format!("cannot write the {what} to standard output")),
                e => in_snapshot(e),
            })?;
            w.flush()
                .context("cannot write the dump to standard output")?;
            report
        }
    };
    for s in &report.skipped {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("warning: {}: {}, left out", shown(&s.path), s.reason);
        }
    }
    Ok(0)
}
