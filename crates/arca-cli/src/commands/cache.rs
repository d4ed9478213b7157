//! `arca cache`: the local caches of remote repositories (one folder per repository under the
//! cache root), when each was last used and its size; `--cleanup` removes those unused for
//! longer than `--max-age` days, as restic's `cache` does. Needs no repository or password.

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, anyhow, bail};
use arca_repo::cache::{CacheFolder, cache_folders};
use clap::Args;
use serde_json::json;

use crate::cli::Global;
use crate::util;

/// Options of `cache`.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// Remove the caches not used for more than --max-age days
    #[arg(long)]
    pub cleanup: bool,
    /// Days after which an unused cache counts as old
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    pub max_age: u64,
    /// Do not compute the caches' sizes (faster)
    #[arg(long)]
    pub no_size: bool,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

/// Bytes of the files under `dir` (0 for what cannot be read).
fn size_of(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => total += e.metadata().map_or(0, |m| m.len()),
                Err(_) => {}
            }
        }
    }
    total
}

/// "3 days ago", "5 hours ago", "just now".
fn ago(t: SystemTime) -> String {
    let s = SystemTime::now()
        .duration_since(t)
        .unwrap_or_default()
        .as_secs();
    match s {
        s if s >= 2 * 86400 => format!("{} days ago", s / 86400),
        s if s >= 86400 => "1 day ago".into(),
        s if s >= 3600 => format!("{} hours ago", s / 3600),
        s if s >= 60 => format!("{} minutes ago", s / 60),
        _ => "just now".into(),
    }
}

/// Runs `cache`.
pub fn run(g: &Global, a: &CacheArgs) -> Result<u8> {
    if g.no_cache {
        bail!("the cache is off (--no-cache): there are no caches to list or clean up");
    }
    let root = util::cache_mode(g).root().ok_or_else(|| {
        anyhow!("no cache folder is known: set --cache-dir, XDG_CACHE_HOME or HOME")
    })?;
    let folders = cache_folders(&root).with_context(|| {
        format!(
            "cannot list the cache folder {}",
            arca_format::text::shown(&root)
        )
    })?;
    let max_age = Duration::from_secs(a.max_age.saturating_mul(86400));
    let is_old = |c: &CacheFolder| {
        SystemTime::now()
            .duration_since(c.last_used)
            .is_ok_and(|d| d > max_age)
    };
    let sizes: Vec<Option<u64>> = folders
        .iter()
        .map(|c| (!a.no_size).then(|| size_of(&c.path)))
        .collect();
    let mut removed = 0usize;
    if a.cleanup {
        for c in folders.iter().filter(|c| is_old(c)) {
            std::fs::remove_dir_all(&c.path).with_context(|| {
                format!(
                    "cannot remove the old cache {}",
                    arca_format::text::shown(&c.path)
                )
            })?;
            removed += 1;
        }
    }
    if a.json {
        let list: Vec<_> = folders
            .iter()
            .zip(&sizes)
            .map(|(c, size)| {
                json!({
                    "repo_id": c.repo_id,
                    "path": c.path.display().to_string(),
                    "last_used": chrono::DateTime::<chrono::Utc>::from(c.last_used).to_rfc3339(),
                    "old": is_old(c),
                    "removed": a.cleanup && is_old(c),
                    "size": size,
                })
            })
            .collect();
        super::out(&json!({"root": root.display().to_string(), "caches": list}).to_string())?;
        return Ok(0);
    }
    // The text lists what is left: a removed cache was listed above "removed 1 old cache".
    let (folders, sizes): (Vec<_>, Vec<_>) = folders
        .iter()
        .zip(&sizes)
        .filter(|(c, _)| !(a.cleanup && is_old(c)))
        .unzip();
    if folders.is_empty() && removed == 0 {
        super::out(&format!(
            "no caches under {}",
            arca_format::text::shown(&root)
        ))?;
        return Ok(0);
    }
    if !folders.is_empty() {
        print_table(&folders, &sizes, &is_old)?;
    }
    super::out(&format!(
        "{} in {}",
        crate::util::count(folders.len(), "cache"),
        arca_format::text::shown(&root)
    ))?;
    let old = folders.iter().filter(|c| is_old(c)).count();
    if a.cleanup {
        super::out(&format!(
            "removed {}",
            crate::util::count(removed, "old cache")
        ))?;
    } else if old > 0 {
        super::out(&format!(
            "{} unused for more than {} days: `arca cache --cleanup` removes {}",
            crate::util::count(old, "cache"),
            a.max_age,
            if old == 1 { "it" } else { "them" }
        ))?;
    }
    Ok(0)
}

/// The table of caches, one line each.
fn print_table(
    folders: &[&CacheFolder],
    sizes: &[&Option<u64>],
    is_old: &dyn Fn(&CacheFolder) -> bool,
) -> Result<()> {
    super::out(&format!(
        "{:<10}  {:<16}  {:<3}  {:>12}",
        "Repo ID", "Last Used", "Old", "Size"
    ))?;
    super::out(&"-".repeat(47))?;
    for (c, size) in folders.iter().zip(sizes) {
        super::out(&format!(
            "{:<10}  {:<16}  {:<3}  {:>12}",
            &c.repo_id[..10],
            ago(c.last_used),
            if is_old(c) { "yes" } else { "" },
            size.map_or(String::new(), super::stats::bytes)
        ))?;
    }
    super::out(&"-".repeat(47))
}
