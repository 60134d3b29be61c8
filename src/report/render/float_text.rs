//! Numbers as results.csv prints them: byte for byte what `{}` writes (Rust's shortest
//! text that reads back the same), about twice as fast.
//!
//! A million values through `{}` were a third of writing results.csv. Żmij (the `zmij`
//! crate, by the author of `ryu`) finds the same shortest digits faster, but lays them
//! out in its own way (`1.0`, `1e21`) and, where two shortest texts are equally near,
//! picks the even last digit where `{}` rounds the half up (`13380235921553.3125`:
//! `…553.312` against `…553.313`). So:
//! - integers below 2^53 are printed as integers (`{}` prints `45` and `-0`);
//! - exponent layouts, NaN and infinities go to `{}`;
//! - so does any value whose digits could be a tie or sit on the edge of the rounding
//!   interval. Both need the value's binary expansion to end within two places of the
//!   last printed decimal digit (the exact value has at most one digit more, a 5, or
//!   the edge is a short decimal), which the 2-adic valuation tells: that is the
//!   `valuation >= last_place - 2` test, a place of margin kept. Measurements with
//!   noise are never such values; a few in a thousand (`0.125`) are.
//!
//! The tests compare the two over a million values from generators made to hit ties.

/// Appends `x` to `out` exactly as `write!(out, "{}", x)` would.
pub fn push_f64(out: &mut Vec<u8>, x: f64) {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < (1u64 << 53) as f64 {
        if x == 0.0 {
            out.extend_from_slice(if x.is_sign_negative() { b"-0" } else { b"0" });
        } else {
            // Exact: every integer below 2^53 is an i64 and a double.
            out.extend_from_slice(itoa::Buffer::new().format(x as i64).as_bytes());
        }
        return;
    }
    let mut buf = zmij::Buffer::new();
    match x.is_finite().then(|| buf.format_finite(x)).filter(|s| digits_are_std(x, s)) {
        Some(s) => out.extend_from_slice(s.as_bytes()),
        None => out.extend_from_slice(x.to_string().as_bytes()),
    }
}

/// Whether Żmij's text `s` of the finite non-integer `x` is `{}`'s.
fn digits_are_std(x: f64, s: &str) -> bool {
    if s.contains('e') {
        return false;
    }
    let Some((_, frac)) = s.split_once('.') else { return false };
    if frac == "0" {
        return false;
    }
    // The last printed digit's place: 10^last_place.
    let last_place = -(frac.len() as i32);
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mantissa, e2) = if exp == 0 { (fraction, -1074) } else { (fraction | (1u64 << 52), exp - 1075) };
    // x = odd × 2^valuation.
    let valuation = e2 + mantissa.trailing_zeros() as i32;
    valuation < last_place - 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn ours(x: f64) -> String {
        let mut out = Vec::new();
        push_f64(&mut out, x);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn edge_values_print_as_display_does() {
        let tricky = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1 + 0.2,
            0.125,
            0.4,
            45.0,
            1e15,
            1e16,
            1e21,
            1e22,
            1e-5,
            1e-7,
            123456789.0,
            4503599627370495.5,
            9007199254740991.0,
            9007199254740992.0,
            9007199254740994.0,
            // Exactly halfway between two shortest texts (written as sums: both exact).
            13380235921553.0 + 0.3125,
            -(854727935336007.0 + 0.25),
            f64::MIN_POSITIVE,
            5e-324,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            2.623906705539359,
        ];
        for x in tricky {
            assert_eq!(ours(x), x.to_string(), "{x:?}");
        }
        // Ties: both shortest texts equally near, `{}` takes the one above.
        assert_eq!(ours(13380235921553.0 + 0.3125), "13380235921553.313");
    }

    #[test]
    fn a_million_values_made_to_hit_ties_and_edges_print_as_display_does() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x5eed);
        for i in 0..1_000_000u32 {
            let x = match i % 7 {
                0 => f64::from_bits(rng.random::<u64>()),
                1 => rng.random::<f64>() * 100.0,
                2 => f64::from(rng.random_range(0..100_000u32)) / 1000.0,
                3 => rng.random_range(-1e6..1e6) * 10f64.powi(rng.random_range(-20..25)),
                // Few fractional bits at large magnitudes: where ties are.
                4 => (rng.random_range(0..1u64 << 53) as f64) / 2f64.powi(rng.random_range(0..12)),
                5 => (rng.random_range(0..1u64 << 53) as f64) * 2f64.powi(rng.random_range(-60..5)),
                // The neighbours of short decimals: where the interval's edges are.
                _ => {
                    let base = f64::from(rng.random_range(0..1_000_000u32)) / 10f64.powi(rng.random_range(0..8));
                    f64::from_bits(base.to_bits().wrapping_add_signed(rng.random_range(-3i64..4)))
                }
            };
            assert_eq!(ours(x), x.to_string(), "{x:?}");
        }
    }
}
