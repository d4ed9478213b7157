//! `check --read-data-subset`: which packs a partial read of the data covers (a group n/m by
//! the first byte of the pack id, as restic; a random share; random packs up to a size).

use std::collections::HashSet;

use arca_format::Id;

/// Which packs `check` reads, as restic's `--read-data-subset` chooses them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DataSubset {
    /// Group `n` (from 1) of `of` groups (at most 256): the packs whose id's first byte is
    /// `n - 1` modulo `of`. Checking `1/m` … `m/m` in turn reads every pack exactly once.
    Group {
        /// The group, from 1 to `of`.
        n: u32,
        /// How many groups.
        of: u32,
    },
    /// A random share of the packs, in percent (above 0, at most 100); at least one pack.
    Percent(f64),
    /// Random packs adding up to about this many bytes (as the same share of the packs).
    Bytes(u64),
}

/// Most groups `n/m` can name: the selection looks at one byte of the pack id.
pub const MAX_GROUPS: u32 = 256;

impl DataSubset {
    /// Parses `n/m`, `x%` (`x.y%`) or a size as the other size options read it (`500M`, `2G`,
    /// `1.5T`, `4096`: `K`, `M`, `G`, `T`, `KiB`, `MiB`… count in powers of 1024, as restic's;
    /// `KB`, `MB`… are decimal), with restic's limits.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let bad = || format!("invalid --read-data-subset {s:?}: use n/m, x% or a size");
        if let Some((n, m)) = s.split_once('/') {
            let n: u32 = n.trim().parse().map_err(|_| bad())?;
            let of: u32 = m.trim().parse().map_err(|_| bad())?;
            if n == 0 || of == 0 || n > of {
                return Err(format!(
                    "--read-data-subset {s:?}: n/m must be positive integers with n <= m"
                ));
            }
            if of > MAX_GROUPS {
                return Err(format!(
                    "--read-data-subset {s:?}: m must be at most {MAX_GROUPS}"
                ));
            }
            return Ok(Self::Group { n, of });
        }
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(format!(
                    "--read-data-subset {s:?}: the percentage must be above 0 and at most 100"
                ));
            }
            return Ok(Self::Percent(p));
        }
        // The same size reading as every other size option (`arca_format::text::parse_size`):
        // it read `500MB` as 500 MiB, where the README and `--exclude-larger-than` read
        // 500,000,000 bytes.
        let bytes = arca_format::text::parse_size(s).map_err(|e| {
            if e.ends_with(arca_format::text::NOT_WHOLE_BYTES) {
                format!("--read-data-subset {s:?}: a size in bytes must be a whole number")
            } else {
                bad()
            }
        })?;
        if bytes == 0 {
            return Err(format!(
                "--read-data-subset {s:?}: the size must be above 0"
            ));
        }
        Ok(Self::Bytes(bytes))
    }

    /// The packs (id and size) of `packs` this subset reads. Random shares use a seed drawn
    /// for this process, so successive checks read different packs.
    pub fn select(&self, packs: &[(Id, u64)]) -> HashSet<Id> {
        self.select_seeded(packs, random_seed())
    }

    /// [`DataSubset::select`] with a given seed for the random shares.
    pub fn select_seeded(&self, packs: &[(Id, u64)], seed: u64) -> HashSet<Id> {
        match *self {
            Self::Group { n, of } => packs
                .iter()
                .filter(|(id, _)| u32::from(id.0[0]) % of.max(1) == n.saturating_sub(1))
                .map(|(id, _)| *id)
                .collect(),
            Self::Percent(p) => random_share(packs, p, seed),
            Self::Bytes(b) => {
                let total: u64 = packs.iter().map(|(_, s)| *s).sum();
                if total == 0 {
                    return packs.iter().map(|(id, _)| *id).collect();
                }
                let p = (b.min(total) as f64 / total as f64) * 100.0;
                random_share(packs, p, seed)
            }
        }
    }
}

impl std::fmt::Display for DataSubset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Group { n, of } => write!(f, "{n}/{of}"),
            Self::Percent(p) => write!(f, "{p}%"),
            // A cap: the packs read may hold fewer.
            Self::Bytes(b) => write!(f, "up to {}", arca_format::text::human_bytes(*b)),
        }
    }
}

/// A seed that differs from process to process (std's per-process random hasher keys).
fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one(nanos)
}

/// SplitMix64: a small, good-enough generator for picking packs.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `percent` of `packs` (rounded down, at least one), chosen at random, as restic does.
fn random_share(packs: &[(Id, u64)], percent: f64, seed: u64) -> HashSet<Id> {
    let mut ids: Vec<Id> = packs.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    let mut want = (ids.len() as f64 * (percent / 100.0)) as usize;
    if !ids.is_empty() {
        want = want.clamp(1, ids.len());
    }
    // A partial Fisher-Yates shuffle: the first `want` slots are a uniform random choice.
    let mut state = seed;
    for i in 0..want {
        let left = (ids.len() - i) as u64;
        let j = i + (splitmix(&mut state) % left) as usize;
        ids.swap(i, j);
    }
    ids.truncate(want);
    ids.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes read as every other size option reads them: `KB`, `MB`… decimal (`500MB` read
    /// 500 MiB), `K`, `MiB`… binary.
    #[test]
    fn subset_sizes_read_as_the_other_size_options() {
        let bytes = |s: &str| DataSubset::parse(s);
        assert_eq!(bytes("500MB"), Ok(DataSubset::Bytes(500_000_000)));
        assert_eq!(bytes("1kb"), Ok(DataSubset::Bytes(1000)));
        assert_eq!(bytes("2GB"), Ok(DataSubset::Bytes(2_000_000_000)));
        assert_eq!(bytes("500MiB"), Ok(DataSubset::Bytes(500 << 20)));
        assert_eq!(bytes("500M"), Ok(DataSubset::Bytes(500 << 20)));
        assert_eq!(bytes("1.5K"), Ok(DataSubset::Bytes(1536)));
        assert_eq!(bytes(" 4096 "), Ok(DataSubset::Bytes(4096)));
        // A fraction of a byte is no size; below one byte neither.
        for bad in ["0.5", "1.5B", "1.5", "0.0001K", "0B", "5XB"] {
            assert!(bytes(bad).is_err(), "{bad:?} accepted");
        }
    }
}
