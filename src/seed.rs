//! Deterministic seeds derived from the campaign seed and names.
//!
//! Every random choice in a campaign (run order, simulator noise, injected faults)
//! draws from a ChaCha8 stream seeded by `derive(seed, parts)`, so the same runbook
//! and seed give the same campaign on any machine, in any thread interleaving.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};

/// A 64-bit seed from a base seed and a path of names (sha256, first 8 bytes).
pub fn derive(seed: u64, parts: &[&str]) -> u64 {
    let mut h = Sha256::new();
    h.update(seed.to_le_bytes());
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
}

pub fn rng(seed: u64, parts: &[&str]) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(derive(seed, parts))
}

/// Hex sha256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Hex sha256 of `value`'s JSON text (as `serde_json::to_string` writes it), hashed as it
/// is written: a plan of 144 000 trials never becomes one String for it.
pub fn sha256_hex_json<T: serde::Serialize>(value: &T) -> String {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.update(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = Hashing(Sha256::new());
    let _ = serde_json::to_writer(&mut h, value);
    hex::encode(h.0.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_hash_is_the_hash_of_the_json_text() {
        let v = serde_json::json!({ "a": [1, 2.5, "x"], "b": null });
        assert_eq!(sha256_hex_json(&v), sha256_hex(serde_json::to_string(&v).unwrap().as_bytes()));
    }

    #[test]
    fn derive_is_stable_and_separates_parts() {
        assert_eq!(derive(1, &["a", "b"]), derive(1, &["a", "b"]));
        assert_ne!(derive(1, &["ab"]), derive(1, &["a", "b"]));
        assert_ne!(derive(1, &["a"]), derive(2, &["a"]));
    }
}
