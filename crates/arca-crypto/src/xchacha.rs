//! XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha) as its definition builds it: HChaCha20 turns
//! the key and the first 16 nonce bytes into a subkey, then IETF ChaCha20-Poly1305 runs with
//! nonce `0⁴ ‖ nonce[16..24]`. The second half is ring's assembly implementation, several
//! times faster than a portable one; the bytes are the same (a test checks them against the
//! RustCrypto implementation).

use chacha20::cipher::consts::U10;
use chacha20::cipher::{KeyIvInit, StreamCipher, StreamCipherSeek};
use poly1305::Poly1305;
use poly1305::universal_hash::{KeyInit, UniversalHash};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, Tag, UnboundKey};
use zeroize::Zeroizing;

/// Nonce length.
pub(crate) const NONCE: usize = 24;

/// An XChaCha20-Poly1305 key.
#[derive(Clone)]
pub(crate) struct XChaCha {
    key: Zeroizing<[u8; 32]>,
}

/// Authentication failed (or the key could not be set up).
#[derive(Debug)]
pub(crate) struct Failed;

impl XChaCha {
    pub fn new(key: &[u8; 32]) -> Self {
        Self {
            key: Zeroizing::new(*key),
        }
    }

    /// The per-nonce ChaCha20 subkey (HChaCha20) and IETF nonce.
    fn subkey(&self, nonce: &[u8; NONCE]) -> (Zeroizing<[u8; 32]>, [u8; 12]) {
        let mut input = [0u8; 16];
        input.copy_from_slice(&nonce[..16]);
        let mut sub = Zeroizing::new([0u8; 32]);
        let mut derived = chacha20::hchacha::<U10>((&*self.key).into(), (&input).into());
        sub.copy_from_slice(&derived);
        derived.as_mut_slice().fill(0);
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&nonce[16..]);
        (sub, n)
    }

    /// The per-nonce ChaCha20-Poly1305 key and nonce.
    fn inner(&self, nonce: &[u8; NONCE]) -> Result<(LessSafeKey, Nonce), Failed> {
        let (sub, n) = self.subkey(nonce);
        let key = UnboundKey::new(&CHACHA20_POLY1305, &sub[..]).map_err(|_| Failed)?;
        Ok((LessSafeKey::new(key), Nonce::assume_unique_for_key(n)))
    }

    /// Checks the tag of `ct_and_tag` (ciphertext followed by the 16-byte tag) without
    /// decrypting: the Poly1305 key from the first keystream block, then Poly1305 over
    /// `aad` and the ciphertext as RFC 8439 lays them out, compared in constant time.
    pub fn verify(&self, nonce: &[u8; NONCE], aad: &[u8], ct_and_tag: &[u8]) -> Result<(), Failed> {
        let split = ct_and_tag.len().checked_sub(16).ok_or(Failed)?;
        let (ct, tag) = ct_and_tag.split_at(split);
        let (sub, n) = self.subkey(nonce);
        let mut otk = Zeroizing::new([0u8; 32]);
        chacha20::ChaCha20::new((&*sub).into(), (&n).into()).apply_keystream(&mut otk[..]);
        let mut mac = Poly1305::new((&*otk).into());
        mac.update_padded(aad);
        mac.update_padded(ct);
        let mut lens = [0u8; 16];
        lens[..8].copy_from_slice(&(aad.len() as u64).to_le_bytes());
        lens[8..].copy_from_slice(&(ct.len() as u64).to_le_bytes());
        mac.update(&[lens.into()]);
        mac.verify(tag.into()).map_err(|_| Failed)
    }

    /// XORs into `buf` the keystream that sealing with `nonce` applies to the plaintext's
    /// bytes from `offset` on (ChaCha20 from block 1: block 0 keys Poly1305).
    pub fn keystream(&self, nonce: &[u8; NONCE], offset: u64, buf: &mut [u8]) {
        let (sub, n) = self.subkey(nonce);
        let mut c = chacha20::ChaCha20::new((&*sub).into(), (&n).into());
        c.seek(64 + offset);
        c.apply_keystream(buf);
    }

    /// Encrypts `buf` in place; returns the tag.
    pub fn seal(
        &self,
        nonce: &[u8; NONCE],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 16], Failed> {
        seal_with(self.inner(nonce)?, aad, buf)
    }

    /// Checks and decrypts `ct_and_tag` (ciphertext followed by the 16-byte tag) in place;
    /// returns the plaintext, the first part of the buffer.
    pub fn open<'b>(
        &self,
        nonce: &[u8; NONCE],
        aad: &[u8],
        ct_and_tag: &'b mut [u8],
    ) -> Result<&'b mut [u8], Failed> {
        open_with(self.inner(nonce)?, aad, ct_and_tag)
    }
}

/// Encrypts `buf` in place with a per-message ring key and nonce (of XChaCha20-Poly1305 or
/// XAES-256-GCM); returns the tag.
pub(crate) fn seal_with(
    (key, n): (LessSafeKey, Nonce),
    aad: &[u8],
    buf: &mut [u8],
) -> Result<[u8; 16], Failed> {
    let tag: Tag = key
        .seal_in_place_separate_tag(n, Aad::from(aad), buf)
        .map_err(|_| Failed)?;
    let mut out = [0u8; 16];
    out.copy_from_slice(tag.as_ref());
    Ok(out)
}

/// Checks and decrypts `ct_and_tag` in place with a per-message ring key and nonce; returns
/// the plaintext, the first part of the buffer.
pub(crate) fn open_with<'b>(
    (key, n): (LessSafeKey, Nonce),
    aad: &[u8],
    ct_and_tag: &'b mut [u8],
) -> Result<&'b mut [u8], Failed> {
    key.open_in_place(n, Aad::from(aad), ct_and_tag)
        .map_err(|_| Failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chacha20poly1305::aead::{AeadInPlace, KeyInit};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn same_bytes_as_rustcrypto(key in any::<[u8; 32]>(), nonce in any::<[u8; 24]>(),
                                    aad in proptest::collection::vec(any::<u8>(), 0..40),
                                    data in proptest::collection::vec(any::<u8>(), 0..3000)) {
            let rc = chacha20poly1305::XChaCha20Poly1305::new((&key).into());
            let mut a = data.clone();
            let tag_a = rc.encrypt_in_place_detached((&nonce).into(), &aad, &mut a).unwrap();
            let x = XChaCha::new(&key);
            let mut b = data.clone();
            let tag_b = x.seal(&nonce, &aad, &mut b).unwrap();
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(tag_a.as_slice(), &tag_b[..]);
            b.extend_from_slice(&tag_b);
            prop_assert!(x.verify(&nonce, &aad, &b).is_ok());
            prop_assert_eq!(&*x.open(&nonce, &aad, &mut b).unwrap(), &data[..]);
        }

        /// `verify` accepts exactly what `open` accepts: any flipped bit of the ciphertext,
        /// tag, nonce or associated data fails both.
        #[test]
        fn verify_agrees_with_open(key in any::<[u8; 32]>(), nonce in any::<[u8; 24]>(),
                                   aad in proptest::collection::vec(any::<u8>(), 1..40),
                                   data in proptest::collection::vec(any::<u8>(), 0..3000),
                                   flip in any::<usize>(), bit in 0u8..8, what in 0u8..3) {
            let x = XChaCha::new(&key);
            let mut sealed = data.clone();
            let tag = x.seal(&nonce, &aad, &mut sealed).unwrap();
            sealed.extend_from_slice(&tag);
            let (mut nonce, mut aad) = (nonce, aad);
            match what {
                0 => { let i = flip % sealed.len(); sealed[i] ^= 1 << bit; }
                1 => nonce[flip % NONCE] ^= 1 << bit,
                _ => { let i = flip % aad.len(); aad[i] ^= 1 << bit; }
            }
            prop_assert!(x.verify(&nonce, &aad, &sealed).is_err());
            prop_assert!(x.open(&nonce, &aad, &mut sealed.clone()).is_err());
            prop_assert!(x.verify(&nonce, &aad, &tag[..15]).is_err(), "shorter than a tag");
        }
    }

    #[test]
    fn draft_test_vector() {
        // draft-irtf-cfrg-xchacha-03, A.3.1.
        let key: [u8; 32] = std::array::from_fn(|i| 0x80 + i as u8);
        let nonce: [u8; 24] = std::array::from_fn(|i| 0x40 + i as u8);
        let aad = [
            0x50, 0x51, 0x52, 0x53, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xc7,
        ];
        let mut pt = b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".to_vec();
        let tag = XChaCha::new(&key).seal(&nonce, &aad, &mut pt).unwrap();
        assert_eq!(hex(&pt[..16]), "bd6d179d3e83d43b9576579493c0e939");
        assert_eq!(hex(&tag), "c0875924c1c7987947deafd8780acf49");
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }
}
