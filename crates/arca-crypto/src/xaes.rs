//! XAES-256-GCM (c2sp.org/XAES-256-GCM): a per-message AES-256-GCM key derived from the key
//! and the first half of a 192-bit nonce with the NIST SP 800-108r1 CMAC-AES-256 KDF, then
//! ring's AES-256-GCM with the second half. Random nonces are safe for any number of messages.

use aes::Aes256;
use aes::cipher::{BlockEncrypt, KeyInit};
use ring::aead::{AES_256_GCM, LessSafeKey, Nonce, UnboundKey};
use zeroize::Zeroizing;

use crate::xchacha::{Failed, NONCE, open_with, seal_with};

/// An XAES-256-GCM key: the AES-256 key schedule and the CMAC subkey K1, both computed once.
#[derive(Clone)]
pub(crate) struct Xaes {
    aes: Aes256,
    k1: Zeroizing<[u8; 16]>,
}

impl Xaes {
    pub fn new(key: &[u8; 32]) -> Self {
        let aes = Aes256::new(key.into());
        // L = AES(0¹²⁸); K1 = L << 1, xor 0x87 into the last byte when L's top bit was set.
        let mut l = aes::Block::default();
        aes.encrypt_block(&mut l);
        let mut k1 = Zeroizing::new([0u8; 16]);
        let top = l[0] >> 7;
        for i in 0..16 {
            k1[i] = (l[i] << 1) | l.get(i + 1).map_or(0, |b| b >> 7);
        }
        k1[15] ^= 0x87 * top;
        l.fill(0);
        Self { aes, k1 }
    }

    /// The derived AES-256-GCM key: AES(M1 ⊕ K1) ‖ AES(M2 ⊕ K1) with
    /// Mi = 0x00 ‖ i ‖ 'X' ‖ 0x00 ‖ nonce[..12]; the GCM nonce is nonce[12..].
    fn derive(&self, nonce: &[u8; NONCE]) -> Zeroizing<[u8; 32]> {
        let mut blocks = [aes::Block::default(), aes::Block::default()];
        for (i, b) in blocks.iter_mut().enumerate() {
            b[..4].copy_from_slice(&[0, i as u8 + 1, b'X', 0]);
            b[4..].copy_from_slice(&nonce[..12]);
            for (x, k) in b.iter_mut().zip(self.k1.iter()) {
                *x ^= k;
            }
        }
        self.aes.encrypt_blocks(&mut blocks);
        let mut key = Zeroizing::new([0u8; 32]);
        key[..16].copy_from_slice(&blocks[0]);
        key[16..].copy_from_slice(&blocks[1]);
        blocks.iter_mut().for_each(|b| b.fill(0));
        key
    }

    fn inner(&self, nonce: &[u8; NONCE]) -> Result<(LessSafeKey, Nonce), Failed> {
        let key = self.derive(nonce);
        let key = UnboundKey::new(&AES_256_GCM, &key[..]).map_err(|_| Failed)?;
        let mut n = [0u8; 12];
        n.copy_from_slice(&nonce[12..]);
        Ok((LessSafeKey::new(key), Nonce::assume_unique_for_key(n)))
    }

    /// XORs into `buf` the keystream that sealing with `nonce` applies to the plaintext's
    /// bytes from `offset` on: AES-256-CTR under the derived key, from counter block
    /// `nonce[12..] ‖ 2` (GCM's inc32 of J0; 32-bit counter, wrapping).
    #[allow(
        clippy::big_endian_bytes,
        reason = "GCM's counter block is big-endian (SP 800-38D)"
    )]
    pub fn keystream(&self, nonce: &[u8; NONCE], offset: u64, buf: &mut [u8]) {
        const BATCH: usize = 16;
        let key = self.derive(nonce);
        let aes = Aes256::new((&*key).into());
        let mut counter = 2u32.wrapping_add((offset / 16) as u32);
        let mut skip = (offset % 16) as usize;
        let mut blocks = [aes::Block::default(); BATCH];
        let mut done = 0;
        while done < buf.len() {
            let need = (skip + buf.len() - done).div_ceil(16).min(BATCH);
            for b in &mut blocks[..need] {
                b[..12].copy_from_slice(&nonce[12..]);
                b[12..].copy_from_slice(&counter.to_be_bytes());
                counter = counter.wrapping_add(1);
            }
            aes.encrypt_blocks(&mut blocks[..need]);
            let stream = blocks[..need].iter().flat_map(|b| b.iter()).skip(skip);
            for (x, k) in buf[done..].iter_mut().zip(stream) {
                *x ^= k;
                done += 1;
            }
            skip = 0;
        }
        blocks.iter_mut().for_each(|b| b.fill(0));
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

    /// Checks and decrypts `ct_and_tag` in place; returns the plaintext, the first part of
    /// the buffer.
    pub fn open<'b>(
        &self,
        nonce: &[u8; NONCE],
        aad: &[u8],
        ct_and_tag: &'b mut [u8],
    ) -> Result<&'b mut [u8], Failed> {
        open_with(self.inner(nonce)?, aad, ct_and_tag)
    }

    /// Checks the tag of `ct_and_tag` without changing it. ring has no GHASH-only check, so
    /// a copy is decrypted, in a buffer each thread keeps: a fresh one per blob cost prune's
    /// repacking more than the decryption (page faults, zeroing and unmapping each
    /// megabyte-sized copy were 13% of its CPU time, against 4% for AES-GCM). The plaintext
    /// left there is a blob's content, which restores and backups hold in plain buffers
    /// too; nothing of the key is.
    pub fn verify(&self, nonce: &[u8; NONCE], aad: &[u8], ct_and_tag: &[u8]) -> Result<(), Failed> {
        /// A scratch buffer grown beyond this is given back after use.
        const KEPT: usize = 16 << 20;
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let check = |copy: &mut Vec<u8>| {
            copy.clear();
            copy.extend_from_slice(ct_and_tag);
            let r = self.open(nonce, aad, copy).map(|_| ());
            if copy.capacity() > KEPT {
                *copy = Vec::new();
            }
            r
        };
        SCRATCH.with(|s| match s.try_borrow_mut() {
            Ok(mut copy) => check(&mut copy),
            // Re-entered on this thread (not expected): a buffer of its own.
            Err(_) => check(&mut Vec::new()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    /// Both vectors of the specification, with its intermediate values: the first has
    /// MSB(L) = 0, the second MSB(L) = 1 (so both branches of K1 are checked).
    #[test]
    fn specification_vectors() {
        let cases = [
            (
                [1u8; 32],
                "e531954aca063d5b8d9c47a47d4cc6f0",
                "c8612c9ed53fe43e8e005b828a1631a0bbcb6ab2f46514ec4f439fcfd0fa969b",
                &b""[..],
                "ce546ef63c9cc60765923609b33a9a1974e96e52daf2fcf7075e2271",
            ),
            (
                [3u8; 32],
                "23810ec50edb99f374409466ed1f4b7b",
                "e9c621d4cdd9b11b00a6427ad7e559aeedd66b3857646677748f8ca796cb3fd8",
                &b"c2sp.org/XAES-256-GCM"[..],
                "986ec1832593df5443a179437fd083bf3fdb41abd740a21f71eb769d",
            ),
        ];
        let nonce: [u8; 24] = *b"ABCDEFGHIJKLMNOPQRSTUVWX";
        for (key, k1, kx, aad, sealed) in cases {
            let x = Xaes::new(&key);
            assert_eq!(&x.k1[..], &unhex(k1)[..]);
            assert_eq!(&x.derive(&nonce)[..], &unhex(kx)[..]);
            let mut buf = b"XAES-256-GCM".to_vec();
            let tag = x.seal(&nonce, aad, &mut buf).unwrap();
            buf.extend_from_slice(&tag);
            assert_eq!(buf, unhex(sealed));
            x.verify(&nonce, aad, &buf).unwrap();
            assert_eq!(x.open(&nonce, aad, &mut buf).unwrap(), b"XAES-256-GCM");
        }
    }

    proptest! {
        #[test]
        fn round_trip_and_tamper(key in any::<[u8; 32]>(), nonce in any::<[u8; 24]>(),
                                 aad in proptest::collection::vec(any::<u8>(), 0..40),
                                 data in proptest::collection::vec(any::<u8>(), 0..3000),
                                 flip in any::<usize>()) {
            let x = Xaes::new(&key);
            let mut buf = data.clone();
            let tag = x.seal(&nonce, &aad, &mut buf).unwrap();
            buf.extend_from_slice(&tag);
            prop_assert!(x.verify(&nonce, &aad, &buf).is_ok());
            let mut bad = buf.clone();
            let i = flip % bad.len();
            bad[i] ^= 1;
            prop_assert!(x.verify(&nonce, &aad, &bad).is_err());
            prop_assert!(x.open(&nonce, &aad, &mut bad).is_err());
            let mut other = nonce;
            other[flip % 24] ^= 0x80;
            prop_assert!(x.verify(&other, &aad, &buf).is_err());
            prop_assert_eq!(x.open(&nonce, &aad, &mut buf).unwrap(), &data[..]);
        }
    }
}
