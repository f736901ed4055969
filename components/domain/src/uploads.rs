//! Resumable uploads: how a declared file is cut into parts, and what each part must be.
//! Parts are numbered from 1; every part but the last is exactly `part_size` bytes, the last
//! the rest. A part size is a whole number of storage chunks (1 MiB), so part `n`'s chunks
//! are chunks `(n - 1) * chunks_per_part ..` of the finished file.

/// The storage chunk: files live in the key-value store in chunks of this size.
pub const CHUNK_SIZE: u64 = 1024 * 1024;
/// The largest part (and the default part size): below Fermyon Wasm Functions' ~10 MiB
/// request body cap.
pub const MAX_PART_SIZE: u64 = 8 * CHUNK_SIZE;
/// How long an upload may take, from its creation, before the prune job removes it.
pub const UPLOAD_TTL_SECS: i64 = 24 * 3600;
/// Uploads one user may have open at once.
pub const MAX_OPEN_UPLOADS_PER_USER: i64 = 20;

/// How a declared file is cut into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartPlan {
    pub size: u64,
    pub part_size: u64,
    pub part_count: u64,
}

/// Why a declared upload cannot be planned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanError {
    /// `size` is 0 (send an empty file in one request) or above the upload limit.
    Size,
    /// `part_size` is not a whole number of MiB from 1 to 8.
    PartSize,
}

impl PartPlan {
    /// The plan of a `size`-byte file in parts of `part_size` (default [`MAX_PART_SIZE`]),
    /// within the upload limit `max`.
    pub fn new(size: u64, part_size: Option<u64>, max: u64) -> Result<PartPlan, PlanError> {
        if size == 0 || size > max {
            return Err(PlanError::Size);
        }
        let part_size = part_size.unwrap_or(MAX_PART_SIZE);
        if part_size == 0 || part_size > MAX_PART_SIZE || !part_size.is_multiple_of(CHUNK_SIZE) {
            return Err(PlanError::PartSize);
        }
        Ok(PartPlan {
            size,
            part_size,
            part_count: size.div_ceil(part_size),
        })
    }

    /// The exact length of part `n` (1-based), or `None` when there is no such part.
    pub fn part_len(&self, n: u64) -> Option<u64> {
        if n == 0 || n > self.part_count {
            return None;
        }
        Some(if n == self.part_count {
            self.size - (self.part_count - 1) * self.part_size
        } else {
            self.part_size
        })
    }

    /// The storage chunks of one part.
    pub fn chunks_per_part(&self) -> u64 {
        self.part_size / CHUNK_SIZE
    }

    /// The index, in the finished file, of chunk `k` of part `n`.
    pub fn file_chunk(&self, n: u64, k: u64) -> u64 {
        (n - 1) * self.chunks_per_part() + k
    }
}

/// The part numbers of `1..=part_count` missing from `received` (sorted or not).
pub fn missing_parts(part_count: u64, received: &[u64]) -> Vec<u64> {
    (1..=part_count).filter(|n| !received.contains(n)).collect()
}

/// Whether `text` is a SHA-256 in lowercase hex (what the API answers; a declared one is
/// lowercased first).
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = CHUNK_SIZE;

    #[test]
    fn a_file_is_cut_into_full_parts_and_a_rest() {
        let plan = PartPlan::new(20 * MIB + 5, None, 100 * MIB).unwrap();
        assert_eq!((plan.part_size, plan.part_count), (8 * MIB, 3));
        assert_eq!(plan.part_len(1), Some(8 * MIB));
        assert_eq!(plan.part_len(2), Some(8 * MIB));
        assert_eq!(plan.part_len(3), Some(4 * MIB + 5));
        assert_eq!(plan.part_len(0), None);
        assert_eq!(plan.part_len(4), None);
        assert_eq!(plan.chunks_per_part(), 8);
        assert_eq!(plan.file_chunk(1, 0), 0);
        assert_eq!(plan.file_chunk(3, 4), 20);
        let exact = PartPlan::new(16 * MIB, None, 100 * MIB).unwrap();
        assert_eq!((exact.part_count, exact.part_len(2)), (2, Some(8 * MIB)));
        let small = PartPlan::new(10, Some(MIB), 100 * MIB).unwrap();
        assert_eq!((small.part_count, small.part_len(1)), (1, Some(10)));
    }

    #[test]
    fn sizes_and_part_sizes_are_bounded() {
        assert_eq!(PartPlan::new(0, None, MIB), Err(PlanError::Size));
        assert_eq!(PartPlan::new(MIB + 1, None, MIB), Err(PlanError::Size));
        assert!(PartPlan::new(MIB, None, MIB).is_ok());
        for bad in [0, MIB - 1, MIB + 1, 9 * MIB, 16 * MIB] {
            assert_eq!(
                PartPlan::new(MIB, Some(bad), MIB),
                Err(PlanError::PartSize),
                "{bad}"
            );
        }
        assert_eq!(
            PartPlan::new(3 * MIB, Some(2 * MIB), 4 * MIB)
                .unwrap()
                .part_count,
            2
        );
    }

    #[test]
    fn missing_parts_are_listed_in_order() {
        assert_eq!(missing_parts(5, &[4, 1, 2]), [3, 5]);
        assert!(missing_parts(2, &[2, 1]).is_empty());
    }

    #[test]
    fn sha256_is_64_lowercase_hex_digits() {
        assert!(is_sha256_hex(&"ab".repeat(32)));
        assert!(!is_sha256_hex(&"AB".repeat(32)));
        assert!(!is_sha256_hex(&"ab".repeat(31)));
        assert!(!is_sha256_hex(&"zz".repeat(32)));
    }
}
