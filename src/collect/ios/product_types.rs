//! An iPhone's `ProductType` (lockdown's `iPhone14,2`) as the name it is sold under
//! (`iPhone 13 Pro`), for `lab discover`'s model column and device names.
//!
//! Source: Apple's "Identify your iPhone model" (support.apple.com/en-us/108044) for the
//! names, The iPhone Wiki's "Models" table (theiphonewiki.com/wiki/Models) for which
//! identifier each model has; iPhone 6s (2015, the oldest iOS 15 runs on) to the 2025
//! models. An identifier not listed stays as it is.

const NAMES: &[(&str, &str)] = &[
    ("iPhone8,1", "iPhone 6s"),
    ("iPhone8,2", "iPhone 6s Plus"),
    ("iPhone8,4", "iPhone SE (1st generation)"),
    ("iPhone9,1", "iPhone 7"),
    ("iPhone9,3", "iPhone 7"),
    ("iPhone9,2", "iPhone 7 Plus"),
    ("iPhone9,4", "iPhone 7 Plus"),
    ("iPhone10,1", "iPhone 8"),
    ("iPhone10,4", "iPhone 8"),
    ("iPhone10,2", "iPhone 8 Plus"),
    ("iPhone10,5", "iPhone 8 Plus"),
    ("iPhone10,3", "iPhone X"),
    ("iPhone10,6", "iPhone X"),
    ("iPhone11,2", "iPhone XS"),
    ("iPhone11,4", "iPhone XS Max"),
    ("iPhone11,6", "iPhone XS Max"),
    ("iPhone11,8", "iPhone XR"),
    ("iPhone12,1", "iPhone 11"),
    ("iPhone12,3", "iPhone 11 Pro"),
    ("iPhone12,5", "iPhone 11 Pro Max"),
    ("iPhone12,8", "iPhone SE (2nd generation)"),
    ("iPhone13,1", "iPhone 12 mini"),
    ("iPhone13,2", "iPhone 12"),
    ("iPhone13,3", "iPhone 12 Pro"),
    ("iPhone13,4", "iPhone 12 Pro Max"),
    ("iPhone14,4", "iPhone 13 mini"),
    ("iPhone14,5", "iPhone 13"),
    ("iPhone14,2", "iPhone 13 Pro"),
    ("iPhone14,3", "iPhone 13 Pro Max"),
    ("iPhone14,6", "iPhone SE (3rd generation)"),
    ("iPhone14,7", "iPhone 14"),
    ("iPhone14,8", "iPhone 14 Plus"),
    ("iPhone15,2", "iPhone 14 Pro"),
    ("iPhone15,3", "iPhone 14 Pro Max"),
    ("iPhone15,4", "iPhone 15"),
    ("iPhone15,5", "iPhone 15 Plus"),
    ("iPhone16,1", "iPhone 15 Pro"),
    ("iPhone16,2", "iPhone 15 Pro Max"),
    ("iPhone17,3", "iPhone 16"),
    ("iPhone17,4", "iPhone 16 Plus"),
    ("iPhone17,1", "iPhone 16 Pro"),
    ("iPhone17,2", "iPhone 16 Pro Max"),
    ("iPhone17,5", "iPhone 16e"),
    ("iPhone18,3", "iPhone 17"),
    ("iPhone18,4", "iPhone Air"),
    ("iPhone18,1", "iPhone 17 Pro"),
    ("iPhone18,2", "iPhone 17 Pro Max"),
];

/// The model name of `product_type`, if it is one of the table's.
pub fn model_name(product_type: &str) -> Option<&'static str> {
    NAMES.iter().find(|(id, _)| *id == product_type).map(|(_, name)| *name)
}

/// The model name, else the identifier itself.
pub fn model_or_identifier(product_type: &str) -> String {
    model_name(product_type).map_or_else(|| product_type.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_name_their_model_and_unknown_ones_stay_as_they_are() {
        assert_eq!(model_name("iPhone14,2"), Some("iPhone 13 Pro"));
        assert_eq!(model_name("iPhone12,8"), Some("iPhone SE (2nd generation)"));
        assert_eq!(model_name("iPhone17,5"), Some("iPhone 16e"));
        assert_eq!(model_name("iPhone99,1"), None);
        assert_eq!(model_or_identifier("iPad13,4"), "iPad13,4");
        // One row per identifier.
        let mut ids: Vec<&str> = NAMES.iter().map(|(id, _)| *id).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), NAMES.len());
    }
}
