//! Submit from the page: a runbook of the lab's runbook folder (`[serve] runbooks`) and a
//! priority, submitted to the agents as `lab submit` does. The form's name is only ever
//! looked up among the folder's own listing, never joined to a path as given, so no name
//! (`../x`, `/etc/passwd`, a name with a NUL) reaches anything outside the folder.

use std::path::{Path, PathBuf};

use crate::config::Lab;
use crate::runner::{self, LaunchError, Submitted};

/// Why a submit from the page was not done.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error(
        "the runbook folder {dir} cannot be read: {source}; fix: create it, or name another with `[serve] runbooks` in \
the lab file"
    )]
    Folder { dir: PathBuf, source: std::io::Error },
    #[error("`{name}` is not a runbook of {dir}; fix: pick one the Submit page lists")]
    NotListed { name: String, dir: PathBuf },
    #[error("priority `{0}` is not a whole number; fix: leave it empty (0) or write e.g. 10 or -5")]
    Priority(String),
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// The runbooks the Submit page offers: the names of the `*.toml` files directly in
/// `dir` (a link to a file counts: the folder's owner put it there), sorted.
pub fn runbooks(dir: &Path) -> Result<Vec<String>, SubmitError> {
    let folder = |source| SubmitError::Folder { dir: dir.to_path_buf(), source };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(folder)? {
        let entry = entry.map_err(folder)?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        if name.ends_with(".toml") && !name.starts_with('.') && entry.path().is_file() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Submits the runbook the form names (one of [`runbooks`]) with the form's priority
/// (empty: 0).
pub fn submit(lab: &Lab, name: &str, priority: &str) -> Result<Submitted, SubmitError> {
    let priority = match priority.trim() {
        "" => 0,
        p => p.parse::<i32>().map_err(|_| SubmitError::Priority(p.chars().take(40).collect()))?,
    };
    let dir = &lab.serve.runbooks;
    let listed = runbooks(dir)?;
    let Some(known) = listed.iter().find(|n| n.as_str() == name) else {
        return Err(SubmitError::NotListed { name: name.escape_default().take(200).collect(), dir: dir.clone() });
    };
    Ok(runner::submit(lab, &dir.join(known), priority)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_folders_own_toml_files_are_listed() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.toml", "a.toml", "notes.txt", ".hidden.toml"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        std::fs::create_dir(dir.path().join("sub.toml")).unwrap();
        assert_eq!(runbooks(dir.path()).unwrap(), ["a.toml", "b.toml"]);
        assert!(matches!(runbooks(&dir.path().join("none")), Err(SubmitError::Folder { .. })));
    }
}
