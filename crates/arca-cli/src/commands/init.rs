//! `arca init`: create a repository.

use anyhow::{Context, Result};
use arca_format::ChunkerParams;
use arca_repo::{InitOptions, Repository};

use crate::cli::{Global, InitArgs};
use crate::util::{self, parse_size};

pub fn run(g: &Global, a: &InitArgs) -> Result<u8> {
    let to_u32 = |s: &str, what: &str| -> Result<u32> {
        let v = parse_size(s)?;
        u32::try_from(v).with_context(|| format!("{what} {s} is too large"))
    };
    let opts = InitOptions {
        chunker: ChunkerParams {
            min: to_u32(&a.chunk_min, "minimum chunk size")?,
            avg: to_u32(&a.chunk_avg, "average chunk size")?,
            max: to_u32(&a.chunk_max, "maximum chunk size")?,
        },
        compression: a.compression,
        pack_size: to_u32(&a.pack_size, "pack size")?,
        kdf: util::kdf(&a.kdf),
    };
    let (backend, _) = util::backend(g)?;
    let pw = if let Some(f) = &g.password_file {
        util::new_password(Some(f), "ARCA_PASSWORD", "password for the new repository")?
    } else {
        util::new_password(None, "ARCA_PASSWORD", "password for the new repository")?
    };
    let repo = Repository::init(backend.clone(), pw.as_bytes(), &opts)?;
    if !g.quiet {
        super::out(&format!(
            "created arca repository {} at {}",
            hex_short(&repo.config().repo_id),
            backend.location()
        ))?;
        super::out("Keep the password safe: without it the data cannot be recovered.")?;
    }
    Ok(0)
}

fn hex_short(b: &[u8; 32]) -> String {
    b[..5].iter().map(|x| format!("{x:02x}")).collect()
}
