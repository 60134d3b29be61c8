//! "Did you mean ...?" for misspelt keys and names.

/// Levenshtein distance over characters (Wagner–Fischer, two rows).
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The closest candidate, if it is close enough to be a likely typo
/// (at most a third of the word's length changed, and at least one edit allowed).
pub(crate) fn closest<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let limit = (word.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (edit_distance(&word.to_lowercase(), &c.to_lowercase()), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// A fix for an unknown word: the likely intended one, or the list of valid ones.
pub(crate) fn fix_for_unknown(word: &str, candidates: &[&str], what: &str) -> String {
    match closest(word, candidates) {
        Some(c) => format!("did you mean `{c}`?"),
        None if candidates.is_empty() => format!("remove it (no {what} are allowed here)"),
        None => format!("remove it or use one of the valid {what}: {}", candidates.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("cpu_pc", "cpu_pct"), 1);
        assert_eq!(edit_distance("same", "same"), 0);
    }

    #[test]
    fn suggests_only_close_words() {
        let keys = ["cpu_pct", "wakeups_per_s", "memory_mb"];
        assert_eq!(closest("cpu_pc", &keys), Some("cpu_pct"));
        assert_eq!(closest("memroy_mb", &keys), Some("memory_mb"));
        assert_eq!(closest("colour", &keys), None);
        assert_eq!(fix_for_unknown("cpu_pc", &keys, "keys"), "did you mean `cpu_pct`?");
        assert_eq!(
            fix_for_unknown("zzz", &keys, "keys"),
            "remove it or use one of the valid keys: cpu_pct, wakeups_per_s, memory_mb"
        );
    }
}
