//! CoreDevice services over RemoteXPC (http2.rs) and `com.apple.coredevice.appservice`.
//!
//! An invocation is a dictionary on stream 1, wanting a reply: `CoreDevice.featureIdentifier`,
//! `CoreDevice.input`, `CoreDevice.invocationIdentifier`, `CoreDevice.deviceIdentifier`,
//! `CoreDevice.coreDeviceVersion`, `CoreDevice.CoreDeviceDDIProtocolVersion`,
//! `CoreDevice.action` (pymobiledevice3 `remote/core_device/core_device_service.py`, go-ios
//! `ios/coredevice/coredevice.go`, and the captured request in
//! tests/fixtures/devices/ios/xpc_launchapplication_goios.bin). It is answered on stream 3,
//! under the request's message id, with `{CoreDevice.output: …}` or `{CoreDevice.error: …}`
//! (what both clients read; the error is an NSError-shaped dictionary — domain, code,
//! userInfo with NSLocalizedDescription — whose values are the stand-in's, not a capture's).
//!
//! The app service: `launchapplication` (bundle, arguments, environment, terminateExisting,
//! startStopped) starts a process of processes.rs and answers its `processToken`;
//! `sendsignaltoprocess` ends it for SIGTERM/SIGKILL; `listprocesses` lists them.

use std::io::{self, Read, Write};
use std::sync::Arc;

use crate::Server;
use crate::http2::XpcConn;
use crate::processes::{Process, Processes};
use crate::tcp::Stream;
use crate::xpc::{self, Xpc, dict};

pub const LAUNCH: &str = "com.apple.coredevice.feature.launchapplication";
pub const SIGNAL: &str = "com.apple.coredevice.feature.sendsignaltoprocess";
pub const LIST_PROCESSES: &str = "com.apple.coredevice.feature.listprocesses";
const JOURNAL: &str = "appservice";
/// CoreDevice's error domain as devicectl prints it; the codes are the stand-in's.
const DOMAIN: &str = "com.apple.dt.CoreDeviceError";
const SIGKILL: i64 = 9;
const SIGTERM: i64 = 15;

/// One CoreDevice request.
pub struct Invocation {
    pub id: u64,
    pub feature: String,
    pub input: Xpc,
}

/// An NSError-shaped CoreDevice error.
pub fn error(code: i64, description: &str, underlying: Option<Xpc>) -> Xpc {
    let mut info = vec![("NSLocalizedDescription".to_string(), Xpc::from(description))];
    if let Some(u) = underlying {
        info.push(("NSUnderlyingError".to_string(), u));
    }
    dict([("code", Xpc::Int64(code)), ("domain", DOMAIN.into()), ("userInfo", Xpc::Dictionary(info))])
}

pub fn answer<S: Read + Write>(c: &mut XpcConn<S>, id: u64, result: Result<Xpc, Xpc>) -> io::Result<()> {
    let body = match result {
        Ok(output) => dict([("CoreDevice.output", output)]),
        Err(e) => dict([("CoreDevice.error", e)]),
    };
    c.reply(id, body)
}

/// Serves invocations until the host hangs up; `handle` answers each (with `answer`) and
/// may go on talking on the connection (a file transfer).
pub fn serve<S: Read + Write>(
    stream: S,
    mut handle: impl FnMut(&mut XpcConn<S>, Invocation) -> io::Result<()>,
) -> io::Result<()> {
    let Some(mut c) = XpcConn::accept(stream)? else { return Ok(()) };
    while let Some((_, m)) = c.next()? {
        // Only a request that wants a reply is an invocation.
        let Some(body) = m.body.filter(|_| m.flags & xpc::WANTING_REPLY != 0) else { continue };
        let feature = body.get("CoreDevice.featureIdentifier").and_then(Xpc::as_str).unwrap_or_default().to_string();
        let input = body.get("CoreDevice.input").cloned().unwrap_or(Xpc::Dictionary(Vec::new()));
        handle(&mut c, Invocation { id: m.id, feature, input })?;
    }
    Ok(())
}

fn strings(v: Option<&Xpc>) -> Vec<String> {
    match v {
        Some(Xpc::Array(a)) => a.iter().map(|s| s.as_str().map_or_else(|| format!("{s:?}"), str::to_string)).collect(),
        _ => Vec::new(),
    }
}

fn executable(bundle_id: &str) -> Xpc {
    let name = bundle_id.rsplit('.').next().unwrap_or(bundle_id);
    let container = crate::pair::uuid_like(&format!("container {bundle_id}"));
    dict([(
        "relative",
        format!("file:///private/var/containers/Bundle/Application/{container}/{name}.app/{name}").into(),
    )])
}

fn token(pid: u64, bundle_id: &str) -> Xpc {
    dict([
        // An audit token is eight 32-bit words; the pid is the sixth (as in the kernel's).
        ("auditToken", Xpc::Array([501u64, 501, 501, 501, 501, pid, 0, pid].map(Xpc::UInt64).to_vec())),
        ("executableURL", executable(bundle_id)),
        ("processIdentifier", Xpc::Int64(pid as i64)),
        ("processIdentifierVersion", Xpc::UInt64(1)),
    ])
}

fn launch(server: &Arc<Server>, udid: &str, input: &Xpc) -> io::Result<Result<Xpc, Xpc>> {
    let store = &server.store;
    let bundle_id = input.at(&["applicationSpecifier", "bundleIdentifier", "_0"]).and_then(Xpc::as_str);
    let bundle_id = bundle_id.unwrap_or_default().to_string();
    let options = input.get("options").cloned().unwrap_or(Xpc::Dictionary(Vec::new()));
    let env = match options.get("environmentVariables").map(Xpc::to_json) {
        Some(serde_json::Value::Object(env)) => env,
        _ => serde_json::Map::new(),
    };
    // The journal's objects sort their keys: the order the host sent them in, beside.
    let env_order: Vec<&str> = match options.get("environmentVariables") {
        Some(Xpc::Dictionary(d)) => d.iter().map(|(k, _)| k.as_str()).collect(),
        _ => Vec::new(),
    };
    let args = strings(options.get("arguments"));
    let flag = |k: &str| options.get(k).and_then(Xpc::as_bool).unwrap_or(false);
    let (terminate, stopped) = (flag("terminateExisting"), flag("startStopped"));
    let journal_options = serde_json::json!({"terminateExisting": terminate, "startStopped": stopped});
    let mut line = serde_json::json!({"bundle_id": bundle_id, "env": env, "env_order": env_order, "args": args,
        "options": journal_options});
    let phone =
        store.phone(udid)?.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{udid} detached")))?;
    let Some(app) = store.apps(&phone)?.into_iter().find(|a| a.bundle_id == bundle_id) else {
        // FrontBoard's NotFound under CoreDevice's launch failure, the chain DVT gives (dvt.rs).
        let not_found = dict([
            ("code", Xpc::Int64(4)),
            ("domain", "FBSOpenApplicationErrorDomain".into()),
            (
                "userInfo",
                dict([(
                    "NSLocalizedDescription",
                    format!("Application info provider (FBSApplicationLibrary) returned nil for \"{bundle_id}\"")
                        .into(),
                )]),
            ),
        ]);
        let text = format!("The application \"{bundle_id}\" could not be launched because it is not installed.");
        line["error"] = text.clone().into();
        store.journal(udid, JOURNAL, "launch", line);
        return Ok(Err(error(10002, &text, Some(not_found))));
    };
    let mut process = Process::of(&app, env, args, stopped);
    let (killed, pid) = Processes::update(store, udid, |p| p.launch(process.clone(), terminate))?;
    line["pid"] = pid.into();
    line["killed"] = killed.into();
    store.journal(udid, JOURNAL, "launch", line);
    process.pid = pid;
    crate::workload::start(server, udid, &process);
    Ok(Ok(dict([("processToken", token(pid, &bundle_id))])))
}

fn now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn signal(server: &Server, udid: &str, input: &Xpc) -> io::Result<Result<Xpc, Xpc>> {
    let pid = input.at(&["process", "processIdentifier"]).and_then(Xpc::as_i64).unwrap_or(-1);
    let signal = input.get("signal").and_then(Xpc::as_i64).unwrap_or(0);
    let running = Processes::load(&server.store, udid)?.running.into_iter().find(|p| p.pid as i64 == pid);
    let ends = matches!(signal, SIGTERM | SIGKILL);
    if ends && running.is_some() {
        Processes::update(&server.store, udid, |p| p.kill(pid as u64))?;
    }
    server.store.journal(
        udid,
        JOURNAL,
        "signal",
        serde_json::json!({"pid": pid, "signal": signal, "running": running.is_some(), "ended": ends && running.is_some()}),
    );
    let Some(process) = running else {
        return Ok(Err(error(3, &format!("No such process: {pid} (ESRCH)"), None)));
    };
    let output = dict([
        ("deviceTimestamp", Xpc::Date(now_ns())),
        ("process", dict([("executableURL", executable(&process.bundle_id)), ("processIdentifier", Xpc::Int64(pid))])),
        ("signal", Xpc::Int64(signal)),
    ]);
    Ok(Ok(output))
}

fn list(server: &Server, udid: &str) -> io::Result<Result<Xpc, Xpc>> {
    let running = Processes::load(&server.store, udid)?.running;
    server.store.journal(udid, JOURNAL, "list", serde_json::json!({"count": running.len()}));
    let tokens = running.iter().map(|p| token(p.pid, &p.bundle_id)).collect();
    Ok(Ok(dict([("processTokens", Xpc::Array(tokens))])))
}

pub fn serve_app_service(stream: Stream, server: &Arc<Server>, udid: &str) -> io::Result<()> {
    serve(stream, |c, inv| {
        let result = match inv.feature.as_str() {
            LAUNCH => launch(server, udid, &inv.input)?,
            SIGNAL => signal(server, udid, &inv.input)?,
            LIST_PROCESSES => list(server, udid)?,
            other => {
                server.store.journal(udid, JOURNAL, "unsupported", serde_json::json!({"feature": other}));
                Err(error(1, &format!("The feature {other} is not supported by this device."), None))
            }
        };
        answer(c, inv.id, result)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_is_nserror_shaped_with_its_cause() {
        let e = error(10002, "failed", Some(dict([("code", Xpc::Int64(4))])));
        assert_eq!(e.get("domain").and_then(Xpc::as_str), Some(DOMAIN));
        assert_eq!(e.at(&["userInfo", "NSLocalizedDescription"]).and_then(Xpc::as_str), Some("failed"));
        assert_eq!(e.at(&["userInfo", "NSUnderlyingError", "code"]).and_then(Xpc::as_i64), Some(4));
    }

    #[test]
    fn a_process_token_names_the_pid_and_the_apps_executable() {
        let t = token(1234, "io.example.Envoy");
        assert_eq!(t.get("processIdentifier"), Some(&Xpc::Int64(1234)));
        let url = t.at(&["executableURL", "relative"]).and_then(Xpc::as_str).unwrap();
        assert!(
            url.starts_with("file:///private/var/containers/Bundle/Application/") && url.ends_with("Envoy.app/Envoy")
        );
        assert!(matches!(t.get("auditToken"), Some(Xpc::Array(a)) if a.len() == 8));
        assert_eq!(xpc::Message { flags: 1, id: 0, body: Some(t.clone()) }.encode().len() % 4, 0);
    }
}
