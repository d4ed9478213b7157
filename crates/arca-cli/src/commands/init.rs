//! `arca init`: create a repository; with `--copy-chunker-params --from-repo`, one that
//! chunks and identifies data as the source repository does, so that `copy` deduplicates.

use anyhow::Result;
use arca_format::config::{ContentKeys, MAX_PACK, MIN_PACK};
use arca_format::{ChunkerParams, Cipher};
use arca_repo::{InitOptions, Repository};

use crate::cli::{CipherArg, Global, InitArgs};
use crate::util::{self, human_bytes, parse_size};

pub fn run(g: &Global, a: &InitArgs) -> Result<u8> {
    // A size out of range is a usage error (exit 2), as a size that does not parse is.
    let to_u32 = |s: &str, what: &str| -> Result<u32> {
        let v = parse_size(s)?;
        u32::try_from(v)
            .map_err(|_| anyhow::Error::new(super::Usage(format!("{what} {s} is too large"))))
    };
    let mut opts = InitOptions {
        chunker: ChunkerParams {
            min: to_u32(&a.chunk_min, "minimum chunk size")?,
            avg: to_u32(&a.chunk_avg, "average chunk size")?,
            max: to_u32(&a.chunk_max, "maximum chunk size")?,
        },
        compression: a.compression,
        pack_size: to_u32(&a.pack_size, "pack size")?,
        kdf: util::kdf(&a.kdf),
        cipher: match a.cipher {
            CipherArg::Auto => arca_repo::preferred_cipher(),
            CipherArg::Xaes256Gcm => Cipher::Xaes256Gcm,
            CipherArg::XChaCha20Poly1305 => Cipher::XChaCha20Poly1305,
        },
    };
    if let Err(e) = opts.chunker.validate() {
        super::usage!("{e}");
    }
    if !(MIN_PACK..=MAX_PACK).contains(&opts.pack_size) {
        super::usage!(
            "pack size {} outside the allowed {}..{}",
            a.pack_size,
            human_bytes(u64::from(MIN_PACK)),
            human_bytes(u64::from(MAX_PACK))
        );
    }
    if !a.copy_chunker_params && a.from.from_repo.as_deref().is_some_and(|r| !r.is_empty()) {
        eprintln!(
            "warning: --from-repo (or ARCA_FROM_REPOSITORY) is ignored without \
             --copy-chunker-params: the new repository chunks as it would alone"
        );
    }
    let (backend, _) = util::backend(g)?;
    // The source is opened first: a wrong source password leaves nothing behind.
    let mut copied = None;
    if a.copy_chunker_params {
        let (src, location) = super::copy::open_source(g, &a.from)?;
        opts.chunker = src.config().chunker;
        let keys = ContentKeys::new(src.key().id_key(), src.key().chunker_key());
        copied = Some((keys, location));
    }
    let pw = if let Some(c) = &g.password_command {
        let pw = util::password_from_command(c)?;
        util::refuse_blank(
            &pw,
            "password for the new repository",
            &format!("password command {c:?}"),
        )?;
        pw
    } else {
        util::new_password(
            g.password_file.as_deref(),
            "ARCA_PASSWORD",
            "password for the new repository",
        )?
    };
    let (keys, from) = match copied {
        Some((k, l)) => (Some(k), Some(l)),
        None => (None, None),
    };
    let repo = Repository::init_with_content_keys(backend.clone(), pw.as_bytes(), &opts, keys)?;
    if a.json {
        let c = repo.config();
        super::out(
            &serde_json::json!({
                "message_type": "initialized",
                "id": arca_format::Id(c.repo_id).to_hex(),
                "repository": backend.location(),
                "cipher": c.cipher.name(),
                "chunker_copied_from": from,
            })
            .to_string(),
        )?;
    } else if !g.quiet {
        super::out(&format!(
            "created arca repository {} at {} (cipher {})",
            hex_short(&repo.config().repo_id),
            backend.location(),
            repo.config().cipher.name()
        ))?;
        if let Some(from) = from {
            let c = opts.chunker;
            super::out(&format!(
                "chunker parameters ({} / {} / {}), chunker key and blob-id key copied from {from}",
                human_bytes(u64::from(c.min)),
                human_bytes(u64::from(c.avg)),
                human_bytes(u64::from(c.max)),
            ))?;
        }
        super::out("Keep the password safe: without it the data cannot be recovered.")?;
    }
    Ok(0)
}

fn hex_short(b: &[u8; 32]) -> String {
    b[..5].iter().map(|x| format!("{x:02x}")).collect()
}
