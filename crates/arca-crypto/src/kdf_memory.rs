//! The Argon2 memory matrix in a fresh anonymous mapping with transparent huge pages asked
//! for: 32 faults of 2 MiB instead of 16,384 of 4 KiB, and no serial zeroing pass before the
//! lanes start (the system allocator zero-fills over-aligned allocations by hand).
//!
//! This is the crate's only `unsafe`: mapping, advising and unmapping memory, and viewing the
//! mapping as Argon2 blocks. The reasoning is written next to each block.
#![allow(unsafe_code)]

use argon2::Block;

/// Huge page size on x86-64 and arm64 with 4 KiB base pages; the start of the matrix is
/// aligned to it so that every 2 MiB of it can be one huge page.
const HUGE_PAGE: usize = 2 << 20;

/// An anonymous private mapping holding `blocks` Argon2 blocks, unmapped on drop.
pub(crate) struct KdfMemory {
    /// Start of the mapping, as `mmap` returned it.
    base: *mut libc::c_void,
    /// Length of the mapping.
    map_len: usize,
    /// First byte of the matrix (`base` rounded up to a huge page).
    start: *mut u8,
    /// Blocks in the matrix.
    blocks: usize,
}

impl KdfMemory {
    /// Maps memory for `blocks` blocks; `None` if the mapping fails (the caller then lets
    /// Argon2 allocate).
    pub(crate) fn new(blocks: usize) -> Option<Self> {
        let len = blocks.checked_mul(size_of::<Block>())?;
        let map_len = len.checked_add(HUGE_PAGE)?;
        // SAFETY: a new private anonymous mapping at an address of the kernel's choosing
        // touches no existing memory; failure is checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED || base.is_null() {
            return None;
        }
        let offset = (HUGE_PAGE - (base as usize) % HUGE_PAGE) % HUGE_PAGE;
        // SAFETY: offset < HUGE_PAGE, so `start..start + len` lies inside the mapping.
        let start = unsafe { base.cast::<u8>().add(offset) };
        // Advice only: where huge pages are off or unavailable this fails or is ignored and
        // the kernel uses small pages, which is correct, just slower.
        // SAFETY: the range lies inside our own mapping; MADV_HUGEPAGE changes no contents.
        let _ = unsafe { libc::madvise(start.cast(), len, libc::MADV_HUGEPAGE) };
        Some(Self {
            base,
            map_len,
            start,
            blocks,
        })
    }

    /// The matrix.
    pub(crate) fn blocks(&mut self) -> &mut [Block] {
        // SAFETY: `start` is aligned to 2 MiB (more than Block's 64-byte alignment) and
        // `blocks * size_of::<Block>()` bytes from it lie inside the mapping, which lives as
        // long as `self` and is reachable only through this `&mut self` borrow. Anonymous
        // mappings are zero-filled and a Block is an array of u64, for which every bit
        // pattern (zero included) is a valid value.
        unsafe { std::slice::from_raw_parts_mut(self.start.cast::<Block>(), self.blocks) }
    }
}

impl Drop for KdfMemory {
    fn drop(&mut self) {
        // Unmapping returns the pages to the kernel, which clears them before any other use,
        // so the password-derived matrix does not outlive this call in this process.
        // SAFETY: `base`/`map_len` are exactly the mapping made in `new`, unmapped once; no
        // borrow of it can outlive `self`.
        let _ = unsafe { libc::munmap(self.base, self.map_len) };
    }
}

// SAFETY: the mapping is owned exclusively (like a Box<[Block]>); moving it to another thread
// moves that ownership.
unsafe impl Send for KdfMemory {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_matrix_is_zeroed_aligned_and_writable() {
        let mut m = KdfMemory::new(1024).expect("mmap");
        let blocks = m.blocks();
        assert_eq!(blocks.len(), 1024);
        assert_eq!(blocks.as_ptr() as usize % HUGE_PAGE, 0);
        assert!(blocks.iter().all(|b| b.as_ref().iter().all(|&w| w == 0)));
        blocks[1023].as_mut()[127] = 7;
        assert_eq!(m.blocks()[1023].as_ref()[127], 7);
    }
}
