//! The server's state: the repository (opened with the command line's password or the one the
//! page was given), the index (reloaded when the repository's index files change), the jobs.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use arca_backend::{Backend, FileType};
use arca_format::Id;
use arca_repo::{CacheMode, Index, LockKind, RepoError, Repository};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use zeroize::Zeroizing;

use crate::UiOptions;
use crate::auth::Security;
use crate::jobs::JobTable;

/// An error answered to a request: a status and one readable line.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
    /// The repository is not open yet: the page asks for the password.
    pub needs_password: bool,
}

impl ApiError {
    /// 400: bad input (names the value).
    pub fn bad(message: impl Into<String>) -> Self {
        Self::with(StatusCode::BAD_REQUEST, message)
    }
    /// 404: no such snapshot, path or job.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::with(StatusCode::NOT_FOUND, message)
    }
    /// 500: the repository or the disk failed.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::with(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
    /// Any status.
    pub fn with(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            needs_password: false,
        }
    }
}

impl From<arca_repo::RepoError> for ApiError {
    fn from(e: arca_repo::RepoError) -> Self {
        use arca_repo::RepoError as E;
        let status = match &e {
            E::NoSuchSnapshot(_) | E::NoSnapshotPasses { .. } | E::AmbiguousSnapshot { .. } => {
                StatusCode::NOT_FOUND
            }
            E::SnapshotWithFolder { .. } => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::with(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": self.message,
            "needs_password": self.needs_password,
        });
        (self.status, axum::Json(body)).into_response()
    }
}

/// The repository as far as it could be opened.
enum Slot {
    Open {
        repo: Arc<Repository>,
        password: Zeroizing<String>,
    },
    Closed {
        error: Option<String>,
    },
}

/// Everything the handlers share.
pub struct App {
    /// Token, CSRF token, cookie, hosts.
    pub sec: Security,
    /// The repository's location, as the backend names it.
    pub location: String,
    backend: Arc<dyn Backend>,
    cache: CacheMode,
    markers: Option<PathBuf>,
    no_lock: bool,
    retry_lock: Option<Duration>,
    slot: Mutex<Slot>,
    index: Mutex<Option<(Vec<Id>, Arc<Index>)>>,
    /// Long operations.
    pub jobs: JobTable,
    /// Where the profiles are.
    pub profiles_dir: Option<PathBuf>,
    /// The command line's check of a profile ([`crate::UiOptions::profile_check`]).
    pub profile_check: Option<crate::ProfileCheck>,
    /// The summary of the last check run from the page.
    pub last_check: Mutex<Option<serde_json::Value>>,
    /// The password the command line gave, tried on the first request.
    initial: Mutex<Option<Zeroizing<String>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl App {
    /// The state of a server started with `opts`.
    pub fn new(opts: &UiOptions, sec: Security) -> Self {
        let profiles_dir = opts.profiles_dir.clone().or_else(|| {
            std::env::var_os("XDG_CONFIG_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
                .map(|d| d.join("arca"))
        });
        App {
            sec,
            location: opts.backend.location(),
            backend: Arc::clone(&opts.backend),
            cache: opts.cache.clone(),
            markers: opts.restore_markers.clone().or_else(|| {
                arca_repo::cache::restore_markers(match &opts.cache {
                    CacheMode::Dir(d) => Some(d.as_path()),
                    _ => None,
                })
            }),
            no_lock: opts.no_lock,
            retry_lock: opts.retry_lock,
            slot: Mutex::new(Slot::Closed { error: None }),
            index: Mutex::new(None),
            jobs: JobTable::default(),
            profiles_dir,
            profile_check: opts.profile_check.clone(),
            last_check: Mutex::new(None),
            initial: Mutex::new(opts.password.clone()),
        }
    }

    /// Opens the repository with `password`; the error is one readable line.
    pub fn open(&self, password: &str) -> Result<(), ApiError> {
        match Repository::open_cached(Arc::clone(&self.backend), password.as_bytes(), &self.cache) {
            Ok(repo) => {
                *lock(&self.slot) = Slot::Open {
                    repo: Arc::new(repo),
                    password: Zeroizing::new(password.to_string()),
                };
                *lock(&self.index) = None;
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                // A mistyped password leaves a repository that is open as it is.
                let mut slot = lock(&self.slot);
                if let Slot::Closed { error } = &mut *slot {
                    *error = Some(msg.clone());
                }
                // 401 says the password (or token) is wrong: a repository that is missing or
                // cannot be reached is not, and is answered as the other requests answer it.
                let status = if matches!(e, RepoError::WrongPassword { .. }) {
                    StatusCode::UNAUTHORIZED
                } else {
                    StatusCode::SERVICE_UNAVAILABLE
                };
                Err(ApiError::with(status, msg))
            }
        }
    }

    /// The open repository; on the first call, opens it with the command line's password.
    /// Blocking (call from a blocking task).
    pub fn repo(&self) -> Result<Arc<Repository>, ApiError> {
        if let Some(pw) = lock(&self.initial).take() {
            let _ = self.open(&pw);
        }
        match &*lock(&self.slot) {
            Slot::Open { repo, .. } => Ok(Arc::clone(repo)),
            Slot::Closed { error } => Err(ApiError {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: error.clone().unwrap_or_else(|| {
                    "the repository is not open: enter its password".to_string()
                }),
                needs_password: true,
            }),
        }
    }

    /// Where restores keep the marker that tells, after a reboot, which files may not have
    /// reached the disk (arca-restore's `durable`): beside the cache, as the command line's.
    pub fn restore_markers(&self) -> Option<std::path::PathBuf> {
        self.markers.clone()
    }

    /// The repository opened again without the local cache (check and prune read the
    /// repository's own files, as the command line's do). Blocking.
    pub fn repo_uncached(&self) -> Result<Repository, ApiError> {
        self.repo()?;
        let pw = match &*lock(&self.slot) {
            Slot::Open { password, .. } => password.clone(),
            Slot::Closed { error } => {
                return Err(ApiError::failed(
                    error
                        .clone()
                        .unwrap_or_else(|| "the repository is not open".into()),
                ));
            }
        };
        Repository::open_cached(Arc::clone(&self.backend), pw.as_bytes(), &CacheMode::Off)
            .map_err(ApiError::from)
    }

    /// The index, loaded again when the set of index files changed. Blocking.
    pub fn index(&self, repo: &Repository) -> Result<Arc<Index>, ApiError> {
        let mut ids: Vec<Id> = repo
            .list_ids(FileType::Index)?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        if let Some((have, idx)) = &*lock(&self.index)
            && *have == ids
        {
            return Ok(Arc::clone(idx));
        }
        let idx = Arc::new(repo.load_index()?);
        *lock(&self.index) = Some((ids, Arc::clone(&idx)));
        Ok(idx)
    }

    /// Takes a lock of `kind` for `command`. `--no-lock` skips the locks of jobs that only
    /// read (restore, check, downloads), as on the CLI: forget and prune always lock exclusively (a prune job under `arca
    /// --no-lock ui` deleted the packs of a running backup), and a backup shared (without it,
    /// a prune beside it deleted what it referenced); a prune's dry run changes nothing.
    pub fn lock(
        &self,
        repo: &Repository,
        kind: LockKind,
        command: &str,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Option<arca_repo::Lock>, String> {
        const READ_ONLY: &[&str] = &["check", "restore", "dump", "prune --dry-run"];
        if self.no_lock && READ_ONLY.contains(&command) {
            return Ok(None);
        }
        // As the command line's: tried again for as long as `--retry-lock` allows, the pause
        // doubling from a second up to 30 s (it failed at once whatever --retry-lock said).
        let started = Instant::now();
        let mut pause = Duration::from_secs(1);
        loop {
            match repo.lock_for(kind, command) {
                Err(RepoError::Locked { .. })
                    if self.retry_lock.is_some_and(|p| started.elapsed() < p) =>
                {
                    let left = self
                        .retry_lock
                        .unwrap_or_default()
                        .saturating_sub(started.elapsed());
                    // A job cancelled while it waits stops waiting.
                    if !arca_repo::lock::wait_to_retry(&mut pause, left, cancelled) {
                        return Err(format!(
                            "cancelled while waiting for the lock of {}",
                            self.location
                        ));
                    }
                }
                Err(RepoError::Locked { location, holder }) => {
                    let holder = match self.retry_lock {
                        Some(p) if !p.is_zero() => {
                            format!("{holder}, still after trying again for {p:?} (--retry-lock)")
                        }
                        _ => holder,
                    };
                    return Err(RepoError::Locked { location, holder }.to_string());
                }
                other => return other.map(Some).map_err(|e| e.to_string()),
            }
        }
    }
}

/// Runs blocking repository work off the async threads.
pub async fn blocking<T, F>(f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::failed(format!("internal error: {e}")))?
}
