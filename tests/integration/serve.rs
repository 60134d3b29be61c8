//! `lab serve` through the real binary on a lab with a finished simulated campaign: the
//! pages, the downloads, and what it refuses (docs/serve.md).

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};

use common::TempLab;

/// A running `lab serve`, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve(lab: &TempLab, args: &[&str]) -> Server {
    let mut all = vec!["serve"];
    if !args.contains(&"--bind") {
        all.extend(["--bind", "127.0.0.1:0"]);
    }
    all.extend_from_slice(args);
    let mut child = lab.process(&all).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let addr = address_said(&mut child);
    Server { child, addr }
}

/// The address a `lab serve` started with its stdout piped says it listens on.
pub(crate) fn address_said(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    line.strip_prefix("lab serve: http://")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("the first line says where: {line:?}"))
        .to_string()
}

/// One HTTP/1.1 request; the status code and the body.
fn request(addr: &str, method: &str, path: &str, headers: &[&str]) -> (u16, String) {
    request_to(addr, addr, method, path, headers)
}

/// One HTTP/1.1 request to `addr` naming `host` in its `Host` header.
fn request_to(addr: &str, host: &str, method: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: 0\r\n{extra}\r\n")
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (code, body)
}

fn get(addr: &str, path: &str) -> (u16, String) {
    request(addr, "GET", path, &[])
}

pub(crate) fn finished_campaign(lab: &TempLab) -> String {
    let text = std::fs::read_to_string(common::root().join("runbooks/aa-identical.toml"))
        .unwrap()
        .replace("\nrepeats = 6\n", "\nrepeats = 4\n");
    let path = lab.dir.path().join("aa.toml");
    std::fs::write(&path, text).unwrap();
    lab.cmd(&["run", path.to_str().unwrap()]).assert().success();
    // From `lab status`: the store may be PostgreSQL.
    let out = lab.cmd(&["status", "--json"]).assert().success().get_output().stdout.clone();
    let status: serde_json::Value = serde_json::from_slice(&out).unwrap();
    status["campaigns"][0]["campaign"].as_str().expect("the campaign").to_string()
}

#[test]
fn the_pages_show_the_lab_its_campaigns_and_their_reports() {
    let lab = TempLab::new();
    let id = finished_campaign(&lab);
    let server = serve(&lab, &[]);
    let a = server.addr.as_str();

    let (code, page) = get(a, "/");
    assert_eq!(code, 200, "{page}");
    for device in ["sim-pixel-1", "sim-iphone-1"] {
        assert!(page.contains(device), "the lab page lists {device}:\n{page}");
    }
    let (code, json) = get(a, "/status.json");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(status["campaigns"][0]["campaign"], id.as_str());

    let (code, list) = get(a, "/campaigns");
    assert_eq!(code, 200);
    assert!(list.contains(&format!("<a href=\"/campaigns/{id}\">{id}</a>")), "{list}");

    let (code, report) = get(a, &format!("/campaigns/{id}"));
    assert_eq!(code, 200);
    assert!(report.contains("<svg") && report.contains("a-copy"), "the report with its plots");
    assert!(report.contains(&format!("/campaigns/{id}/results.csv")));

    let (code, body) = get(a, &format!("/campaigns/{id}/report.json"));
    assert_eq!(code, 200);
    let rep: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(rep["campaign"]["id"], id.as_str());
    let (code, csv) = get(a, &format!("/campaigns/{id}/results.csv"));
    assert_eq!(code, 200);
    assert!(csv.starts_with(lab::report::RESULTS_CSV_HEADER[0]), "{}", &csv[..80.min(csv.len())]);
    let (code, junit) = get(a, &format!("/campaigns/{id}/junit.xml"));
    assert_eq!((code, junit.starts_with("<?xml")), (200, true));
    let (code, manifest) = get(a, &format!("/campaigns/{id}/manifest.json"));
    assert_eq!(code, 200);
    assert!(manifest.contains("\"runbook\""), "{manifest}");
    let (code, raw) = get(a, &format!("/artifacts/{id}/manifest.json"));
    assert_eq!((code, raw), (200, manifest));

    // History: the runbooks, and a runbook's trends with each point linked to its campaign.
    let (code, list) = get(a, "/history");
    assert_eq!(code, 200);
    assert!(list.contains("<a href=\"/history/aa-identical\">aa-identical</a>"), "{list}");
    let (code, history) = get(a, "/history/aa-identical");
    assert_eq!(code, 200);
    assert!(history.contains("History: aa-identical") && history.contains("<svg"), "{history}");
    assert!(history.contains(&format!("<a href=\"/campaigns/{id}\">{id}</a>")), "points link their campaign");
    let (code, body) = get(a, "/history/no-such-runbook");
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("known: aa-identical"), "{body}");
}

#[test]
fn bad_requests_are_refused_with_the_reason_and_nothing_leaves_the_artifacts_folder() {
    let lab = TempLab::new();
    let id = finished_campaign(&lab);
    std::fs::write(lab.dir.path().join("secret.txt"), "do not serve").unwrap();
    let server = serve(&lab, &[]);
    let a = server.addr.as_str();
    // The store itself lies in the artifacts folder; a link in a campaign's folder leads out.
    std::os::unix::fs::symlink(lab.dir.path().join("secret.txt"), lab.artifacts().join(&id).join("link")).unwrap();
    let cases: [(String, u16); 11] = [
        ("/campaigns/no-such-campaign".into(), 404),
        ("/campaigns/a%20b".into(), 400),
        (format!("/campaigns/{id}/passwd"), 404),
        ("/artifacts/../secret.txt".into(), 400),
        ("/artifacts/%2e%2e/secret.txt".into(), 400),
        ("/artifacts/%2F%2Fetc/passwd".into(), 400),
        ("/artifacts/nothing-here/x".into(), 404),
        ("/artifacts/lab.db".into(), 400),
        (format!("/artifacts/{id}/../lab.db"), 400),
        (format!("/artifacts/{id}/%2e%2e/lab.db"), 400),
        (format!("/artifacts/{id}/link"), 400),
    ];
    for (path, want) in &cases {
        let (path, want) = (path.as_str(), *want);
        let (code, body) = get(a, path);
        assert_eq!(code, want, "{path}: {body}");
        assert!(body.len() < 300, "{path}: one line saying why, not a file: {} bytes", body.len());
        assert!(!body.contains("do not serve") && !body.contains("SQLite format"), "{path}: {body}");
    }
    // Another name pointed at 127.0.0.1 (DNS rebinding) is refused; the loopback names are not.
    let port = a.rsplit(':').next().unwrap();
    let (code, body) = request_to(a, &format!("evil.example:{port}"), "GET", "/", &[]);
    assert_eq!(code, 421, "{body}");
    assert_eq!(request_to(a, &format!("localhost:{port}"), "GET", "/", &[]).0, 200);
    // Nothing can be changed without a token file.
    let (code, body) = request(a, "POST", "/campaigns", &[&format!("Origin: http://{a}")]);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("token_file"), "{body}");
}

#[test]
fn off_loopback_reading_needs_the_token_and_changes_need_it_and_the_same_origin() {
    let lab = TempLab::new();
    finished_campaign(&lab);
    // Without a token, another address is refused before anything listens.
    let out = lab.cmd(&["serve", "--bind", "0.0.0.0:0"]).assert().code(2).get_output().stderr.clone();
    let err = String::from_utf8_lossy(&out);
    assert!(err.contains("not loopback) needs a token; fix: set `[serve] token_file"), "{err}");

    let token = "0123456789abcdef0123456789abcdef";
    std::fs::write(lab.dir.path().join("serve.token"), format!("{token}\n")).unwrap();
    let text = std::fs::read_to_string(&lab.lab).unwrap() + "\n[serve]\ntoken_file = \"serve.token\"\n";
    std::fs::write(&lab.lab, text).unwrap();
    let server = serve(&lab, &[]);
    let a = server.addr.as_str();
    let bearer = format!("Authorization: Bearer {token}");
    let origin = format!("Origin: http://{a}");
    // On loopback reading is free; a change needs the token and this server's origin.
    assert_eq!(get(a, "/").0, 200);
    assert_eq!(request(a, "POST", "/campaigns", &[&origin]).0, 401);
    assert_eq!(
        request(a, "POST", "/campaigns", &["Authorization: Bearer wrong-token-of-thirty-two-chars", &origin]).0,
        401
    );
    assert_eq!(request(a, "POST", "/campaigns", &[&bearer, "Origin: http://evil.example"]).0, 403);
    assert_eq!(request(a, "POST", "/campaigns", &[&bearer]).0, 403, "no Origin: not from these pages");
    // With both, the request reaches the routes (nothing answers POST here yet).
    assert_eq!(request(a, "POST", "/campaigns", &[&bearer, &origin]).0, 405);
    drop(server);

    let open = serve(&lab, &["--bind", "0.0.0.0:0"]);
    let port = open.addr.rsplit(':').next().unwrap();
    let a = format!("127.0.0.1:{port}");
    let (code, body) = get(&a, "/");
    assert_eq!(code, 401, "{body}");
    assert_eq!(request(&a, "GET", "/", &[&bearer]).0, 200);
    // The login page is open, and its session cookie reads the lab.
    assert_eq!(get(&a, "/login").0, 200);
    let cookie = login(&a, token).expect("the right token logs in");
    assert_eq!(request(&a, "GET", "/", &[&format!("Cookie: {cookie}")]).0, 200);
    assert_eq!(
        request(&a, "GET", "/", &[&format!("Cookie: lab_session_{port}={token}")]).0,
        401,
        "the token is no session"
    );
    drop(open);

    // Behind a TLS proxy (`public_url`): its host is answered on loopback, reading needs the
    // token as off loopback, its pages' changes are same-origin, and the cookie is Secure.
    let text = std::fs::read_to_string(&lab.lab).unwrap() + "public_url = \"https://lab.example.org\"\n";
    std::fs::write(&lab.lab, text).unwrap();
    let proxied = serve(&lab, &[]);
    let a = proxied.addr.as_str();
    let host = "lab.example.org";
    assert_eq!(request_to(a, host, "GET", "/", &[]).0, 401, "reading through the proxy needs the token");
    assert_eq!(request_to(a, host, "GET", "/", &[&bearer]).0, 200);
    assert_eq!(request_to(a, "evil.example", "GET", "/", &[&bearer]).0, 421);
    let from_site = "Origin: https://lab.example.org";
    assert_eq!(
        request_to(a, host, "POST", "/campaigns", &[&bearer, from_site]).0,
        405,
        "same origin: reaches the routes"
    );
    assert_eq!(request_to(a, host, "POST", "/campaigns", &[&bearer, "Origin: https://evil.example"]).0, 403);
    let mut s = TcpStream::connect(a).unwrap();
    let body = format!("token={token}");
    write!(
        s,
        "POST /login HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{from_site}\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let cookie = raw.lines().find_map(|l| l.strip_prefix("set-cookie: ")).unwrap_or_else(|| panic!("{raw}"));
    assert!(cookie.ends_with("; Secure"), "{cookie}");
}

/// Posts the login form with `token`; the session cookie (`name=value`) when it is right.
fn login(a: &str, token: &str) -> Option<String> {
    let mut s = TcpStream::connect(a).unwrap();
    let body = format!("token={token}");
    write!(
        s,
        "POST /login HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\nOrigin: http://{a}\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    if !raw.starts_with("HTTP/1.1 303") {
        assert!(raw.starts_with("HTTP/1.1 401"), "{raw}");
        return None;
    }
    let cookie = raw.lines().find_map(|l| l.strip_prefix("set-cookie: ")).expect("the login sets a cookie");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(!cookie.contains(token), "the cookie holds a session, not the token: {cookie}");
    Some(cookie.split(';').next().unwrap().to_string())
}

/// On a PostgreSQL store: every page and download, and a refused request, without the
/// store's password.
#[test_needs::needs(postgres)]
#[test]
fn no_response_shows_the_postgres_password() {
    let url = common::fresh_postgres_database();
    let password = url.split_once("://").unwrap().1.split_once('@').unwrap().0.split_once(':').unwrap().1.to_string();
    assert!(password.len() >= 8, "the test server has a password");
    let lab = TempLab::on_postgres(&url);
    let id = finished_campaign(&lab);
    let server = serve(&lab, &[]);
    let a = server.addr.as_str();
    let paths = [
        "/".to_string(),
        "/status.json".into(),
        "/campaigns".into(),
        format!("/campaigns/{id}"),
        format!("/campaigns/{id}/report.json"),
        format!("/campaigns/{id}/results.csv"),
        format!("/campaigns/{id}/junit.xml"),
        format!("/campaigns/{id}/manifest.json"),
        "/history".into(),
        "/history/aa-identical".into(),
        "/steps".into(),
        "/campaigns/nope".into(),
        "/history/nope".into(),
    ];
    for path in &paths {
        // The whole answer, headers too.
        let mut s = TcpStream::connect(a).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n\r\n").unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let ok = raw.starts_with("HTTP/1.1 200") || (path.ends_with("nope") && raw.starts_with("HTTP/1.1 404"));
        assert!(ok, "{path}: {}", raw.lines().next().unwrap_or_default());
        assert!(!raw.contains(&password), "{path} shows the password");
    }
    // What a listening page is sent, after a change.
    let mut s = TcpStream::connect(a).unwrap();
    write!(s, "GET /events?page=%2F HTTP/1.1\r\nHost: {a}\r\n\r\n").unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let mut reader = BufReader::new(s);
    finished_campaign(&lab);
    let mut seen = String::new();
    while !seen.contains("event: page") || !seen.ends_with("\n\n") {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).expect("an event within a minute") > 0, "{seen}");
        seen.push_str(&line);
    }
    assert!(seen.contains("<h2>Devices</h2>") && !seen.contains(&password), "the pushed page: {seen}");
}

/// A page listening on `/events` gets its new content when another process writes the
/// store: the lab page's live part, naming the new campaign; a path that is no live page
/// is refused.
#[test]
fn a_listening_page_gets_its_new_content_when_the_store_changes() {
    let lab = TempLab::new();
    let first = finished_campaign(&lab);
    let server = serve(&lab, &[]);
    let (code, body) = get(&server.addr, "/events?page=/status.json");
    assert_eq!(code, 400, "{body}");
    the_page_gets_the_next_campaign(&lab, &server, &first, || ());
}

/// On PostgreSQL, with every session of the lab's connections ended by the server (a
/// restart, a cut network) while the page listens: the watcher's connection is made again
/// and the page still gets the next campaign.
#[test_needs::needs(postgres)]
#[test]
fn a_listening_page_on_postgres_gets_new_content_after_the_servers_sessions_ended() {
    let url = common::fresh_postgres_database();
    let lab = TempLab::on_postgres(&url);
    let first = finished_campaign(&lab);
    let server = serve(&lab, &[]);
    let admin = lab::store::PgOwner::connect(&lab::store::PgUrl::parse(&url).unwrap()).unwrap();
    the_page_gets_the_next_campaign(&lab, &server, &first, || {
        // The watcher's session (`LISTEN lab_changes`) is among them.
        assert!(crate::shared_lab_postgres::end_sessions(&admin, "lab") >= 1, "no session of lab serve to end");
    });
}

/// Listens on the lab page's events, does `between`, runs a second campaign, and waits for
/// a `page` event naming it.
fn the_page_gets_the_next_campaign(lab: &TempLab, server: &Server, first: &str, between: impl FnOnce()) {
    let a = server.addr.as_str();
    let mut s = TcpStream::connect(a).unwrap();
    write!(s, "GET /events?page=%2F HTTP/1.1\r\nHost: {a}\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let mut reader = BufReader::new(s);
    let mut head = String::new();
    reader.read_line(&mut head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The page's first content: the watcher is running (and connected) before `between`.
    let mut seen = String::new();
    let mut event = false;
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).expect("the first event within a minute") > 0, "{seen}");
        seen.push_str(&line);
        event |= line.trim() == "event: page";
        if event && line.starts_with("data: ") {
            break;
        }
    }
    between();
    // Another campaign writes the store.
    let path = lab.dir.path().join("aa.toml");
    lab.cmd(&["run", path.to_str().unwrap()]).assert().success();
    let out = lab.cmd(&["status", "--json"]).assert().success().get_output().stdout.clone();
    let status: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let ids: Vec<&str> =
        status["campaigns"].as_array().unwrap().iter().filter_map(|c| c["campaign"].as_str()).collect();
    let second = ids.iter().find(|c| **c != first).expect("the second campaign").to_string();
    let mut event = false;
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).expect("an event within a minute");
        assert!(n > 0, "the stream ended: {seen}");
        seen.push_str(&line);
        event |= line.trim() == "event: page";
        if event && line.starts_with("data: ") && line.contains(&second) {
            break;
        }
    }
    assert!(seen.contains("<h2>Devices</h2>"), "the lab page's live part: {seen}");
}

/// The steps a page offers: each form's step id and the settings it asks for.
fn forms(page: &str) -> Vec<(String, Vec<String>)> {
    page.split("<form method=\"post\" action=\"/steps/")
        .skip(1)
        .map(|f| {
            let id = f.split('"').next().unwrap().to_string();
            let form = f.split("</form>").next().unwrap();
            let names = form
                .split("<input name=\"")
                .skip(1)
                .map(|n| n.split('"').next().unwrap().to_string())
                .filter(|n| n != "by")
                .collect();
            (id, names)
        })
        .collect()
}

/// The operator-steps campaign (a manual tether's unplug / plug-in, a step that asks to
/// attest two settings, an after-trial check) answered from the steps page, logged in with the token: the
/// campaign goes on to the end, the answers are attested as `lab confirm`'s are, a second
/// answer to a step is refused, and an answer without the token changes nothing.
#[test]
fn operator_steps_are_answered_from_the_page_and_the_campaign_goes_on() {
    let lab = TempLab::from_text(&format!("{}\n[serve]\ntoken_file = \"serve.token\"\n", crate::operator_steps::LAB));
    let token = "fedcba9876543210fedcba9876543210";
    std::fs::write(lab.dir.path().join("serve.token"), token).unwrap();
    let rb = crate::operator_steps::runbook(&lab, "2m");
    let server = serve(&lab, &[]);
    let a = server.addr.clone();
    let origin = format!("Origin: http://{a}");
    // Log in: a wrong token is refused, the right one gives a session cookie.
    assert_eq!(login(&a, "not-the-token-0123456789"), None);
    let cookie = format!("Cookie: {}", login(&a, token).expect("the right token logs in"));
    let post = |path: &str, body: &str, headers: &[&str]| -> (u16, String) {
        let mut s = TcpStream::connect(&a).unwrap();
        let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n{extra}Content-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let code = raw.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (code, raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
    };

    let mut run = lab.process(&["run", &rb]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let (mut answered, mut refused_checked) = (Vec::new(), false);
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "the campaign did not end; answered {answered:?}");
        let (code, page) = request(&a, "GET", "/steps", &[]);
        assert_eq!(code, 200);
        for (id, names) in forms(&page) {
            let mut body: Vec<String> = names
                .iter()
                .map(|n| match n.as_str() {
                    "brightness" => "brightness=50".to_string(),
                    "bluetooth" => "bluetooth=off".to_string(),
                    other => panic!("unexpected setting {other}"),
                })
                .collect();
            body.push("by=ana".into());
            let body = body.join("&");
            if !refused_checked {
                // Without the token: refused, and the step still waits.
                assert_eq!(post(&format!("/steps/{id}"), &body, &[&origin]).0, 401);
                assert!(forms(&request(&a, "GET", "/steps", &[]).1).iter().any(|(i, _)| *i == id));
            }
            let (code, said) = post(&format!("/steps/{id}"), &body, &[&origin, &cookie]);
            assert_eq!(code, 200, "{said}");
            assert!(said.contains("confirmed step") && said.contains("as ana"), "{said}");
            if !refused_checked {
                let (code, again) = post(&format!("/steps/{id}"), &body, &[&origin, &cookie]);
                assert_eq!(code, 400, "{again}");
                assert!(again.contains("already"), "first answer wins: {again}");
                refused_checked = true;
            }
            answered.push(id);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "the campaign ended well: {status:?}");
    assert_eq!(answered.len(), 7, "the screen step, then unplug, plug-in and check per trial: {answered:?}");
    let by: Vec<String> = lab.sql("SELECT answered_by FROM operator_steps ORDER BY id");
    assert_eq!(by, vec!["ana"; 7]);
    let values: Vec<String> = lab.sql("SELECT answer FROM operator_steps WHERE step = 'screen'");
    let v: serde_json::Value = serde_json::from_str(&values[0]).unwrap();
    assert_eq!(v, serde_json::json!({ "brightness": 50.0, "bluetooth": false }));
}

/// Ctrl-C ends `lab serve` (exit 0) even while a page keeps its event stream open.
#[test]
fn ctrl_c_stops_the_server_with_a_page_listening() {
    let lab = TempLab::new();
    let mut server = serve(&lab, &[]);
    let a = server.addr.clone();
    let mut s = TcpStream::connect(&a).unwrap();
    write!(s, "GET /events HTTP/1.1\r\nHost: {a}\r\nAccept: text/event-stream\r\n\r\n").unwrap();
    let mut head = String::new();
    BufReader::new(s.try_clone().unwrap()).read_line(&mut head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(server.child.id() as i32), nix::sys::signal::Signal::SIGINT)
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "lab serve still runs after Ctrl-C");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
}

/// A campaign waiting for a device another campaign holds is listed with a cancel button;
/// a cancel without the token, with a wrong one or from another origin changes nothing; a
/// right one stops the waiting `lab run` as its Ctrl-C would (exit 130, nothing recorded,
/// its place in the queue gone) while the holder runs on. A running campaign is not
/// cancelled from the page.
#[test]
fn a_queued_campaign_is_cancelled_from_the_page_and_refusals_change_nothing() {
    use crate::shared_lab::{finish, runbook, spawn, wait_until};
    let token = "0123456789abcdef0123456789abcdef";
    let lab = TempLab::new();
    std::fs::write(lab.dir.path().join("serve.token"), token).unwrap();
    let text = std::fs::read_to_string(&lab.lab).unwrap() + "\n[serve]\ntoken_file = \"serve.token\"\n";
    std::fs::write(&lab.lab, text).unwrap();
    let hold = runbook(&lab, "hold", "60s", 1);
    let wait = runbook(&lab, "later", "1s", 1);
    let holder = spawn(&lab, &["run", hold.to_str().unwrap()]);
    let held = || lab.try_sql::<String>("SELECT campaign FROM device_leases").unwrap_or_default();
    wait_until("the first campaign holds this-host", || !held().is_empty());
    let mut waiter = spawn(&lab, &["run", wait.to_str().unwrap()]);
    let queued = || lab.try_sql::<String>("SELECT campaign FROM device_queue").unwrap_or_default();
    wait_until("the second campaign waits in the queue", || !queued().is_empty());
    let (running, id) = (held()[0].clone(), queued()[0].clone());

    let server = serve(&lab, &[]);
    let a = server.addr.as_str();
    let (code, page) = get(a, "/");
    assert_eq!(code, 200);
    let form = format!("<form method=\"post\" action=\"/campaigns/{id}/cancel\"");
    assert!(page.contains("<h2>Queued campaigns</h2>") && page.contains(&form), "{page}");
    assert!(!page.contains(&format!("/campaigns/{running}/cancel")), "a running campaign has no cancel button");
    let (code, list) = get(a, "/campaigns");
    assert_eq!(code, 200);
    assert!(list.contains(&form), "the campaigns page lists it as queued too: {list}");

    let path = format!("/campaigns/{id}/cancel");
    let origin = format!("Origin: http://{a}");
    let bearer = format!("Authorization: Bearer {token}");
    for (headers, want) in [
        (vec![origin.as_str()], 401),
        (vec!["Authorization: Bearer fedcba9876543210fedcba9876543210", origin.as_str()], 401),
        (vec![bearer.as_str(), "Origin: http://evil.example"], 403),
        (vec![bearer.as_str()], 403),
    ] {
        let (code, body) = request(a, "POST", &path, &headers);
        assert_eq!(code, want, "{headers:?}: {body}");
        assert_eq!(queued(), vec![id.clone()], "{headers:?} changed nothing");
        assert!(waiter.try_wait().unwrap().is_none(), "{headers:?}: the waiting run goes on");
    }
    // The running campaign is no queued one.
    let (code, body) = request(a, "POST", &format!("/campaigns/{running}/cancel"), &[&bearer, &origin]);
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("not waiting in any device's queue"), "{body}");

    let (code, body) = request(a, "POST", &path, &[&bearer, &origin]);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("told to stop as on Ctrl-C"), "{body}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while waiter.try_wait().unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the cancelled run still waits");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (code, out) = finish(waiter);
    assert_eq!(code, 130, "{out}");
    assert!(out.contains("stopped while waiting for devices") && out.contains("nothing was recorded"), "{out}");
    assert!(queued().is_empty(), "its place in the queue is gone");
    assert_eq!(held(), vec![running.clone()], "the holder runs on");
    let campaigns: Vec<String> = lab.sql("SELECT id FROM campaigns");
    assert_eq!(campaigns, vec![running], "the cancelled campaign left nothing in the store");
    assert_eq!(request(a, "POST", &path, &[&bearer, &origin]).0, 404, "nothing to cancel any more");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(holder.id() as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let _ = finish(holder);
}

/// The systemd unit docs/serve.md gives for running `lab serve` as a service verifies, with
/// this build's binary and a lab folder of its own put in for the docs' paths.
#[test_needs::needs(systemd_analyze)]
#[test]
fn the_service_unit_in_the_docs_verifies() {
    let docs = std::fs::read_to_string(common::root().join("docs/serve.md")).unwrap();
    let unit = docs
        .split("```ini\n# /etc/systemd/system/lab-serve.service\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/serve.md has the unit");
    assert!(unit.contains("ExecStart=/usr/local/bin/lab --lab /srv/lab/lab.toml serve"), "{unit}");
    let lab = TempLab::new();
    let folder = lab.dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(folder.join("artifacts")).unwrap();
    let bin = std::fs::canonicalize(assert_cmd::cargo::cargo_bin("lab")).unwrap();
    let user = String::from_utf8(std::process::Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let unit = unit
        .replace("/usr/local/bin/lab", bin.to_str().unwrap())
        .replace("/srv/lab", folder.to_str().unwrap())
        .replace("User=lab", &format!("User={}", user.trim()));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lab-serve.service");
    std::fs::write(&file, unit).unwrap();
    let out = std::process::Command::new("systemd-analyze").arg("verify").arg(&file).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "systemd-analyze verify said:\n{}", String::from_utf8_lossy(&out.stderr));
}
