//! `lab init [--ssh NAME=USER@ADDRESS …]`: a new lab.toml with this machine, the SSH hosts
//! given and every phone found on them, written only where no lab file is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::exit::{self, CliError};
use super::findings::{ReachArgs, render};
use crate::config::{Host, HostKind, SshHost, parse_lab};
use crate::discover;

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The lab's name (`[lab] name`).
    #[arg(long, default_value = "lab")]
    pub name: String,
    /// An SSH lab host to add and look at: NAME=USER@ADDRESS[:PORT] (repeat for several).
    #[arg(long = "ssh", value_name = "NAME=USER@ADDRESS")]
    pub ssh: Vec<String>,
    /// The SSH hosts' private key. Default: the SSH agent.
    #[arg(long, value_name = "FILE")]
    pub identity: Option<PathBuf>,
    /// The known_hosts file that holds the SSH hosts' keys. Default: ~/.ssh/known_hosts.
    #[arg(long, value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
    /// The traffic endpoint's URL as phones reach this machine. Default: this machine's LAN
    /// address, port 8765.
    #[arg(long, value_name = "URL")]
    pub endpoint_url: Option<String>,
    #[command(flatten)]
    pub reach: ReachArgs,
}

pub async fn run(lab_arg: Option<&Path>, args: &InitArgs) -> Result<(String, u8), CliError> {
    let target = lab_arg.map_or_else(|| PathBuf::from("lab.toml"), Path::to_path_buf);
    let refuse = || {
        CliError::bad_input(format!(
            "{} exists: `lab init` never writes over a lab file; fix: add phones to it with `lab discover --toml`, \
             or move it away first",
            target.display()
        ))
    };
    let opts = args.reach.options()?;
    if let Some(url) = &args.endpoint_url {
        check_url(url)?;
    }
    if target.exists() {
        return Err(refuse());
    }
    let mut hosts = vec![Host { name: "local".into(), kind: HostKind::Local }];
    for s in &args.ssh {
        hosts.push(ssh_host(s, args)?);
    }
    let reached = ReachArgs::reached(&opts);
    // The hosts alone first: a bad --ssh name is reported before anything is looked at.
    let bare = discover::new_lab(&args.name, &hosts, &[], None, &reached);
    let lab = parse_lab(&bare, &target)
        .map_err(|e| CliError::bad_input(format!("the lab file `lab init` would write: {e}")))?;
    let found = discover::discover(&lab, &lab.hosts, &opts).await;
    let table = render(&found);
    if let Some(h) = found.iter().find(|h| h.unreachable.is_some()) {
        return Ok((
            format!(
                "{table}nothing written: host {} could not be reached; fix: check it with `ssh`, or leave out its --ssh\n",
                h.host
            ),
            exit::UNAVAILABLE,
        ));
    }
    let endpoint = args.endpoint_url.clone().or_else(|| discover::lan_address().map(discover::endpoint_url));
    if endpoint.is_none() && discover::has_phones(&found) {
        return Err(CliError::bad_input(
            "no LAN address of this machine was found for the traffic endpoint, which phones must reach (not \
             127.0.0.1); nothing written; fix: pass --endpoint-url http://ADDRESS:8765 with the address phones reach",
        ));
    }
    let text = discover::new_lab(&args.name, &hosts, &found, endpoint.as_deref(), &reached);
    let written = parse_lab(&text, &target)
        .map_err(|e| CliError::internal(format!("the lab file `lab init` made does not load (a bug): {e}")))?;
    write_new(&target, &text).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => refuse(),
        _ => CliError::bad_input(format!("cannot write {}: {e}; nothing written", target.display())),
    })?;
    Ok((
        format!(
            "{table}wrote {}: {} host(s), {} device(s). Next: `lab hosts check`, then `lab plan` on a runbook \
             naming them (docs/first-phone.md).\n",
            target.display(),
            written.hosts.len(),
            written.devices.len()
        ),
        exit::OK,
    ))
}

/// `--endpoint-url`: an `http://HOST[:PORT]` phones can reach.
fn check_url(url: &str) -> Result<(), CliError> {
    let bad = |why: &str| {
        CliError::bad_input(format!(
            "--endpoint-url {url}: {why}; fix: give this machine's address as phones reach it, e.g. \
             --endpoint-url http://192.0.2.10:8765"
        ))
    };
    let authority = url.strip_prefix("http://").ok_or_else(|| bad("not an http:// URL"))?.trim_end_matches('/');
    let (host, _) = crate::config::parse_host_port(authority, Some(80)).map_err(|e| bad(&e.to_string()))?;
    if crate::config::is_loopback_host(&host) || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified()) {
        return Err(bad("a phone cannot reach this machine's loopback"));
    }
    Ok(())
}

/// `NAME=USER@ADDRESS[:PORT]` as a `[[host]]`.
fn ssh_host(text: &str, args: &InitArgs) -> Result<Host, CliError> {
    let bad = |why: &str| {
        CliError::bad_input(format!(
            "--ssh {text}: {why}; fix: write --ssh NAME=USER@ADDRESS[:PORT], e.g. --ssh shelf-1=lab@10.0.0.7"
        ))
    };
    let (name, rest) = text.split_once('=').ok_or_else(|| bad("no `=`"))?;
    let (user, address) = rest.split_once('@').ok_or_else(|| bad("no `@`"))?;
    if name.is_empty() || user.is_empty() || address.is_empty() {
        return Err(bad("a part is empty"));
    }
    let absolute = |flag: &str, p: &Path| -> Result<PathBuf, CliError> {
        std::fs::canonicalize(p)
            .map_err(|e| CliError::bad_input(format!("{flag} {}: {e}; fix: give a file that exists", p.display())))
    };
    let identity = args.identity.as_deref().map(|p| absolute("--identity", p)).transpose()?;
    let known_hosts = match &args.known_hosts {
        Some(p) => absolute("--known-hosts", p)?,
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".ssh/known_hosts"),
    };
    Ok(Host {
        name: name.into(),
        kind: HostKind::Ssh(SshHost {
            address: address.into(),
            user: user.into(),
            identity,
            known_hosts,
            strict_host_key_checking: true,
            connect_timeout: Duration::from_secs(10),
            keepalive: Duration::from_secs(30),
            max_sessions: 4,
            cache_dir: ".cache/lab/builds".into(),
        }),
    })
}

/// Writes `text` to `path` only if nothing is there, all at once: a temporary file beside
/// it, flushed to disk, then hard-linked into place (which fails when `path` exists).
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".lab-init-{}.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    linked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_url_must_be_http_and_not_loopback() {
        assert!(check_url("http://10.0.0.2:8765").is_ok());
        assert!(check_url("http://lab-machine.local").is_ok());
        for bad in ["https://10.0.0.2", "http://127.0.0.1:8765", "http://localhost:1", "http://[::1]:2", "10.0.0.2"] {
            let e = check_url(bad).unwrap_err().message;
            assert!(e.starts_with(&format!("--endpoint-url {bad}: ")) && e.contains("fix: "), "{e}");
        }
    }

    #[test]
    fn a_new_file_is_never_written_over_one_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lab.toml");
        write_new(&path, "a").unwrap();
        let e = write_new(&path, "b").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("lab.toml")]);
    }
}
