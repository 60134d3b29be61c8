//! `lab serve` in a real browser: Debian's Chromium, headless, driven over WebDriver by
//! Debian's chromedriver (nothing is downloaded). On a running simulated campaign with a
//! manual tether: the lab page shows the devices and is updated in place (never reloaded)
//! as the campaign moves: trials start and finish; the operator logs in with the token and answers every step
//! from the steps page by typing and clicking, and the campaign goes on to its end; the
//! campaign page shows the report with its plots. On a lab with eight campaigns of one
//! runbook, the history page shows the change point and links its campaign.
//!
//! Screenshots of each page are checked to be non-blank and kept: in `$LAB_CI_ARTIFACTS/
//! screenshots` (set by .ci/run), else in the target folder's `tmp/serve-screenshots`.
//!
//! Needs `chromium` and `chromedriver` (`#[test_needs::needs(chromedriver)]`): ignored
//! without them unless LAB_REQUIRE_CHROMEDRIVER=1 (set by .ci/run, which installs both).

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use common::TempLab;

/// The W3C name of an element reference in WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process with one headless Chromium session; both end when dropped.
struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let (driver, port, mut out) = Self::driver();
        // Keep reading its stdout so that it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let profile = tempfile::tempdir().unwrap();
        let mut b = Browser { driver, port, session: String::new(), _profile: profile };
        let args = [
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            // A tab in the background still runs its page's script (the live reload).
            "--disable-background-timer-throttling".into(),
            "--disable-renderer-backgrounding".into(),
            "--disable-backgrounding-occluded-windows".into(),
            "--window-size=1280,1000".into(),
            format!("--user-data-dir={}", b._profile.path().display()),
        ];
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": { "args": args },
        }}});
        let v = b.call("POST", "/session", Some(caps));
        b.session = v["sessionId"].as_str().expect("a session id").to_string();
        b
    }

    /// A chromedriver on a port of its choosing, that port, and its stdout. Under the suite's
    /// parallelism a driver can end before it says its port: with `--port=0` it picks a free
    /// port, then binds it, and another test's server may take it in between ("Port not
    /// available. Exiting..."). Such a start is tried again, a few times, and a last failure
    /// shows what the driver said.
    fn driver() -> (Child, u16, BufReader<std::process::ChildStdout>) {
        const TRIES: usize = 5;
        let mut said = Vec::new();
        for _ in 0..TRIES {
            let log = tempfile::NamedTempFile::new().unwrap();
            let mut driver = Command::new("chromedriver")
                .arg("--port=0")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(log.reopen().unwrap())
                .spawn()
                .expect("chromedriver starts");
            let mut out = BufReader::new(driver.stdout.take().unwrap());
            let mut lines = String::new();
            let port = loop {
                let mut line = String::new();
                if out.read_line(&mut line).unwrap_or(0) == 0 {
                    break None;
                }
                lines.push_str(&line);
                if let Some(rest) = line.split("started successfully on port ").nth(1) {
                    break Some(rest.trim().trim_end_matches('.').parse::<u16>().expect("a port"));
                }
            };
            if let Some(port) = port {
                return (driver, port, out);
            }
            let status = driver.wait().unwrap();
            said.push(format!("{status}: {lines}{}", std::fs::read_to_string(log.path()).unwrap_or_default()));
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("chromedriver ended before saying its port, {TRIES} times: {said:#?}");
    }

    /// One WebDriver command; its `value`. Panics with the driver's error otherwise.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// One WebDriver command; its `value`, or the driver's error (`stale element
    /// reference: …` when the page was reloaded under the element).
    fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        )
        .unwrap();
        // chromedriver keeps the connection open: read the head, then Content-Length bytes.
        let mut reader = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).unwrap() > 0, "{method} {path}: the connection closed");
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let length = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|n| n.trim().parse::<usize>()))
            .expect("a Content-Length")
            .unwrap();
        let mut raw = vec![0; length];
        reader.read_exact(&mut raw).unwrap();
        let body = String::from_utf8_lossy(&raw).into_owned();
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{method} {path}: {e}: {body}"));
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("{}: {}", v["value"]["error"], v["value"]["message"]));
        }
        Ok(v["value"].clone())
    }

    fn session_call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    fn try_session(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        self.try_call(method, &format!("/session/{}{path}", self.session), body)
    }

    fn go(&self, url: &str) {
        self.session_call("POST", "/url", Some(json!({ "url": url })));
    }

    fn url(&self) -> String {
        self.session_call("GET", "/url", None).as_str().unwrap_or_default().to_string()
    }

    /// Runs `script` in the page (its `return` value comes back).
    fn js(&self, script: &str) -> Value {
        self.session_call("POST", "/execute/sync", Some(json!({ "script": script, "args": [] })))
    }

    fn find(&self, css: &str) -> String {
        let v = self.session_call("POST", "/element", Some(json!({ "using": "css selector", "value": css })));
        v[ELEMENT].as_str().unwrap_or_else(|| panic!("no element {css}")).to_string()
    }

    fn find_all(&self, css: &str) -> Result<Vec<String>, String> {
        let v = self.try_session("POST", "/elements", Some(json!({ "using": "css selector", "value": css })))?;
        Ok(v.as_array().unwrap().iter().map(|e| e[ELEMENT].as_str().unwrap().to_string()).collect())
    }

    fn type_into(&self, element: &str, text: &str) -> Result<(), String> {
        self.try_session("POST", &format!("/element/{element}/value"), Some(json!({ "text": text }))).map(drop)
    }

    fn click(&self, element: &str) -> Result<(), String> {
        self.try_session("POST", &format!("/element/{element}/click"), Some(json!({}))).map(drop)
    }

    fn attribute(&self, element: &str, name: &str) -> Result<String, String> {
        let v = self.try_session("GET", &format!("/element/{element}/attribute/{name}"), None)?;
        Ok(v.as_str().unwrap_or_default().to_string())
    }

    /// Opens a new tab and switches to it; returns the handle of the tab it left.
    fn new_tab(&self) -> String {
        let old = self.session_call("GET", "/window", None).as_str().unwrap().to_string();
        let v = self.session_call("POST", "/window/new", Some(json!({ "type": "tab" })));
        self.switch(v["handle"].as_str().unwrap());
        old
    }

    fn tab(&self) -> String {
        self.session_call("GET", "/window", None).as_str().unwrap().to_string()
    }

    fn switch(&self, handle: &str) {
        self.session_call("POST", "/window", Some(json!({ "handle": handle })));
    }

    /// A screenshot of the tab, written to `dir/name.png`; fails when the page looks blank.
    fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        let b64 = self.session_call("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD.decode(b64.as_str().unwrap()).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        let (_, non_white) = crate::html_screenshot::pixels(&path, &[], 0);
        eprintln!("screenshot {}: {:.1} % non-white", path.display(), non_white * 100.0);
        assert!(non_white > 0.01, "{name}: the page looks blank ({:.2} % non-white)", non_white * 100.0);
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.call("DELETE", &format!("/session/{}", self.session), None)
            }));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Waits up to 20 s for `f`, else fails naming `what`.
fn soon(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < until, "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Where the screenshots are kept, emptied first.
fn screenshot_dir() -> PathBuf {
    let dir = match std::env::var_os("LAB_CI_ARTIFACTS") {
        Some(d) => PathBuf::from(d).join("screenshots"),
        None => PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-screenshots"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The cells of column `name` of the page's first table, as text.
const COLUMN: &str = "const t=document.querySelector('table'); if(!t) return [];\
const hs=[...t.rows[0].cells].map(c=>c.innerText.trim()); const i=hs.indexOf(arguments[0]||'trial');\
return i<0?[]:[...t.rows].slice(1).map(r=>r.cells[i].innerText.trim());";

#[test_needs::needs(chromedriver)]
#[test]
fn the_lab_in_chromium_updates_live_takes_the_operators_answers_and_shows_reports_and_history() {
    let shots = screenshot_dir();
    let browser = Browser::start();

    // A manual-tether campaign: its steps wait for answers from the page.
    let token = "0123456789abcdef0123456789abcdef";
    let lab = TempLab::from_text(&format!("{}\n[serve]\ntoken_file = \"serve.token\"\n", crate::operator_steps::LAB));
    std::fs::write(lab.dir.path().join("serve.token"), token).unwrap();
    let rb = crate::operator_steps::runbook(&lab, "2m");
    let server = crate::serve::serve(&lab, &[]);
    let base = format!("http://{}", server.addr);

    // Log in with the token, as an operator would: typed into the form.
    browser.go(&format!("{base}/login"));
    let field = browser.find("input[name=token]");
    browser.type_into(&field, token).unwrap();
    browser.click(&browser.find("button[type=submit]")).unwrap();
    soon("the login leads to the steps", || browser.url().ends_with("/steps"));

    // The lab page, open before the campaign starts.
    let lab_tab = browser.tab();
    browser.go(&format!("{base}/"));
    let devices =
        browser.js("return [...document.querySelectorAll('table')[0].rows].slice(1).map(r=>r.cells[0].innerText)");
    assert_eq!(devices, json!(["sim-pixel"]), "the lab page lists the device");
    let first_load = browser.js("return performance.timeOrigin");
    browser.screenshot(&shots, "lab-idle");

    let mut run = lab.process(&["run", &rb]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    browser.new_tab();
    let steps_tab = browser.tab();
    let deadline = Instant::now() + Duration::from_secs(180);
    let (mut answered, mut contents, mut trials) = (0, BTreeSet::new(), BTreeSet::new());
    let (mut shot_steps, mut stale, mut guard_checked) = (false, 0, false);
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the campaign did not end; {answered} steps answered");
        // The operator's tab: answer every waiting step by typing into its form and clicking.
        browser.switch(&steps_tab);
        browser.go(&format!("{base}/steps"));
        // Typed and clicked like a person would; a page that reloaded under the form (the
        // store moved before anything was typed) is answered on the next round.
        let answer = |guard_checked: &mut bool| -> Result<bool, String> {
            let Some(form) = browser.find_all("section.step form")?.into_iter().next() else { return Ok(false) };
            let action = browser.attribute(&form, "action")?;
            let css = format!("form[action=\"{}\"]", action.trim_start_matches(&base));
            for (k, input) in browser.find_all(&format!("{css} input"))?.into_iter().enumerate() {
                let value = match browser.attribute(&input, "name")?.as_str() {
                    "brightness" => "50",
                    "bluetooth" => "off",
                    "by" => "ana",
                    other => panic!("unexpected field {other}"),
                };
                browser.type_into(&input, value)?;
                if k == 0 && !*guard_checked {
                    // The page gets its content pushed at the next check after it began
                    // listening: with a half-typed form it is kept, and the title says so.
                    let held = || browser.js("return document.title").as_str().is_some_and(|t| t.starts_with("* "));
                    let typed_at = Instant::now();
                    while !held() && typed_at.elapsed() < Duration::from_secs(2) {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    if !held() {
                        // That push came before the typing began (on a loaded machine the
                        // clicks are slower than the watcher's one-second check): another
                        // page starting to listen on /steps has /steps sent again, to
                        // every page on it.
                        let typing_tab = browser.tab();
                        browser.new_tab();
                        browser.go(&format!("{base}/steps"));
                        browser.switch(&typing_tab);
                    }
                    soon("the pushed update is held back while the operator types", held);
                    let kept = browser.session_call("GET", &format!("/element/{input}/property/value"), None);
                    assert_eq!(kept, json!(value), "the typed value stays");
                    *guard_checked = true;
                }
            }
            browser.click(&browser.find(&format!("{css} button")))?;
            Ok(true)
        };
        if !shot_steps && !browser.find_all("section.step form").unwrap().is_empty() {
            browser.screenshot(&shots, "steps");
            shot_steps = true;
        }
        match answer(&mut guard_checked) {
            Ok(true) => {
                soon("the answer is confirmed as lab confirm says it", || {
                    let said = browser.js("return document.body.innerText").as_str().unwrap_or_default().to_string();
                    said.contains("confirmed step") && said.contains("as ana")
                });
                answered += 1;
            }
            Ok(false) => {}
            // The page reloaded under the form before anything was typed into it.
            Err(e) if e.contains("stale element") || e.contains("not interactable") => stale += 1,
            Err(e) => panic!("answering from the steps page: {e}"),
        }
        // The lab tab, never navigated again: the server sends its new content as the store
        // moves, and it swaps it in.
        browser.switch(&lab_tab);
        let shown = browser.js("return document.getElementById('live').innerHTML").to_string();
        contents.insert(shown);
        for t in browser.js(COLUMN).as_array().unwrap() {
            let t = t.as_str().unwrap_or_default();
            if !t.is_empty() && t != "-" && trials.insert(t.to_string()) && trials.len() == 1 {
                browser.screenshot(&shots, "lab-running");
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "the campaign went on to its end: {status:?}");
    assert_eq!(answered, 7, "the screen step, then unplug, plug-in and check per trial ({stale} forms reloaded away)");
    assert!(guard_checked, "the typing guard was seen at work");
    let by: Vec<String> = lab.sql("SELECT answered_by FROM operator_steps ORDER BY id");
    assert_eq!(by, vec!["ana"; 7], "each answer is the row lab confirm writes");
    assert!(contents.len() >= 3, "the lab page changed as the campaign moved: {} contents", contents.len());
    assert_eq!(trials.len(), 2, "the lab page showed each trial as it ran: {trials:?}");
    assert_eq!(browser.js("return performance.timeOrigin"), first_load, "updated in place, never reloaded");
    // Once it ended the page says so without being asked.
    soon("the lab page shows no trial once the campaign ended", || {
        browser.js(COLUMN).as_array().unwrap().iter().all(|t| t.as_str() == Some("-"))
    });

    // The campaign's page: the report with its plots, drawn.
    let id: Vec<String> = lab.sql("SELECT id FROM campaigns");
    browser.switch(&steps_tab);
    browser.go(&format!("{base}/campaigns/{}", id[0]));
    let svgs = browser.js("return document.querySelectorAll('svg').length").as_u64().unwrap();
    assert!(svgs >= 2, "the report's plots: {svgs} svg");
    let text = browser.js("return document.body.innerText").as_str().unwrap().to_string();
    assert!(text.contains("results.csv") && text.contains("attested"), "{}", &text[..text.len().min(400)]);
    browser.screenshot(&shots, "campaign");
    drop(server);

    // History: eight campaigns of one runbook, the busy build 20 % slower from the fifth.
    let history = crate::cli_history::lab_with_busy_cpu(&[40, 40, 40, 40, 48, 48, 48, 48]).0;
    let server = crate::serve::serve(&history, &[]);
    let base = format!("http://{}", server.addr);
    browser.go(&format!("{base}/history"));
    browser.click(&browser.find("a[href=\"/history/quickstart\"]")).unwrap();
    soon("the link leads to the runbook's history", || browser.url().ends_with("/history/quickstart"));
    // The change point: its mark in the busy × iPhone 6s × cpu_pct series, at the fifth campaign.
    let marked = browser.js(
        "return [...document.querySelectorAll('h2')].filter(h=>h.innerText.startsWith('busy × iPhone 6s · cpu_pct'))\
         .map(h=>{let t=h.nextElementSibling; while(t&&t.tagName!=='TABLE') t=t.nextElementSibling;\
         return [...t.rows].slice(1).filter(r=>r.innerText.includes('▲ +')).map(r=>r.cells[0].innerText)})",
    );
    assert_eq!(marked, json!([["4"]]), "one change point, at point 4");
    let plots = browser.js("return document.querySelectorAll('figure svg').length").as_u64().unwrap();
    assert!(plots >= 1, "the trends are drawn");
    browser.js("[...document.querySelectorAll('h2')].find(h=>h.innerText.startsWith('busy × iPhone 6s · cpu_pct'))\
         .scrollIntoView()");
    browser.screenshot(&shots, "history");
    // Its point links the campaign behind it.
    let link = browser.js("const r=[...document.querySelectorAll('tr')].find(r=>r.innerText.includes('▲ +')); \
         return r.querySelector('a').getAttribute('href')");
    let href = link.as_str().expect("the change point's campaign is a link").to_string();
    browser.go(&format!("{base}{href}"));
    assert!(browser.js("return document.querySelectorAll('svg').length").as_u64().unwrap() >= 1);
}

/// The lab page loads in Chromium while a thousand idle connections are open (each is
/// closed at the header timeout; tests/integration/serve_abuse.rs checks that and memory).
#[test_needs::needs(chromedriver)]
#[test]
fn the_lab_page_loads_in_chromium_while_a_thousand_idle_connections_are_open() {
    const IDLE: usize = 1000;
    crate::serve_abuse::room_for(IDLE as u64);
    // Not screenshot_dir(): it empties the folder the other browser test writes into.
    let shots = match std::env::var_os("LAB_CI_ARTIFACTS") {
        Some(d) => PathBuf::from(d).join("screenshots-idle-flood"),
        None => PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("serve-screenshots-idle-flood"),
    };
    std::fs::create_dir_all(&shots).unwrap();
    let browser = Browser::start();
    let lab = TempLab::new();
    // Long enough that the idle connections are all open while the page loads.
    let server = crate::serve_abuse::serve_with(&lab, "header_timeout = \"10s\"\n");
    let idle: Vec<TcpStream> = (0..IDLE).map(|_| TcpStream::connect(&server.addr).unwrap()).collect();
    let opened = Instant::now();
    browser.go(&format!("http://{}/", server.addr));
    let devices =
        browser.js("return [...document.querySelectorAll('table')[0].rows].slice(1).map(r=>r.cells[0].innerText)");
    for device in ["sim-pixel-1", "sim-iphone-1"] {
        assert!(devices.as_array().unwrap().contains(&json!(device)), "the lab page lists {device}: {devices}");
    }
    assert!(opened.elapsed() < Duration::from_secs(10), "the page loaded while the idle connections were open");
    browser.screenshot(&shots, "lab-under-idle-flood");
    // They were still open: none had sent anything, and the timeout had not come.
    let mut first = &idle[0];
    first.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 1];
    let still_open = matches!(first.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    assert!(still_open || opened.elapsed() >= Duration::from_secs(10), "an idle connection was closed early");
}
