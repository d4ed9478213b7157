//! Repository-level tests: init/open, keys, sealed files, packs and the index, on the memory
//! and local backends.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use arca_backend::{Backend, FileType, LocalBackend, MemoryBackend};
use arca_format::{BlobKind, ChunkerParams, IndexFile, KdfParams};
use arca_repo::blob::seal_blob;
use arca_repo::pack::{PackWriter, read_pack_header};
use arca_repo::{InitOptions, RepoError, Repository};

fn opts() -> InitOptions {
    InitOptions {
        kdf: KdfParams {
            memory_kib: 64,
            iterations: 1,
            parallelism: 1,
        },
        chunker: ChunkerParams {
            min: 4096,
            avg: 16384,
            max: 65536,
        },
        ..InitOptions::default()
    }
}

#[test]
fn init_open_and_wrong_password() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    let r2 = Repository::open(b.clone(), b"pw").unwrap();
    assert_eq!(r.config(), r2.config());
    assert_eq!(r.key_id(), r2.key_id());
    assert!(matches!(
        Repository::open(b.clone(), b"nope"),
        Err(RepoError::WrongPassword { .. })
    ));
    assert!(
        Repository::init(b, b"pw", &opts()).is_err(),
        "second init must fail"
    );
}

/// An init whose config cannot be written for a full disk takes its key file back: left
/// there, it made the next init refuse the folder for a minute ("another init is creating a
/// repository here"), though the disk had been freed and no other init was running.
#[test]
fn an_init_stopped_by_a_full_disk_can_be_run_again_at_once() {
    use arca_backend::{Fault, FaultBackend, Op, Rule, Trigger};
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("repo");
    let full = Arc::new(FaultBackend::new(LocalBackend::new(&dir)));
    full.add(Rule {
        op: Some(Op::Write),
        file_type: Some(FileType::Config),
        trigger: Trigger::Always,
        fault: Fault::NoSpace,
    });
    let b: Arc<dyn Backend> = full.clone();
    let e = Repository::init(b, b"pw", &opts()).unwrap_err();
    assert!(e.to_string().contains("config"), "{e}");
    assert!(full.inner().list(FileType::Key).unwrap().is_empty());
    let b: Arc<dyn Backend> = Arc::new(LocalBackend::new(&dir));
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    assert_eq!(Repository::open(b, b"pw").unwrap().key_id(), r.key_id());
}

#[test]
fn missing_and_non_repositories() {
    let d = tempfile::tempdir().unwrap();
    let missing: Arc<dyn Backend> = Arc::new(LocalBackend::new(d.path().join("none")));
    let e = Repository::open(missing, b"pw").unwrap_err();
    assert!(matches!(e, RepoError::NoRepository { .. }), "{e}");
    assert!(e.to_string().contains("none"));
    let plain: Arc<dyn Backend> = Arc::new(LocalBackend::new(d.path()));
    let e = Repository::open(plain, b"pw").unwrap_err();
    assert!(matches!(e, RepoError::NotARepository { .. }), "{e}");
}

#[test]
fn keys_add_list_remove_passwd() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let mut r = Repository::init(b.clone(), b"one", &opts()).unwrap();
    let kdf = opts().kdf;
    let second = r.add_key(b"two", kdf).unwrap();
    assert_eq!(r.list_keys().unwrap().len(), 2);
    let r2 = Repository::open(b.clone(), b"two").unwrap();
    assert_eq!(r2.key_id(), second);
    assert!(
        r.remove_key(&r.key_id()).is_err(),
        "current key must not be removable"
    );
    r2.remove_key(&r.key_id()).unwrap();
    assert!(Repository::open(b.clone(), b"one").is_err());
    let mut r2 = r2;
    assert!(
        r2.remove_key(&second).is_err(),
        "last key must not be removable"
    );
    r2.change_password(b"three", kdf).unwrap();
    assert!(Repository::open(b.clone(), b"two").is_err());
    Repository::open(b.clone(), b"three").unwrap();
    assert_eq!(r2.list_keys().unwrap().len(), 1);
    let _ = &mut r;
}

#[test]
fn packs_index_and_blob_reads() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    let mut w = PackWriter::new(BlobKind::Data, 1 << 20);
    let mut blobs = vec![];
    for i in 0..2000u32 {
        let data = format!("blob number {i} ")
            .repeat(i as usize % 7 + 1)
            .into_bytes();
        let id = r.key().blob_id(&data);
        w.add(&seal_blob(r.sealer(), BlobKind::Data, id, &data, 3).unwrap())
            .unwrap();
        blobs.push((id, data));
    }
    let p = w.finish(r.sealer()).unwrap();
    b.write(FileType::Pack, &p.id.to_hex(), &p.bytes).unwrap();
    // The header (2000 entries, > 64 KiB) is read back from the tail in two reads.
    let h = read_pack_header(b.as_ref(), r.sealer(), &p.id, p.bytes.len() as u64).unwrap();
    assert_eq!(h.entries, p.index.blobs);
    let idx_id = r
        .save_index(&IndexFile {
            supersedes: vec![],
            packs: vec![p.index.clone()],
        })
        .unwrap();
    let r = Repository::open(b.clone(), b"pw").unwrap();
    assert_eq!(r.load_index_file(&idx_id).unwrap().packs[0], p.index);
    let index = r.load_index().unwrap();
    assert_eq!(index.len(), 2000);
    for (id, data) in blobs.iter().step_by(97) {
        assert_eq!(&r.read_blob(&index, BlobKind::Data, id).unwrap(), data);
        assert!(matches!(
            r.read_blob(&index, BlobKind::Tree, id),
            Err(RepoError::BlobNotFound { .. })
        ));
    }
    // A flipped byte in the pack is reported as a damaged blob naming the pack.
    let mut bytes = p.bytes.clone();
    let e0 = &p.index.blobs[0];
    bytes[e0.offset as usize + 30] ^= 1;
    b.write(FileType::Pack, &p.id.to_hex(), &bytes).unwrap();
    let e = r.read_blob(&index, BlobKind::Data, &e0.id).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains(&p.id.to_hex()), "{e}");
    // Truncated: the header can no longer be read.
    b.write(
        FileType::Pack,
        &p.id.to_hex(),
        &p.bytes[..p.bytes.len() - 100],
    )
    .unwrap();
    assert!(read_pack_header(b.as_ref(), r.sealer(), &p.id, p.bytes.len() as u64 - 100).is_err());
}

#[test]
fn tampered_files_are_detected() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    let id = r.save_index(&IndexFile::default()).unwrap();
    let mut bytes = b.read(FileType::Index, &id.to_hex()).unwrap();
    bytes[20] ^= 1;
    b.write(FileType::Index, &id.to_hex(), &bytes).unwrap();
    assert!(matches!(
        r.load_index_file(&id),
        Err(RepoError::IdMismatch { .. })
    ));
    // Loading the index goes on without a damaged file, which is named.
    let (index, damaged) = r.load_index_report().unwrap();
    assert!(index.is_empty());
    assert_eq!(damaged.len(), 1);
    assert_eq!(damaged[0].0, id);
    assert!(damaged[0].1.is_corruption());
    assert!(r.load_index().unwrap().is_empty());
}

/// The config names the cipher (version 3 for XAES-256-GCM, version 1 as before for
/// XChaCha20-Poly1305); the config itself is XChaCha20-Poly1305 in both, every other sealed
/// file the named cipher, and the other cipher does not open it.
#[test]
fn each_cipher_seals_everything_but_the_config() {
    use arca_format::Cipher;
    for (cipher, other, version) in [
        (Cipher::Xaes256Gcm, Cipher::XChaCha20Poly1305, 3),
        (Cipher::XChaCha20Poly1305, Cipher::Xaes256Gcm, 1),
    ] {
        let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let o = InitOptions { cipher, ..opts() };
        let r = Repository::init(b.clone(), b"pw", &o).unwrap();
        let data = b"some data".repeat(100);
        let id = r.key().blob_id(&data);
        let mut w = PackWriter::new(BlobKind::Data, 1 << 20);
        w.add(&seal_blob(r.sealer(), BlobKind::Data, id, &data, 3).unwrap())
            .unwrap();
        let p = w.finish(r.sealer()).unwrap();
        b.write(FileType::Pack, &p.id.to_hex(), &p.bytes).unwrap();
        let idx = r
            .save_index(&IndexFile {
                supersedes: vec![],
                packs: vec![p.index.clone()],
            })
            .unwrap();

        let r = Repository::open(b.clone(), b"pw").unwrap();
        assert_eq!(r.config().cipher, cipher);
        assert_eq!(r.config().version(), version);
        let index = r.load_index().unwrap();
        assert_eq!(r.read_blob(&index, BlobKind::Data, &id).unwrap(), data);

        let open = |sealer: &arca_crypto::Sealer, t: FileType, name: &str| {
            let bytes = b.read(t, name).unwrap();
            sealer
                .open(&bytes[..8], &bytes[8..], &|| name.to_string())
                .is_ok()
        };
        let config_sealer = r.key().cipher();
        assert!(open(&config_sealer, FileType::Config, "config"));
        assert!(open(r.sealer(), FileType::Index, &idx.to_hex()));
        assert!(!open(
            &r.key().sealer(other),
            FileType::Index,
            &idx.to_hex()
        ));
        if cipher != Cipher::XChaCha20Poly1305 {
            assert!(!open(r.sealer(), FileType::Config, "config"));
        }
    }
}

/// A flipped byte in a key file is named as a damaged key file, not taken for a wrong
/// password; another key still opens the repository.
#[test]
fn a_damaged_key_file_is_named() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    r.add_key(b"other", opts().kdf).unwrap();
    let name = r.key_id().to_hex();
    let mut bytes = b.read(FileType::Key, &name).unwrap();
    bytes[40] ^= 1;
    b.write(FileType::Key, &name, &bytes).unwrap();
    let e = Repository::open(b.clone(), b"pw").unwrap_err();
    assert!(matches!(e, RepoError::DamagedKey { .. }), "{e}");
    assert!(e.to_string().contains(&name), "{e}");
    Repository::open(b, b"other").unwrap();
}

/// A key file renamed (its content intact, its name no longer its hash) still opens the
/// repository, and is the key in use: `remove_key` refuses it. It was known by its hash, so
/// removing it by its name was allowed, and the password then opened nothing.
#[test]
fn a_renamed_key_file_is_still_the_key_in_use() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    r.add_key(b"other", opts().kdf).unwrap();
    let name = r.key_id().to_hex();
    let bytes = b.read(FileType::Key, &name).unwrap();
    let renamed = "0".repeat(64);
    b.write(FileType::Key, &renamed, &bytes).unwrap();
    b.delete(FileType::Key, &name).unwrap();
    let opened = Repository::open(b.clone(), b"pw").unwrap();
    assert_eq!(opened.key_id().to_hex(), renamed);
    assert!(opened.remove_key(&opened.key_id()).is_err());
}

/// A key that the password opens but the config does not (a key file copied in from another
/// repository) does not hide the repository's own key, whichever sorts first.
#[test]
fn a_foreign_key_with_the_same_password_is_passed_over() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    let other: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let o = Repository::init(other.clone(), b"pw", &opts()).unwrap();
    let foreign = other.read(FileType::Key, &o.key_id().to_hex()).unwrap();
    // Under a name that sorts before the repository's own.
    b.write(FileType::Key, &"0".repeat(64), &foreign).unwrap();
    let opened = Repository::open(b.clone(), b"pw").unwrap();
    assert_eq!(opened.key_id(), r.key_id());
    assert_eq!(opened.config(), r.config());
}

/// Whether the key in use was found renamed (intact) is known, for check's advice.
#[test]
fn a_renamed_key_in_use_is_known_as_such() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    assert!(!Repository::open(b.clone(), b"pw").unwrap().key_misnamed());
    let name = r.key_id().to_hex();
    let bytes = b.read(FileType::Key, &name).unwrap();
    b.write(FileType::Key, &"1".repeat(64), &bytes).unwrap();
    b.delete(FileType::Key, &name).unwrap();
    assert!(Repository::open(b, b"pw").unwrap().key_misnamed());
}

/// Key files that cannot be decoded (garbage, truncated) or that ask for key derivation
/// parameters this version refuses are skipped: a wrong password is still the wrong-password
/// error, which names them, and the right password still opens the repository.
#[test]
fn undecodable_key_files_do_not_hide_a_wrong_password() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
    let real = b.read(FileType::Key, &r.key_id().to_hex()).unwrap();
    let file = arca_format::KeyFile::decode(&real).unwrap();
    let with_kdf = |kdf: KdfParams| {
        arca_format::KeyFile {
            kdf,
            ..file.clone()
        }
        .encode()
        .unwrap()
    };
    let planted = [
        b"garbage".to_vec(),
        real[..real.len() - 10].to_vec(),
        with_kdf(KdfParams {
            memory_kib: arca_crypto::MAX_KDF_MEMORY_KIB + 1,
            ..file.kdf
        }),
        with_kdf(KdfParams {
            iterations: arca_crypto::MAX_KDF_ITERATIONS + 1,
            ..file.kdf
        }),
        with_kdf(KdfParams {
            parallelism: 0,
            ..file.kdf
        }),
    ];
    let mut names = vec![];
    for bytes in &planted {
        let name = blake3::hash(bytes).to_hex().to_string();
        b.write(FileType::Key, &name, bytes).unwrap();
        names.push(name);
    }
    let e = Repository::open(b.clone(), b"wrong").unwrap_err();
    assert!(matches!(e, RepoError::WrongPassword { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.starts_with("wrong password"), "{msg}");
    names.sort();
    assert!(msg.contains(&names[..3].join(", ")), "{msg}");
    assert!(msg.contains("and 2 more"), "{msg}");
    assert_eq!(
        Repository::open(b, b"pw").unwrap().key_id(),
        r.key_id(),
        "the right password opens"
    );
}

/// A repository whose only key file is of a newer version or KDF: no key can be tried, so
/// it is not a wrong password (exit 12), and the reason is kept (hunt 29 compat F2).
#[test]
fn a_newer_key_file_alone_is_not_a_wrong_password() {
    for at in [12usize, 14] {
        let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
        let r = Repository::init(b.clone(), b"pw", &opts()).unwrap();
        let name = r.key_id().to_hex();
        let mut bytes = b.read(FileType::Key, &name).unwrap();
        bytes[at] = 2;
        b.delete(FileType::Key, &name).unwrap();
        b.write(
            FileType::Key,
            blake3::hash(&bytes).to_hex().as_str(),
            &bytes,
        )
        .unwrap();
        let e = Repository::open(b, b"pw").unwrap_err();
        assert!(matches!(e, RepoError::UnusableKeys { .. }), "{at}: {e}");
        let msg = e.to_string();
        assert!(msg.contains("made by a newer arca"), "{msg}");
        assert!(msg.contains("upgrade arca"), "{msg}");
    }
}

/// A config stored as version 2 without content keys (which readers accept) reports its
/// stored version, not the 1 this build would write (hunt 29 compat F4: `cat config`).
#[test]
fn the_stored_config_version_is_reported() {
    let b: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let o = InitOptions {
        cipher: arca_format::config::Cipher::XChaCha20Poly1305,
        ..opts()
    };
    let r = Repository::init(b.clone(), b"pw", &o).unwrap();
    assert_eq!(r.config_version(), r.config().version());
    let raw = b.read(FileType::Config, "config").unwrap();
    let sealer = r.key().cipher();
    let mut body = sealer
        .open(&raw[..8], &raw[8..], &|| "config".into())
        .unwrap();
    assert_eq!(body[4], 1);
    body[4] = 2;
    body.push(0);
    let mut out = raw[..8].to_vec();
    sealer.seal_into(&raw[..8], &body, &mut out).unwrap();
    b.write(FileType::Config, "config", &out).unwrap();
    let r = Repository::open(b, b"pw").unwrap();
    assert_eq!(r.config().version(), 1);
    assert_eq!(r.config_version(), 2);
}
