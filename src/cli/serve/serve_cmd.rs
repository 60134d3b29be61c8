//! `lab serve [--bind ADDR] [--open]`: one process serving the lab's pages until Ctrl-C.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use super::access::Access;
use super::connections::{Limits, fit_to_open_files, listen, serve};
use super::live::Live;
use super::report_cache::ReportCache;
use super::routes::{Shared, router};
use crate::cli::context;
use crate::cli::exit::CliError;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address and port to listen on (default: `[serve] bind`, else 127.0.0.1:8470). Off
    /// loopback, reading needs the token unless `[serve] public_read = true`.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Open the lab page in the desktop's browser (`xdg-open`).
    #[arg(long)]
    pub open: bool,
}

/// Serves until Ctrl-C. The first line on stdout says where (`lab serve: http://…/`), for
/// people and for scripts that bound port 0.
pub async fn run(lab_arg: Option<&Path>, args: &ServeArgs) -> Result<(String, u8), CliError> {
    let lab = context::load_lab(lab_arg)?;
    // A lab with no campaign yet gets its store now: its pages are empty, not an error.
    let store = context::open_store(&lab)?;
    let bind: SocketAddr = match &args.bind {
        Some(text) => text.parse().map_err(|_| {
            CliError::bad_input(format!(
                "--bind {text}: not an address and port; fix: write e.g. `--bind 127.0.0.1:8470`"
            ))
        })?,
        None => lab.serve.bind,
    };
    let token = match &lab.serve.token_file {
        Some(path) => Some(read_token(path)?),
        None => None,
    };
    let loopback = bind.ip().is_loopback();
    // Behind a reverse proxy, whoever reaches the proxy reaches the lab: as off loopback.
    let public = lab.serve.public_url.clone();
    let exposed = !loopback || public.is_some();
    if exposed && token.is_none() && !lab.serve.public_read {
        let why = match &public {
            Some(p) => format!("served at {} (public_url)", p.host),
            None => format!("serving on {bind} (not loopback)"),
        };
        return Err(CliError::bad_input(format!(
            "{}: [serve] {why} needs a token; fix: set `[serve] token_file = \"serve.token\"` \
(a file holding a long random token), or `public_read = true` to let anyone who reaches it read the lab",
            lab.source.display()
        )));
    }
    let listener = listen(bind).map_err(|e| {
        CliError::new(
            crate::cli::exit::UNAVAILABLE,
            format!("cannot listen on {bind}: {e}; fix: pick another port with --bind"),
        )
    })?;
    let addr = listener.local_addr().map_err(CliError::internal)?;
    let session: String = {
        use rand::RngExt;
        let mut rng = rand::rng();
        (0..32).map(|_| format!("{:x}", rng.random_range(0..16u8))).collect()
    };
    let access = Access {
        token,
        read_needs_token: exposed && !lab.serve.public_read,
        session,
        cookie: format!("lab_session_{}", addr.port()),
        secure_cookie: public.as_ref().is_some_and(|p| p.https),
        behind_proxy: public.is_some(),
        hosts: loopback.then(|| {
            let mut hosts = super::access::loopback_hosts(addr.port());
            hosts.extend(public.as_ref().map(|p| p.host.clone()));
            hosts
        }),
    };
    let url = format!("http://{addr}/");
    println!("lab serve: {url} (Ctrl-C stops)");
    if args.open
        && let Err(e) = std::process::Command::new("xdg-open").arg(&url).spawn()
    {
        eprintln!("lab serve: could not open a browser ({e}); open {url} yourself");
    }
    let lab = Arc::new(lab);
    let (watched, rendered) = (Arc::clone(&lab), Arc::clone(&lab));
    let reports = Arc::new(ReportCache::default());
    let drawn = Arc::clone(&reports);
    let live = Live::new(
        Arc::new(move || context::open_store_existing(&watched).ok().flatten()),
        Arc::new(move |store: &crate::store::Store, pages: &[String]| {
            super::live_parts::live_parts(&rendered, &drawn, store, pages)
        }),
    );
    let asked =
        Limits { header_timeout: lab.serve.header_timeout, max_connections: lab.serve.max_connections as usize };
    let limits = fit_to_open_files(asked);
    if limits.max_connections < asked.max_connections {
        eprintln!(
            "lab serve: at most {} connections at once, not {}: the open-file limit is lower; fix: raise it \
(LimitNOFILE= in the systemd unit, ulimit -n) or lower [serve] max_connections",
            limits.max_connections, asked.max_connections
        );
    }
    let logins = Default::default();
    let raw = Arc::new(crate::store::RawFiles::of_lab(&lab)?);
    let shared = Shared { lab, store, access: Arc::new(access), live, asked: Default::default(), reports, logins, raw };
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let server = serve(listener, router(shared), limits, stopped.clone());
    let signal = async move {
        let _ = tokio::signal::ctrl_c().await;
        let _ = stopping.send(true);
        // Open pages keep their event streams: after Ctrl-C they get two seconds, not forever.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    };
    tokio::select! {
        () = server => {}
        () = signal => {}
    }
    Ok((String::new(), crate::cli::exit::OK))
}

/// The token in `path`, trimmed; refused when unreadable or shorter than 16 characters.
fn read_token(path: &Path) -> Result<String, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::bad_input(format!(
            "[serve] token_file {}: {e}; fix: write a long random token into it, e.g. `openssl rand -hex 32 > {}`",
            path.display(),
            path.display()
        ))
    })?;
    let token = text.trim().to_string();
    if let Some(c) = token.chars().find(|c| !(c.is_ascii_alphanumeric() || "-._~+/=".contains(*c))) {
        return Err(CliError::bad_input(format!(
            "[serve] token_file {}: the token holds `{}`, which a header cannot carry as is; fix: use letters, digits \
and -._~+/= only, e.g. `openssl rand -hex 32 > {}`",
            path.display(),
            c.escape_default(),
            path.display()
        )));
    }
    if token.len() < 16 {
        return Err(CliError::bad_input(format!(
            "[serve] token_file {}: the token has {} characters, fewer than 16; fix: `openssl rand -hex 32 > {}`",
            path.display(),
            token.len(),
            path.display()
        )));
    }
    Ok(token)
}
