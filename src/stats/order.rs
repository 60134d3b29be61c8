//! Order statistics.

/// Median: the middle value of the sorted sample, or the mean of the two middle values
/// when n is even (Hyndman & Fan, "Sample Quantiles in Statistical Packages", The
/// American Statistician 50(4), 1996: definition 7 at p = 0.5, R's default).
/// `None` for an empty slice or one holding NaN (NaN has no place in an order).
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[mid]
    } else {
        // Halve before adding so two values near f64::MAX do not overflow.
        v[mid - 1] / 2.0 + v[mid] / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }
}
