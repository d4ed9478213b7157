//! Packs as another arca would write them, for tests of what this one does with them.

use arca_format::pack::{PackEntry, PackHeader, PackTrailer, TRAILER_LEN};
use arca_format::{BlobKind, EnvelopeHeader, EnvelopeKind, Id};

/// The bytes of pack `old` (a whole pack file) with its header replaced by one a newer arca
/// would write: the same `entries` of `kind` blobs under header body version 2, sealed by
/// `seal(aad, plaintext, out)` (which appends the sealed header to `out`: the repository's
/// `Sealer::seal_into`); and the new pack's id (its bytes' hash). The blobs stay as they
/// are.
pub fn with_newer_header(
    old: &[u8],
    kind: BlobKind,
    entries: &[PackEntry],
    seal: impl FnOnce(&[u8], &[u8], &mut Vec<u8>),
) -> (Id, Vec<u8>) {
    let trailer = PackTrailer::decode(old).expect("a pack ends with its trailer");
    let header_at = old.len() - TRAILER_LEN - trailer.header_len as usize;
    let mut plain = PackHeader {
        kind,
        entries: entries.to_vec(),
    }
    .encode()
    .expect("the header encodes");
    // The body version, after the 4-byte magic.
    plain[4] = 2;
    let mut bytes = old[..header_at].to_vec();
    let aad = EnvelopeHeader::new(EnvelopeKind::Pack, 0).encode();
    seal(&aad, &plain, &mut bytes);
    let header_len = u32::try_from(bytes.len() - header_at).expect("a header under 4 GiB");
    bytes.extend_from_slice(&PackTrailer { header_len }.encode());
    (Id(*blake3::hash(&bytes).as_bytes()), bytes)
}
