//! `lab.toml`: `[lab]`, `[[host]]` and `[[device]]` into a validated [`Lab`].

use std::path::Path;

use crate::config::lab::read_artifacts::read_artifacts;
use crate::config::lab::read_care::read_care;
use crate::config::lab::read_device::read_device;
use crate::config::lab::read_endpoint::{ENDPOINT_KEYS, check_phone_reaches, read_lab_endpoint};
use crate::config::lab::read_host::{SSH_KEYS, read_host_kind};
use crate::config::lab::read_monitor::{assign_monitors, read_monitors};
use crate::config::lab::read_serve::read_serve;
use crate::config::schedule::read_schedule::read_schedules;
use crate::config::syntax::files::absolute;
use crate::config::syntax::names::{NameSet, check_name};
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::Table;
use crate::config::{Host, HostKind, Lab, LabEndpoint, StoreLocation, StoreLocationError};

const ROOT_KEYS: &[&str] = &["lab", "host", "device", "monitor", "care", "schedule", "serve"];
const LAB_KEYS: &[&str] = &["name", "artifacts", "object_store", "store", "store_password_command"];

/// The host every lab has: this machine.
pub(crate) const LOCAL_HOST: &str = "local";

/// Reads a whole lab file. The result is only meaningful when `p` stays empty.
pub(crate) fn read_lab(root: &Table, p: &mut Problems, source: &Path, text: &str, base: &Path) -> Lab {
    root.check_keys(p, ROOT_KEYS);

    let mut name = String::new();
    let mut artifacts = absolute(&base.join("artifacts"));
    let mut object_store = None;
    let mut store: Option<StoreLocation> = None;
    let mut store_text = String::new();
    // `None` when the endpoint keys are wrong: phones are then not checked against them.
    let mut endpoint = Some(LabEndpoint::default());
    match root.get("lab") {
        None => p.push(
            None,
            "lab",
            "missing the [lab] table",
            "add `[lab]` with `name = \"my-lab\"` at the top of the file",
        ),
        Some(f) => {
            if let Some(t) = f.table(p) {
                t.check_keys(p, &[LAB_KEYS, ENDPOINT_KEYS].concat());
                if let Some(nf) = t.required(p, "name", "name = \"my-lab\"")
                    && let Some(n) = nf.text(p)
                    && check_name(p, nf.span(), &nf.path, "lab", &n)
                {
                    name = n;
                }
                (artifacts, object_store) = read_artifacts(&t, p, base);
                if let Some(f) = t.get("store")
                    && let Some(v) = f.text(p)
                {
                    store = store_location(&v, base).map_err(|e| f.problem(p, e.to_string(), e.fix())).ok();
                    store_text = v;
                }
                if let Some(f) = t.get("store_password_command")
                    && let Some(argv) = f.strings(p)
                {
                    match &mut store {
                        Some(StoreLocation::Postgres { password_command, .. }) if !argv.is_empty() => {
                            *password_command = argv.into_iter().map(|(a, _)| a).collect();
                        }
                        Some(StoreLocation::Postgres { .. }) => f.problem(
                            p,
                            "the command is empty",
                            "write the program and its arguments, e.g. `[\"pass\", \"show\", \"lab-db\"]`",
                        ),
                        _ => f.problem(
                            p,
                            "only a PostgreSQL store has a password",
                            "remove it, or set `store = \"postgres://USER@HOST:PORT/DATABASE\"`",
                        ),
                    }
                }
                endpoint = read_lab_endpoint(&t, p);
            }
        }
    }

    let hosts = read_hosts(root, p, base);
    let mut devices = Vec::new();
    let device_tables = root.get("device").and_then(|f| f.tables(p)).unwrap_or_default();
    let mut names = NameSet::new("device");
    let mut read = Vec::new();
    for t in &device_tables {
        if let Some(d) = read_device(t, p, &hosts, &mut names, base) {
            if let Some(e) = &endpoint {
                check_phone_reaches(e, &d, t, p);
            }
            read.push(t);
            devices.push(d);
        }
    }
    let (mut monitors, declared) = read_monitors(root, p, &hosts);
    let pairs: Vec<(&Table, &crate::config::DeviceSpec)> = read.into_iter().zip(&devices).collect();
    assign_monitors(&pairs, (&mut monitors, &declared), p);

    let care = read_care(root, p);
    let schedules = read_schedules(root, p, base);
    let serve = read_serve(root, p, base);

    Lab {
        name,
        source: source.to_path_buf(),
        // Kept with every campaign: never with the store's password.
        text: match &store {
            Some(StoreLocation::Postgres { url, .. }) => url.redact_in(text, &store_text),
            _ => text.to_string(),
        },
        artifacts_dir: artifacts,
        object_store,
        store: store.unwrap_or_else(|| StoreLocation::Sqlite(absolute(&base.join("artifacts/lab.db")))),
        hosts,
        devices,
        endpoint: endpoint.unwrap_or_default(),
        care,
        schedules,
        monitors,
        serve,
    }
}

/// `[lab] store` or `LAB_STORE`: a `postgres://` URL, else a SQLite file (relative to
/// `base`). `Err` says what is wrong and has the fix; neither repeats the text, which may
/// hold a password.
pub fn store_location(text: &str, base: &Path) -> Result<StoreLocation, StoreLocationError> {
    if crate::config::PgUrl::is_postgres(text) {
        let url = crate::config::PgUrl::parse(text).map_err(StoreLocationError::Postgres)?;
        return Ok(StoreLocation::Postgres { url: Box::new(url), password_command: Vec::new() });
    }
    if text.contains("://") {
        return Err(StoreLocationError::UnknownScheme);
    }
    if text.is_empty() {
        return Err(StoreLocationError::Empty);
    }
    Ok(StoreLocation::Sqlite(absolute(&base.join(text))))
}

/// `[[host]]` entries; `local` is always there, declared or not.
fn read_hosts(root: &Table, p: &mut Problems, base: &Path) -> Vec<Host> {
    let mut hosts = Vec::new();
    let mut names = NameSet::new("host");
    let tables = root.get("host").and_then(|f| f.tables(p)).unwrap_or_default();
    for t in &tables {
        // `name`, and the keys of an SSH host.
        t.check_keys(p, &[&["name"], SSH_KEYS].concat());
        let kind = read_host_kind(t, p, base);
        let Some(nf) = t.required(p, "name", "name = \"local\"") else {
            continue;
        };
        let Some(name) = nf.text(p) else { continue };
        if !check_name(p, nf.span(), &nf.path, "host", &name) {
            continue;
        }
        names.add(p, &name, nf.span(), &nf.path);
        if name == LOCAL_HOST && kind != HostKind::Local {
            nf.problem(p, "the host named `local` is this machine", "give the SSH host another name, e.g. `shelf-1`");
        }
        if !hosts.iter().any(|h: &Host| h.name == name) {
            hosts.push(Host { name, kind });
        }
    }
    if !hosts.iter().any(|h| h.name == LOCAL_HOST) {
        hosts.insert(0, Host { name: LOCAL_HOST.into(), kind: HostKind::Local });
    }
    hosts
}
