//! XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha) as its definition builds it: HChaCha20 turns
//! the key and the first 16 nonce bytes into a subkey, then IETF ChaCha20-Poly1305 runs with
//! nonce `0⁴ ‖ nonce[16..24]`. The second half is ring's assembly implementation, several
//! times faster than a portable one; the bytes are the same (a test checks them against the
//! RustCrypto implementation).

use chacha20::cipher::consts::U10;
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

    /// The per-nonce ChaCha20-Poly1305 key and nonce.
    fn inner(&self, nonce: &[u8; NONCE]) -> Result<(LessSafeKey, Nonce), Failed> {
        let mut input = [0u8; 16];
        input.copy_from_slice(&nonce[..16]);
        let mut sub = Zeroizing::new([0u8; 32]);
        let mut derived = chacha20::hchacha::<U10>((&*self.key).into(), (&input).into());
        sub.copy_from_slice(&derived);
        derived.as_mut_slice().fill(0);
        let key = UnboundKey::new(&CHACHA20_POLY1305, &sub[..]).map_err(|_| Failed)?;
        let mut n = [0u8; 12];
        n[4..].copy_from_slice(&nonce[16..]);
        Ok((LessSafeKey::new(key), Nonce::assume_unique_for_key(n)))
    }

    /// Encrypts `buf` in place; returns the tag.
    pub fn seal(
        &self,
        nonce: &[u8; NONCE],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 16], Failed> {
        let (key, n) = self.inner(nonce)?;
        let tag: Tag = key
            .seal_in_place_separate_tag(n, Aad::from(aad), buf)
            .map_err(|_| Failed)?;
        let mut out = [0u8; 16];
        out.copy_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Checks and decrypts `ct_and_tag` (ciphertext followed by the 16-byte tag) in place;
    /// returns the plaintext, the first part of the buffer.
    pub fn open<'b>(
        &self,
        nonce: &[u8; NONCE],
        aad: &[u8],
        ct_and_tag: &'b mut [u8],
    ) -> Result<&'b mut [u8], Failed> {
        let (key, n) = self.inner(nonce)?;
        key.open_in_place(n, Aad::from(aad), ct_and_tag)
            .map_err(|_| Failed)
    }
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
            prop_assert_eq!(&*x.open(&nonce, &aad, &mut b).unwrap(), &data[..]);
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
