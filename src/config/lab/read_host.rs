//! One `[[host]]`: this machine, or a lab host reached over SSH.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::syntax::files::absolute;
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::Table;
use crate::config::{HostKind, SshHost};

/// Keys that make a host remote.
pub(crate) const SSH_KEYS: &[&str] = &[
    "address",
    "user",
    "identity",
    "known_hosts",
    "strict_host_key_checking",
    "connect_timeout",
    "keepalive",
    "max_sessions",
    "cache_dir",
];

/// `~/x` → `$HOME/x`; relative paths against the lab file's folder.
fn expand(path: &str, base: &Path) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => absolute(&base.join(path)),
    }
}

/// `HostKind::Ssh` when the table has `address`, else `Local`. Problems go to `p`.
pub(crate) fn read_host_kind(t: &Table, p: &mut Problems, base: &Path) -> HostKind {
    let Some(af) = t.get("address") else {
        if let Some(f) = SSH_KEYS.iter().find_map(|k| t.get(k)) {
            f.problem(
                p,
                format!("`{}` only makes sense for an SSH host", f.leaf),
                "add `address = \"host:port\"` (and `user`) to reach this host over SSH, or remove the key",
            );
        }
        return HostKind::Local;
    };
    let address = af.text(p).unwrap_or_default();
    if address.trim().is_empty() || address.contains(char::is_whitespace) {
        af.problem(
            p,
            format!("`{address}` is not an address"),
            "write `address = \"lab-mac-1.local:22\"` (port optional)",
        );
    }
    let user = match t.get("user") {
        Some(f) => f.text(p).unwrap_or_default(),
        None => {
            if let Some(f) = t.get("address") {
                f.problem(p, "an SSH host needs a `user`", "add `user = \"lab\"`");
            }
            String::new()
        }
    };
    let written = t.get("identity").and_then(|f| f.text(p));
    let identity = written.as_deref().map(|s| expand(s, base));
    if let (Some(id), Some(w)) = (&identity, &written)
        && !id.exists()
        && let Some(f) = t.get("identity")
    {
        f.problem(
            p,
            format!("identity file {w} does not exist"),
            "point `identity` at a private key, or remove it to use the SSH agent",
        );
    }
    let known_hosts = t
        .get("known_hosts")
        .and_then(|f| f.text(p))
        .map(|s| expand(&s, base))
        .unwrap_or_else(|| expand("~/.ssh/known_hosts", base));
    let strict = t.get("strict_host_key_checking").and_then(|f| f.bool(p)).unwrap_or(true);
    let connect_timeout =
        t.get("connect_timeout").and_then(|f| f.positive_duration(p)).unwrap_or(Duration::from_secs(10));
    let keepalive = t.get("keepalive").and_then(|f| f.positive_duration(p)).unwrap_or(Duration::from_secs(30));
    let max_sessions = t.get("max_sessions").and_then(|f| f.u32_at_least(p, 1)).unwrap_or(4);
    let cache_dir = t.get("cache_dir").and_then(|f| f.text(p)).unwrap_or_else(|| ".cache/lab/builds".into());
    HostKind::Ssh(SshHost {
        address,
        user,
        identity,
        known_hosts,
        strict_host_key_checking: strict,
        connect_timeout,
        keepalive,
        max_sessions,
        cache_dir,
    })
}
