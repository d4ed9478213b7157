//! `arca key list|add|remove|passwd`.

use anyhow::Result;
use serde_json::json;

use crate::cli::{Global, KeyArgs, KeyCommand};
use crate::util;

fn created(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// The password of a new key: `--new-password-file`, `ARCA_NEW_PASSWORD`, or a prompt.
fn new_key_password(file: Option<&std::path::Path>) -> Result<zeroize::Zeroizing<String>> {
    util::new_password(file, "ARCA_NEW_PASSWORD", "new password")
}

pub fn run(g: &Global, a: &KeyArgs) -> Result<u8> {
    // Names checked before the password is asked for.
    let owner = match &a.command {
        KeyCommand::Add { owner, .. } | KeyCommand::Passwd { owner, .. } => key_owner(owner)?,
        _ => arca_repo::KeyOwner::default(),
    };
    let mut opened = util::open(g)?;
    // As restic: adding a key takes a shared lock, removing or replacing one an exclusive
    // one, so that two removals cannot each take away the other's key (which left the
    // repository with none) and nothing changes keys under a prune.
    let kind = match &a.command {
        KeyCommand::List { .. } => None,
        KeyCommand::Add { .. } => Some(arca_repo::LockKind::Shared),
        KeyCommand::Remove { .. } | KeyCommand::Passwd { .. } => {
            Some(arca_repo::LockKind::Exclusive)
        }
    };
    let _lock = kind
        .map(|k| util::take_lock(g, &opened.repo, k, "key"))
        .transpose()?;
    let repo = &mut opened.repo;
    match &a.command {
        KeyCommand::List { json } => {
            // A damaged key file is reported and left out, as restic does: the others are
            // still listed (and the damaged one's id is named, for `key remove`).
            let mut keys = vec![];
            for (id, k) in repo.read_keys()? {
                match k {
                    Ok(k) => keys.push(k),
                    // One that cannot be read (permissions) may be a good key: removing it,
                    // as the advice for a damaged one says, could lose a password (hunt 24).
                    Err(arca_repo::RepoError::Backend(e)) => crate::progress::warn(&format!(
                        "arca: warning: a key file cannot be read ({e}); it is left out"
                    )),
                    // Damaged, or intact under another name: only its password tells.
                    Err(arca_repo::RepoError::IdMismatch { .. }) => {
                        crate::progress::warn(&format!(
                            "arca: warning: key file {} is left out: its content does not \
                             match its name (damaged, or renamed: if its password still opens \
                             the repository, add a key with `arca key add` using it before \
                             `arca key remove {}`)",
                            id.short(),
                            id.short()
                        ));
                    }
                    Err(e) => crate::progress::warn(&format!(
                        "arca: warning: damaged key file ({e}); it is left out \
                         (`arca key remove {}` removes it)",
                        id.short()
                    )),
                }
            }
            if repo.key_misnamed() {
                let id = repo.key_id().short();
                crate::progress::warn(&format!(
                    "arca: warning: the key in use, {id}, is stored under a name its content \
                     does not match (renamed?); add a key with `arca key add`, then remove \
                     this one with `arca key remove {id}` using the new key's password"
                ));
            }
            if *json {
                let v: Vec<_> = keys
                    .iter()
                    .map(|k| json!({
                        "id": k.id.to_hex(),
                        "current": k.current,
                        "hostname": k.file.hostname,
                        "username": k.file.username,
                        // restic's names for the same fields, for scripts written for it.
                        "hostName": k.file.hostname,
                        "userName": k.file.username,
                        "created": created(k.file.created_ns),
                        "kdf": {"algorithm": "argon2id", "memory_kib": k.file.kdf.memory_kib,
                                "iterations": k.file.kdf.iterations, "parallelism": k.file.kdf.parallelism},
                    }))
                    .collect();
                super::out(&serde_json::Value::Array(v).to_string())?;
            } else {
                super::out(&format!(
                    " {:<10} {:<12} {:<16} Created",
                    "ID", "User", "Host"
                ))?;
                for k in keys {
                    super::out(&format!(
                        "{}{:<10} {:<12} {:<16} {}",
                        if k.current { "*" } else { " " },
                        k.id.short(),
                        arca_format::text::shown(std::path::Path::new(&k.file.username)),
                        arca_format::text::shown(std::path::Path::new(&k.file.hostname)),
                        created(k.file.created_ns)
                    ))?;
                }
            }
        }
        KeyCommand::Add {
            new_password_file,
            kdf,
            ..
        } => {
            let pw = new_key_password(new_password_file.as_deref())?;
            let id = repo.add_key_for(pw.as_bytes(), util::kdf(kdf), &owner)?;
            if !g.quiet {
                super::out(&format!("saved new key {}", id.short()))?;
            }
        }
        KeyCommand::Remove { id } => {
            let id = repo.find_key(id)?;
            repo.remove_key(&id)?;
            if !g.quiet {
                super::out(&format!("removed key {}", id.short()))?;
            }
        }
        KeyCommand::Passwd {
            new_password_file,
            kdf,
            ..
        } => {
            let pw = new_key_password(new_password_file.as_deref())?;
            let old = repo.key_id();
            let id = match repo.change_password_for(pw.as_bytes(), util::kdf(kdf), &owner) {
                Ok(id) => id,
                // The new key was saved, the old one not deleted (an append-only store): both
                // passwords open the repository, and the user must know it.
                Err(e) if repo.key_id() != old => anyhow::bail!(
                    "saved new key {} (the new password opens the repository), but the old key \
                     {} could not be removed, so the old password still opens it too: {e}; \
                     remove it with `arca key remove {}`",
                    repo.key_id().short(),
                    old.short(),
                    old.short()
                ),
                Err(e) => return Err(e.into()),
            };
            if !g.quiet {
                super::out(&format!("password changed; new key {}", id.short()))?;
            }
        }
    }
    Ok(0)
}

/// The names `--user` and `--host` give a new key; an empty one is refused.
fn key_owner(a: &crate::cli::KeyOwnerArgs) -> Result<arca_repo::KeyOwner> {
    for (flag, v) in [("--user", &a.user), ("--host", &a.host)] {
        if v.as_deref().is_some_and(|v| v.trim().is_empty()) {
            anyhow::bail!("{flag} needs a name, not an empty string");
        }
    }
    Ok(arca_repo::KeyOwner {
        username: a.user.clone(),
        hostname: a.host.clone(),
    })
}
