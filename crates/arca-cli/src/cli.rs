//! Command-line definitions (clap), modelled on restic's.

use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand};

mod usage;
use usage::exit_with;

/// Parses the command line. An environment variable that is set but empty counts as unset, as
/// restic and systemd's `Environment=ARCA_PASSWORD_FILE=` expect: it was a usage error naming
/// a flag nobody typed, even for `arca version`.
pub fn parse(args: Vec<std::ffi::OsString>) -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let matches = unset_empty_env(Cli::command())
        .try_get_matches_from(args.iter())
        .unwrap_or_else(|e| exit_with(&e, &args));
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| exit_with(&e, &args))
}

fn unset_empty_env(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let empty = a
            .get_env()
            .is_some_and(|n| std::env::var_os(n).is_some_and(|v| v.is_empty()));
        if empty {
            a.env(clap::builder::Resettable::Reset)
        } else {
            a
        }
    })
    .mut_subcommands(unset_empty_env)
}

/// The environment variables arca reads, for `arca --help` and the manual page (those of
/// options are shown beside them too; the secrets are only read, never shown).
const ENVIRONMENT: &str = "\
Environment:
  ARCA_REPOSITORY, ARCA_PASSWORD_FILE, ARCA_PASSWORD_COMMAND, ARCA_CACHE_DIR
      as --repo, --password-file, --password-command, --cache-dir
  ARCA_PASSWORD          the repository password (after the file and the command)
  ARCA_FROM_REPOSITORY, ARCA_FROM_PASSWORD_FILE, ARCA_FROM_PASSWORD_COMMAND,
  ARCA_FROM_PASSWORD     the same for copy's source repository
  ARCA_NEW_PASSWORD_FILE, ARCA_NEW_PASSWORD
                         the new password of key add and key passwd
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_PROFILE,
  AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, AWS_DEFAULT_REGION, AWS_REGION
                         S3 credentials and region
  XDG_CACHE_HOME         the cache's parent folder (default ~/.cache)
  XDG_CONFIG_HOME        where -P looks for NAME.toml (default ~/.config), after the
                         current folder

Exit codes: 0 success; 1 failure; 2 usage error; 3 finished, but some files or blobs
could not be read or restored (they are listed; the rest is done); 10 no repository;
11 the repository is locked; 12 wrong password; 130 interrupted.";

/// arca: deduplicating, encrypted, incremental backups with fast restores.
#[derive(Debug, Parser)]
#[command(name = "arca", version, about, propagate_version = true, after_long_help = ENVIRONMENT)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub struct Global {
    /// Repository location: a folder (or local:/path), s3:https://host/bucket/prefix,
    /// sftp:user@host:/path or sftp://user@host:port//path
    #[arg(
        short = 'r',
        long = "repo",
        env = "ARCA_REPOSITORY",
        global = true,
        value_name = "REPO"
    )]
    pub repo: Option<String>,
    /// Read the repository password from a file (first line)
    #[arg(long, env = "ARCA_PASSWORD_FILE", global = true, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    /// Run a shell command that prints the repository password (first line of its output)
    #[arg(
        long,
        env = "ARCA_PASSWORD_COMMAND",
        global = true,
        value_name = "COMMAND",
        conflicts_with = "password_file"
    )]
    pub password_command: Option<String>,
    /// Read defaults from the profile NAME.toml (current folder, then $XDG_CONFIG_HOME/arca/),
    /// or from a .toml path (repeatable; later profiles win)
    #[arg(short = 'P', long = "use-profile", global = true, value_name = "NAME")]
    pub profiles: Vec<String>,
    /// Print less (no progress)
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Requests in flight to a remote repository at most (default: 16 for S3, 8 for SFTP)
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub connections: Option<u32>,
    /// Backend option KEY=VALUE (repeatable; spaces around KEY and VALUE are ignored):
    /// s3.bucket-lookup=auto|dns|path, s3.region, s3.storage-class, s3.profile, s3.timeout,
    /// s3.checksum=crc32c|md5|off, sftp.command, sftp.args, sftp.timeout
    #[arg(short = 'o', long = "option", global = true, value_name = "KEY=VALUE", value_parser = crate::util::backend_option_arg)]
    pub options: Vec<String>,
    /// Simulated per-request latency of the backend, e.g. 20ms (benchmarks)
    #[arg(long, global = true, value_name = "DURATION", value_parser = crate::util::duration_arg)]
    pub backend_latency: Option<String>,
    /// Simulated bandwidth cap of the backend in bytes/s, e.g. 100MB (benchmarks)
    #[arg(long, global = true, value_name = "BYTES", value_parser = crate::util::size_arg)]
    pub backend_bandwidth: Option<String>,
    /// Folder of the local cache of remote repositories (default: $XDG_CACHE_HOME/arca, or
    /// ~/.cache/arca)
    #[arg(long, env = "ARCA_CACHE_DIR", global = true, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Use no local cache: read everything from the repository
    #[arg(long, global = true)]
    pub no_cache: bool,
    /// Take no lock in commands that only read (for read-only repositories; unsafe while
    /// forget or prune may run); commands that write lock all the same
    #[arg(long, global = true)]
    pub no_lock: bool,
    /// When the repository is locked by another process, try again for up to this long
    /// (e.g. 5m, 2h) instead of failing at once
    #[arg(long, global = true, value_name = "DURATION", value_parser = crate::util::duration_arg)]
    pub retry_lock: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a new repository
    Init(InitArgs),
    /// Back up files and directories into a new snapshot
    Backup(Box<BackupArgs>),
    /// List snapshots
    Snapshots(SnapshotsArgs),
    /// List the entries of a snapshot
    Ls(LsArgs),
    /// Restore a snapshot under a target directory
    Restore(Box<RestoreArgs>),
    /// Verify the repository's structure and, with --read-data, all data
    Check(CheckArgs),
    /// Manage the repository's keys (passwords)
    Key(KeyArgs),
    /// Print repository structures, decrypted (for debugging)
    Cat(CatArgs),
    /// Remove snapshots by id or by a retention policy (--keep-*)
    Forget(Box<crate::commands::forget::ForgetArgs>),
    /// Remove data no snapshot uses: delete unused packs, repack mixed ones, rewrite the index
    Prune(crate::commands::prune::PruneArgs),
    /// Rebuild a damaged repository's index, or snapshots whose data is lost
    Repair(crate::commands::repair::RepairArgs),
    /// Save a snapshot of the directory listings no snapshot reaches (what forget dropped,
    /// before prune deletes it)
    Recover(crate::commands::recover::RecoverArgs),
    /// Remove stale locks (left by processes that are gone)
    Unlock(crate::commands::lock::UnlockArgs),
    /// List the repository's files of one type (snapshots, index, packs, keys, locks), or
    /// every blob of the index
    List(crate::commands::list::ListArgs),
    /// Find files and folders, or the users of a blob or tree, across snapshots
    Find(Box<crate::commands::find::FindArgs>),
    /// Show what changed between two snapshots
    Diff(Box<crate::commands::diff::DiffArgs>),
    /// Write a file of a snapshot to stdout, or a folder as a tar or zip archive
    Dump(Box<crate::commands::dump::DumpArgs>),
    /// Sizes, dedup and compression ratios, and restore fragmentation
    Stats(Box<crate::commands::stats::StatsArgs>),
    /// Copy snapshots from another repository into this one
    Copy(Box<crate::commands::copy::CopyArgs>),
    /// Add, remove or set the tags of snapshots
    Tag(Box<crate::commands::tag::TagArgs>),
    /// Rewrite snapshots without the paths matching --exclude, or with a new host or time
    Rewrite(Box<crate::commands::rewrite::RewriteArgs>),
    /// Browse the snapshots as a read-only file system (FUSE)
    Mount(Box<crate::commands::mount::MountArgs>),
    /// Serve the local web interface (browse, restore, back up, forget, prune, check)
    Ui(Box<crate::commands::ui::UiArgs>),
    /// List the local caches of remote repositories; --cleanup removes the old ones
    Cache(crate::commands::cache::CacheArgs),
    /// Print the version and the platform arca was built for
    Version(crate::commands::version::VersionArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions(crate::commands::generate::CompletionsArgs),
    /// Write the manual pages (roff), generated from the command-line definition
    Man(crate::commands::generate::ManArgs),
}

/// Hidden key-derivation cost options (tests use cheap ones).
#[derive(Debug, Args, Clone, Copy)]
pub struct KdfArgs {
    /// Argon2id memory in KiB
    #[arg(long, hide = true, default_value_t = arca_format::KdfParams::DEFAULT_MEMORY_KIB)]
    pub kdf_memory_kib: u32,
    /// Argon2id passes
    #[arg(long, hide = true, default_value_t = arca_format::KdfParams::DEFAULT_ITERATIONS)]
    pub kdf_iterations: u32,
    /// Argon2id lanes (at most an eighth of the memory in KiB)
    #[arg(long, hide = true, default_value_t = arca_format::KdfParams::DEFAULT_PARALLELISM)]
    pub kdf_parallelism: u32,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Default zstd compression level for data (0 = off, 1-22; -7 to -1 = faster). A blob
    /// whose sample gains under 1/64 at this level over level 1 is compressed at level 1, an
    /// incompressible one is stored as is
    #[arg(long, default_value_t = 3, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(-7..=22))]
    pub compression: i32,
    /// Target pack size, e.g. 16MiB
    #[arg(long, default_value = "16MiB", value_parser = crate::util::size_arg)]
    pub pack_size: String,
    /// Minimum chunk size
    #[arg(long, default_value = "256KiB", value_parser = crate::util::size_arg)]
    pub chunk_min: String,
    /// Average chunk size (a power of two)
    #[arg(long, default_value = "1MiB", value_parser = crate::util::size_arg)]
    pub chunk_avg: String,
    /// Maximum chunk size
    #[arg(long, default_value = "4MiB", value_parser = crate::util::size_arg)]
    pub chunk_max: String,
    #[command(flatten)]
    pub kdf: KdfArgs,
    /// Cipher sealing the data, trees, index and snapshots: `auto` takes xaes-256-gcm where
    /// the processor has AES instructions, else xchacha20-poly1305 (the only cipher of
    /// repositories made before config version 3, which older arca versions can read)
    #[arg(long, value_enum, default_value_t = CipherArg::Auto)]
    pub cipher: CipherArg,
    /// Chunk (and identify blobs) exactly as the repository of --from-repo does, so that
    /// `copy` between the two deduplicates
    #[arg(long, requires = "from_repo", conflicts_with_all = ["chunk_min", "chunk_avg", "chunk_max"])]
    pub copy_chunker_params: bool,
    #[command(flatten)]
    pub from: crate::commands::copy::FromRepoArgs,
    /// Print the new repository's id and location as one JSON object
    #[arg(long)]
    pub json: bool,
}

/// `init --cipher`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CipherArg {
    /// The fastest on this processor
    Auto,
    /// XAES-256-GCM (c2sp.org/XAES-256-GCM)
    #[value(name = "xaes-256-gcm")]
    Xaes256Gcm,
    /// XChaCha20-Poly1305
    #[value(name = "xchacha20-poly1305")]
    XChaCha20Poly1305,
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Files and directories to back up
    #[arg(
        value_name = "PATH",
        required_unless_present_any = ["files_from", "files_from_verbatim", "files_from_raw", "stdin"]
    )]
    pub paths: Vec<PathBuf>,
    /// Read the paths to back up from a file, one per line ('#' comments, spaces around a
    /// path trimmed; '-' for stdin)
    #[arg(long = "files-from", value_name = "FILE")]
    pub files_from: Vec<PathBuf>,
    /// Read the paths to back up from a file, one per line, exactly as written
    #[arg(long = "files-from-verbatim", value_name = "FILE")]
    pub files_from_verbatim: Vec<PathBuf>,
    /// Read the paths to back up from a file, separated by NUL bytes (`find -print0`)
    #[arg(long = "files-from-raw", value_name = "FILE")]
    pub files_from_raw: Vec<PathBuf>,
    /// Back up standard input as one file (see --stdin-filename)
    #[arg(
        long,
        conflicts_with_all = ["paths", "files_from", "files_from_verbatim", "files_from_raw"]
    )]
    pub stdin: bool,
    /// Name of the file --stdin creates in the snapshot, at its root or, named `dir/name`,
    /// in folders made for it
    #[arg(
        long,
        value_name = "NAME",
        default_value = "stdin",
        requires = "stdin",
        value_parser = clap::builder::TypedValueParser::try_map(clap::builder::OsStringValueParser::new(), crate::util::stdin_path_arg)
    )]
    pub stdin_filename: std::ffi::OsString,
    #[command(flatten)]
    pub exclude: ExcludeArgs,
    /// Store directories holding a CACHEDIR.TAG (with its signature) with that file alone
    #[arg(long)]
    pub exclude_caches: bool,
    /// Store directories holding an entry NAME (of any kind, as restic) with that entry alone;
    /// NAME:HEADER needs a file starting with HEADER (repeatable)
    #[arg(long = "exclude-if-present", value_name = "NAME[:HEADER]", value_parser = crate::util::non_empty_arg)]
    pub exclude_if_present: Vec<String>,
    /// Leave out files larger than this (e.g. 2GiB)
    #[arg(long, value_name = "SIZE", value_parser = crate::util::size_arg, allow_hyphen_values = true)]
    pub exclude_larger_than: Option<String>,
    /// Read and count everything, write nothing to the repository
    #[arg(short = 'n', long)]
    pub dry_run: bool,
    /// Write no snapshot when nothing changed since the parent snapshot
    #[arg(long)]
    pub skip_if_unchanged: bool,
    /// Do not count the files to back up first (the progress then shows no percentage and
    /// no ETA, and the scan's reads of the file system are saved)
    #[arg(long)]
    pub no_scan: bool,
    /// List each new and modified file (-v), and the unchanged ones too (-vv); with --json,
    /// `verbose_status` lines
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Add tags to the snapshot, e.g. a,b (repeatable)
    #[arg(long = "tag", value_name = "TAG[,TAG...]")]
    pub tags: Vec<String>,
    /// Host name to record
    #[arg(long = "host", value_name = "HOST")]
    pub host: Option<String>,
    /// Time to record instead of now: "2006-01-02 15:04:05" (local) or RFC 3339 (importing
    /// older backups)
    #[arg(long, value_name = "TIME", value_parser = crate::util::snapshot_time_arg)]
    pub time: Option<String>,
    /// Use this snapshot as parent instead of the latest of this host holding at least the
    /// same paths and not newer than the backup (`latest` means that one)
    #[arg(long, value_name = "SNAPSHOT")]
    pub parent: Option<String>,
    /// Read all files instead of trusting the parent snapshot's metadata (the parent is still
    /// recorded, and files read again count as changed, not new, unlike restic)
    #[arg(long)]
    pub force: bool,
    /// Trust the parent snapshot for a file whose ctime alone changed (after a `chmod -R`, or
    /// on file systems that set ctimes by themselves)
    #[arg(long)]
    pub ignore_ctime: bool,
    /// Trust the parent snapshot for a file whose inode number or ctime alone changed (FUSE and
    /// network mounts that number inodes anew and make up ctimes); implies --ignore-ctime, as
    /// restic's
    #[arg(long)]
    pub ignore_inode: bool,
    /// zstd level for this backup (overrides the repository default; -7 to 22, 0 = off)
    #[arg(long, allow_negative_numbers = true, value_parser = clap::value_parser!(i32).range(-7..=22))]
    pub compression: Option<i32>,
    /// Stay on the file systems of the given paths: folders on others are kept empty (a file
    /// bind-mounted from another file system is kept, unlike restic: overlay file systems
    /// give files another device than their folders)
    #[arg(short = 'x', long)]
    pub one_file_system: bool,
    /// Files read at once [default: 12, of which at most 4 of 32 KiB or more]
    #[arg(long, value_name = "N", value_parser = crate::util::thread_count)]
    pub read_concurrency: Option<usize>,
    /// Packs uploaded at once [default: 1 to a local disk, 2 with network round trips]
    #[arg(long, value_name = "N", value_parser = crate::util::thread_count)]
    pub upload_queue: Option<usize>,
    /// Compression and sealing threads [default: one per core]
    #[arg(long, value_name = "N", value_parser = crate::util::thread_count)]
    pub workers: Option<usize>,
    /// Memory for data in flight between reading and uploading, e.g. 512MiB [default: 256MiB,
    /// more for repositories of larger packs or chunks]
    #[arg(long, value_name = "SIZE", value_parser = crate::util::size_arg)]
    pub memory: Option<String>,
    /// Capping: within each ~20 MiB segment, reference at most N packs of earlier backups and
    /// store blocks found in other old packs again (bounds restore fragmentation; 0 = off)
    #[arg(long, value_name = "N")]
    pub cap: Option<usize>,
    /// Print where each stage of the pipeline spent its time
    #[arg(long)]
    pub profile: bool,
    /// Print the summary as JSON
    #[arg(long)]
    pub json: bool,
}

/// Exclude patterns, as backup and rewrite take them (restic's syntax).
#[derive(Debug, Args, Clone, Default)]
pub struct ExcludeArgs {
    /// Exclude paths matching a pattern (repeatable)
    #[arg(short = 'e', long = "exclude", value_name = "PATTERN", value_parser = crate::util::TextPattern)]
    pub excludes: Vec<String>,
    /// Exclude paths matching a pattern, ignoring case (repeatable)
    #[arg(long = "iexclude", value_name = "PATTERN", value_parser = crate::util::TextPattern)]
    pub iexcludes: Vec<String>,
    /// Read exclude patterns from a file, one per line ('#' comments)
    #[arg(long = "exclude-file", value_name = "FILE")]
    pub exclude_files: Vec<PathBuf>,
    /// Read case-insensitive exclude patterns from a file
    #[arg(long = "iexclude-file", value_name = "FILE")]
    pub iexclude_files: Vec<PathBuf>,
}

/// Snapshot selection filters.
#[derive(Debug, Args, Clone, Default)]
pub struct FilterArgs {
    /// Only snapshots of this host (repeatable: any of them)
    #[arg(long = "host", value_name = "HOST")]
    pub hosts: Vec<String>,
    /// Only snapshots with these tags, e.g. a,b for both (repeatable: any of the lists; an
    /// empty value selects the snapshots without tags)
    #[arg(long = "tag", value_name = "TAG[,TAG...]")]
    pub tags: Vec<String>,
    /// Only snapshots including this path (repeatable)
    #[arg(long = "path", value_name = "PATH")]
    pub paths: Vec<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct SnapshotsArgs {
    /// Only these snapshots (id, id prefix or "latest"); default: all that pass the filters
    #[arg(value_name = "SNAPSHOT")]
    pub snapshots: Vec<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Only the newest N snapshots of each host and set of paths (within each group with
    /// --group-by; 0: all)
    #[arg(long, value_name = "N")]
    pub latest: Option<usize>,
    /// Compact table: tags on one line, no paths
    #[arg(short = 'c', long)]
    pub compact: bool,
    /// List the snapshots in groups sharing these fields: host, paths, tags (comma-separated)
    #[arg(short = 'g', long, value_name = "FIELDS", value_parser = crate::util::group_by_arg)]
    pub group_by: Option<arca_maintenance::forget::GroupBy>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Snapshot id, id prefix or "latest"; ID:SUBFOLDER lists that folder as the root
    pub snapshot: std::ffi::OsString,
    /// List only these paths: a file itself, a folder with its entries (everything below it
    /// with --recursive)
    #[arg(value_name = "PATH")]
    pub listed: Vec<PathBuf>,
    /// With paths: list everything below the folders, not only their entries (the default
    /// without paths)
    #[arg(long)]
    pub recursive: bool,
    /// Long listing (mode, owner, size, time)
    #[arg(short, long)]
    pub long: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Print JSON lines
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Snapshot id, id prefix or "latest"; ID:SUBFOLDER restores that folder's contents
    /// directly into the target, ID:PATH/FILE that one file (or symlink, or special file)
    pub snapshot: std::ffi::OsString,
    /// Directory to restore into
    #[arg(short, long, value_name = "DIR")]
    pub target: PathBuf,
    /// Restore only paths matching a pattern (repeatable)
    #[arg(short = 'i', long = "include", value_name = "PATTERN", value_parser = crate::util::TextPattern)]
    pub includes: Vec<String>,
    /// Skip paths matching a pattern (repeatable)
    #[arg(short = 'e', long = "exclude", value_name = "PATTERN", value_parser = crate::util::TextPattern)]
    pub excludes: Vec<String>,
    /// Like --include, regardless of case (repeatable)
    #[arg(long = "iinclude", value_name = "PATTERN", value_parser = crate::util::TextPattern)]
    pub iincludes: Vec<String>,
    /// Like --exclude, regardless of case (repeatable)
    #[arg(long = "iexclude", value_name = "PATTERN", value_parser = crate::util::TextPattern)]
    pub iexcludes: Vec<String>,
    /// Read --include patterns from a file, one per line (repeatable)
    #[arg(long = "include-file", value_name = "FILE")]
    pub include_files: Vec<PathBuf>,
    /// Read --exclude patterns from a file, one per line (repeatable)
    #[arg(long = "exclude-file", value_name = "FILE")]
    pub exclude_files: Vec<PathBuf>,
    /// Read --iinclude patterns from a file, one per line (repeatable)
    #[arg(long = "iinclude-file", value_name = "FILE")]
    pub iinclude_files: Vec<PathBuf>,
    /// Read --iexclude patterns from a file, one per line (repeatable)
    #[arg(long = "iexclude-file", value_name = "FILE")]
    pub iexclude_files: Vec<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// What to do with files already in the target: if-changed (trust size and mtime, else
    /// hash block by block and replace only wrong blocks; symlinks alike: trusted by size and
    /// mtime, else read), always (hash every file, read every symlink), if-newer,
    /// never (files a stopped or failed restore left unfinished are dated before their
    /// snapshot time, so every mode but never looks at them again; after a restore killed
    /// outright, by SIGKILL or a power cut, which dates nothing, rerun with if-changed or
    /// always). A hard-linked file that if-newer or never leaves as it is stays the file of
    /// its group: its missing names are linked to it, whatever it holds
    #[arg(long, value_name = "MODE", default_value = "if-changed", value_parser =
        clap::builder::PossibleValuesParser::new(["if-changed", "always", "if-newer", "never"])
            .try_map(|s| s.parse::<arca_restore::Overwrite>()))]
    pub overwrite: arca_restore::Overwrite,
    /// Remove entries that the snapshot does not have from the restored backup folders (not
    /// from the folders above them, such as the target itself when the snapshot is of one path),
    /// never what --include/--exclude leave out, even inside a folder it removes; with
    /// --include it removes the matching extra entries inside any folder (--include '*.txt'
    /// takes notes/f.txt, notes stays). ID:FOLDER into / is refused with it
    #[arg(long)]
    pub delete: bool,
    /// Print what would be fetched, written and deleted, and change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Take blocks from this local tree (an older restore, the original source) when the file
    /// at the same path holds them at the same offsets (a file with bytes inserted before
    /// them offers none); checked by hash before use (repeatable)
    #[arg(long = "reuse-from", value_name = "DIR", value_parser = crate::util::ReuseDir)]
    pub reuse_from: Vec<PathBuf>,
    /// Read every restored file back and check it against the snapshot
    #[arg(long)]
    pub verify: bool,
    /// Print, per stage, time busy and waiting, and the run's fetch, cache and copy figures
    #[arg(long)]
    pub profile: bool,
    /// Print every entry restored, updated or deleted
    #[arg(short, long)]
    pub verbose: bool,
    /// Ranged reads in flight (default: from the backend: 8 local, 16 remote)
    #[arg(long, value_name = "N", value_parser = crate::util::thread_count)]
    pub fetchers: Option<usize>,
    /// Threads that decrypt, verify and write (default: one per core)
    #[arg(long, value_name = "N", value_parser = crate::util::thread_count)]
    pub workers: Option<usize>,
    /// Memory for block data: reads in flight and cached blocks (default: 1/64 of RAM,
    /// 32 MiB to 256 MiB)
    #[arg(long, value_name = "BYTES", value_parser = crate::util::size_arg)]
    pub memory: Option<String>,
    /// Blobs of a pack closer than this are read in one request (default: 256KiB local,
    /// latency x bandwidth remote)
    #[arg(long, value_name = "BYTES", value_parser = crate::util::size_arg)]
    pub read_gap: Option<String>,
    /// Largest single read (default: 2MiB local, 16MiB remote)
    #[arg(long, value_name = "BYTES", hide = true, value_parser = crate::util::size_arg)]
    pub max_read: Option<String>,
    /// Capacity of the channels between stages
    #[arg(long, value_name = "N", hide = true, value_parser = crate::util::at_least_one)]
    pub queue: Option<usize>,
    /// Bytes of file content admitted ahead of completion
    #[arg(long, value_name = "BYTES", hide = true, value_parser = crate::util::size_arg)]
    pub window: Option<String>,
    /// Report a stall after this long without progress (default: 60s)
    #[arg(long, value_name = "DURATION", hide = true, value_parser = crate::util::duration_arg)]
    pub stall_after: Option<String>,
    /// Do not reserve disk space for files before writing them
    #[arg(long)]
    pub no_preallocate: bool,
    /// When the middle of large blocks of new files goes straight to the disk (O_DIRECT):
    /// auto (when the restore writes more than the kernel keeps dirty in memory before it
    /// slows writers down), always, never
    #[arg(long, value_name = "MODE", default_value = "auto", value_parser =
        clap::builder::PossibleValuesParser::new(["auto", "always", "never"])
            .try_map(|s| s.parse::<arca_restore::DirectIo>()))]
    pub direct_io: arca_restore::DirectIo,
    /// Same as --direct-io never
    #[arg(long, conflicts_with = "direct_io")]
    pub no_direct_io: bool,
    /// Bytes of pack ranges announced to a local repository ahead of the reads (default:
    /// two rounds of reads; 0: none)
    #[arg(long, value_name = "BYTES", hide = true, value_parser = crate::util::size_arg)]
    pub prefetch: Option<String>,
    /// Print progress and the summary as JSON lines
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Read and verify every blob of every pack
    #[arg(long)]
    pub read_data: bool,
    /// Read a part of the packs: group n/m (by the first byte of the pack id, as restic),
    /// a random x%, or random packs adding up to a size (500M, 2G)
    #[arg(long, value_name = "SUBSET", conflicts_with = "read_data", value_parser = crate::util::subset_arg, allow_hyphen_values = true)]
    pub read_data_subset: Option<String>,
    /// Print the result as JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(subcommand)]
    pub command: KeyCommand,
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// List keys
    List {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Add a key for a new password
    Add {
        /// Read the new password from a file
        #[arg(long, env = "ARCA_NEW_PASSWORD_FILE", value_name = "FILE")]
        new_password_file: Option<PathBuf>,
        #[command(flatten)]
        owner: KeyOwnerArgs,
        #[command(flatten)]
        kdf: KdfArgs,
    },
    /// Remove a key
    Remove {
        /// Key id or unique prefix
        id: String,
    },
    /// Change the password of the key in use
    Passwd {
        /// Read the new password from a file
        #[arg(long, env = "ARCA_NEW_PASSWORD_FILE", value_name = "FILE")]
        new_password_file: Option<PathBuf>,
        #[command(flatten)]
        owner: KeyOwnerArgs,
        #[command(flatten)]
        kdf: KdfArgs,
    },
}

/// The names a new key records (`key list` shows them), as restic's `key add`.
#[derive(Debug, Args, Clone)]
pub struct KeyOwnerArgs {
    /// The user name the new key records (default: the current user)
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The host name the new key records (default: this host's)
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

#[derive(Debug, Args)]
pub struct CatArgs {
    #[command(subcommand)]
    pub what: CatWhat,
}

#[derive(Debug, Subcommand)]
pub enum CatWhat {
    /// The repository configuration
    Config,
    /// A snapshot
    Snapshot {
        /// Snapshot id, prefix or "latest"
        id: String,
    },
    /// An index file
    Index {
        /// Index file id
        id: String,
    },
    /// A pack's header
    Pack {
        /// Pack id
        id: String,
    },
    /// The decrypted master key: the master secret and its subkeys (anyone who has it can
    /// read every snapshot; keep it as safe as the repository's password)
    Masterkey,
    /// A key file (without secrets)
    Key {
        /// Key id or prefix
        id: String,
    },
    /// A lock: who holds it, since when, and whether it is stale
    Lock {
        /// Lock id or unique prefix (see `arca list locks`)
        id: String,
    },
    /// A tree blob, decoded
    Tree {
        /// Tree blob id, or (as restic) a snapshot: ID or ID:SUBFOLDER
        id: String,
    },
    /// A data blob's plaintext, raw
    Blob {
        /// Blob id
        id: String,
    },
}
