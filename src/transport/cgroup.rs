//! Ending a cgroup v2 on a host through its transport: every process in it killed, the
//! folder removed. Used to stop an app on an SSH host and to clear what a dead lab left.

use std::path::Path;

use super::api::{CommandSpec, Transport, TransportError};

/// `sh -c END_CGROUP sh CG`: kills every process of the cgroup CG (`cgroup.kill`, Linux
/// 5.14+, else each pid of `cgroup.procs`, again on every round for processes still
/// forking), and removes the folder once empty; the kernel needs the processes gone
/// first, so the removal is retried for up to 2 s. Exit 0 when the folder is gone.
const END_CGROUP: &str = r#"cg=$1; [ -d "$cg" ] || exit 0; { echo 1 >"$cg/cgroup.kill"; } 2>/dev/null; i=0; while ! rmdir -- "$cg" 2>/dev/null; do for p in $(cat -- "$cg/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done; i=$((i+1)); if [ $i -ge 100 ]; then echo "still holds processes: $(cat -- "$cg/cgroup.procs" 2>/dev/null | tr '\n' ' ')" >&2; exit 1; fi; sleep 0.02; done"#;

/// Kills whatever runs in the cgroup `cg` on the host and removes its folder. A cgroup
/// that is already gone is fine; one that cannot be emptied or removed is an error
/// saying what is left.
pub async fn end_cgroup(t: &dyn Transport, cg: &Path) -> Result<(), TransportError> {
    let mut cmd = CommandSpec::new("sh", &["-c", END_CGROUP, "sh"]);
    cmd.args.push(cg.display().to_string());
    let out = t.exec(&cmd).await?;
    if out.success() {
        return Ok(());
    }
    Err(TransportError::Process {
        host: t.host().into(),
        what: format!("removing cgroup {}", cg.display()),
        source: std::io::Error::other(out.stderr_text().trim().to_string()),
    })
}

/// The cgroup v2 this (test) process is in, when there is one and it is writable (root).
#[cfg(test)]
pub(super) fn writable_own_cgroup() -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let base = crate::collect::linux::procfs::cgroup2_mount(&mounts)
        .zip(crate::collect::linux::procfs::own_cgroup2(&own))
        .map(|(m, o)| m.join(o.trim_start_matches('/')));
    base.filter(|_| nix::unistd::geteuid().is_root())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::LocalTransport;

    /// A cgroup with a running process is emptied and removed (needs a writable cgroup v2:
    /// root on this kind of machine); a missing one is not an error.
    #[tokio::test]
    async fn a_cgroup_with_processes_is_emptied_and_removed() {
        let t = LocalTransport::new("local");
        end_cgroup(&t, Path::new("/nonexistent/lab-cgroup")).await.unwrap();
        let Some(base) = writable_own_cgroup() else {
            return; // no writable cgroup v2 here
        };
        let cg = base.join(format!("lab-{}-end-cgroup-test", std::process::id()));
        std::fs::create_dir(&cg).unwrap();
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(cg.join("cgroup.procs"), child.id().to_string()).unwrap();
        end_cgroup(&t, &cg).await.unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL), "its process was killed");
        assert!(!cg.exists(), "the folder was removed");
    }
}
