//! Test support: deterministic file trees holding every kind of entry a file system holds,
//! a comparison of two trees by bytes and metadata, and helpers that damage files.

pub mod compare;
pub mod faultfs;
pub mod generate;
pub mod packs;
pub mod s3d;

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Deterministic pseudo-random bytes for `seed`.
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut h = blake3::Hasher::new();
    h.update(b"arca testkit");
    h.update(&seed.to_le_bytes());
    h.finalize_xof().fill(&mut out);
    out
}

/// Compressible text for `seed`.
pub fn text_bytes(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: [&str; 16] = [
        "backup ",
        "restore ",
        "chunk ",
        "pack ",
        "index ",
        "snapshot ",
        "tree ",
        "blob ",
        "repository ",
        "encrypt ",
        "compress ",
        "dedup ",
        "fast ",
        "safe ",
        "data ",
        "\n",
    ];
    let r = random_bytes(seed, len / 4 + 16);
    let mut out = Vec::with_capacity(len + 16);
    let mut i = 0;
    while out.len() < len {
        out.extend_from_slice(WORDS[(r[i % r.len()] & 15) as usize].as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// Flips one bit at `offset` of a file.
pub fn flip_byte(path: &Path, offset: u64) -> io::Result<()> {
    let f = OpenOptions::new().read(true).write(true).open(path)?;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset)?;
    b[0] ^= 0x10;
    f.write_all_at(&b, offset)
}

/// Cuts `cut` bytes off the end of a file.
pub fn truncate_by(path: &Path, cut: u64) -> io::Result<()> {
    let f = OpenOptions::new().write(true).open(path)?;
    let len = f.metadata()?.len();
    f.set_len(len.saturating_sub(cut))
}

/// Whether the process runs as root (device nodes, chown).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The temporary files (`.tmp-*`) under `dir`: writes interrupted or abandoned.
pub fn temp_files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.as_encoded_bytes().starts_with(b".tmp-"))
        })
        .collect()
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}
