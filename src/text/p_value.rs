//! P-values for people, in the two styles the lab prints.

/// `0.360` from 0.001 up, `2.7e-8` below, `0` for an exact zero: the report's tables,
/// where three decimals line up and a tiny p still shows its size.
pub fn table(p: f64) -> String {
    if p == 0.0 {
        "0".into()
    } else if p >= 0.001 {
        format!("{p:.3}")
    } else {
        format!("{p:.1e}")
    }
}

/// `3.60e-1`, `2.70e-8`, `0` for an exact zero, `-` for NaN: `lab changes`, whose
/// p-values span many magnitudes in one column.
pub fn scientific(p: f64) -> String {
    if p.is_nan() {
        "-".into()
    } else if p == 0.0 {
        "0".into()
    } else {
        format!("{p:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_p_values() {
        assert_eq!(table(0.35999), "0.360");
        assert_eq!(table(2.7e-8), "2.7e-8");
        assert_eq!(table(0.0), "0");
    }

    #[test]
    fn scientific_p_values() {
        assert_eq!(scientific(0.35999), "3.60e-1");
        assert_eq!(scientific(2.7e-8), "2.70e-8");
        assert_eq!(scientific(0.0), "0");
        assert_eq!(scientific(f64::NAN), "-");
    }
}
