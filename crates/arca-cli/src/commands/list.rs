//! `arca list`: the ids of the repository's files of one type (snapshots, index, packs, keys,
//! locks), or every blob the index knows with its type, one per line, as restic's `list`.

use std::collections::HashSet;

use anyhow::Result;
use arca_backend::FileType;
use arca_format::{BlobKind, Id};
use clap::{Args, ValueEnum};

use crate::cli::Global;
use crate::util;

/// What `list` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListWhat {
    /// Every blob of the index: `data <id>` or `tree <id>`
    Blobs,
    /// The pack files
    Packs,
    /// The index files
    Index,
    /// The snapshot files
    Snapshots,
    /// The key files
    Keys,
    /// The lock files
    Locks,
}

/// Options of `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// What to list
    #[arg(value_enum)]
    pub what: ListWhat,
}

/// Runs `list`.
pub fn run(g: &Global, a: &ListArgs) -> Result<u8> {
    let file_type = match a.what {
        ListWhat::Blobs => return list_blobs(g),
        ListWhat::Packs => FileType::Pack,
        ListWhat::Index => FileType::Index,
        ListWhat::Snapshots => FileType::Snapshot,
        ListWhat::Keys => FileType::Key,
        ListWhat::Locks => FileType::Lock,
    };
    // Listing names needs no key, but the password is checked all the same (as restic does):
    // a wrong password must not pass for an empty repository.
    let opened = util::open_uncached(g)?;
    for (id, _) in opened.repo.list_ids(file_type)? {
        super::out(&id.to_hex())?;
    }
    Ok(0)
}

/// Prints every blob of the index files that no other index file supersedes, once each.
fn list_blobs(g: &Global) -> Result<u8> {
    let opened = util::open(g)?;
    // The index files are read: under a shared lock, as restic's, so no prune deletes them.
    let _lock = util::lock(g, &opened.repo, arca_repo::LockKind::Shared, "list")?;
    let mut files = vec![];
    for (id, file) in opened.repo.load_index_files()? {
        files.push((id, file?));
    }
    let superseded: HashSet<Id> = files
        .iter()
        .flat_map(|(_, f)| f.supersedes.iter().copied())
        .collect();
    let mut seen: HashSet<(BlobKind, Id)> = HashSet::new();
    for (_, f) in files.iter().filter(|(id, _)| !superseded.contains(id)) {
        for p in &f.packs {
            for b in &p.blobs {
                if seen.insert((p.kind, b.id)) {
                    super::out(&format!("{} {}", p.kind.name(), b.id.to_hex()))?;
                }
            }
        }
    }
    Ok(0)
}
