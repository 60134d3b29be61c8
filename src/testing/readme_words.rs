//! The README stays short (CONTRIBUTING.md): flags live in `lab help` and the man pages,
//! figures and details in docs/.

/// CONTRIBUTING.md's limit, counted as `wc -w` counts.
const README_MAX_WORDS: usize = 1500;

#[test]
fn the_readme_stays_within_its_word_limit() {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let words = text.split_whitespace().count();
    assert!(
        words <= README_MAX_WORDS,
        "README.md has {words} words, over {README_MAX_WORDS}; move details to docs/ and link them"
    );
}
