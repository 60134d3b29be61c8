//! `lab serve`'s Submit and Cancel of campaigns for the lab's agents, and its agents
//! table, through the real binaries over HTTP (docs/serve.md, docs/agents.md): a runbook
//! of the lab's runbook folder is submitted queued; a name outside the folder or not in it
//! is refused and creates nothing; a queued one is cancelled; without the token nothing
//! changes; an agent shows on the lab page and runs what is submitted.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::TempLab;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// A runbook of one trial per build on the four simulated phones (virtual clocks: quick).
pub(crate) fn tiny_runbook(name: &str) -> String {
    format!(
        "name = \"{name}\"\nduration = \"1m\"\nrepeats = 1\nseed = 3\ndevices = [\"tag:phone\"]\n\
         [builds.a]\nbaseline = true\n[builds.a.sim]\ncpu_pct = 5\nwakeups_per_s = 5\nmemory_mb = 10\n\
         [builds.b]\n[builds.b.sim]\ncpu_pct = 8\nwakeups_per_s = 5\nmemory_mb = 10\n\
         [workload]\nrequest_interval = \"1s\"\n"
    )
}

/// One HTTP/1.1 request with a form body; the status code and the body.
fn request(addr: &str, method: &str, path: &str, headers: &[&str], form: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {}\r\n{extra}\r\n{form}",
        form.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// (id, status, submitted) of every campaign in the store.
fn campaigns(lab: &TempLab) -> Vec<String> {
    lab.try_sql("SELECT id || ' ' || status || ' ' || submitted FROM campaigns ORDER BY id").unwrap_or_default()
}

pub(crate) fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < until, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_runbook_of_the_folder_is_submitted_and_cancelled_from_the_page_and_an_agent_runs_one() {
    let lab = TempLab::new();
    let dir = lab.dir.path();
    std::fs::write(dir.join("serve.token"), TOKEN).unwrap();
    let text = std::fs::read_to_string(&lab.lab).unwrap() + "\n[serve]\ntoken_file = \"serve.token\"\n";
    std::fs::write(&lab.lab, text).unwrap();
    std::fs::create_dir(dir.join("runbooks")).unwrap();
    std::fs::write(dir.join("runbooks/tiny.toml"), tiny_runbook("tiny")).unwrap();
    // A runbook beside the folder, not in it: never submitted from the page.
    std::fs::write(dir.join("outside.toml"), tiny_runbook("outside")).unwrap();
    lab.cmd(&["status"]).assert().success();

    let server = crate::serve::serve(&lab, &[]);
    let a = server.addr.as_str();
    let origin = format!("Origin: http://{a}");
    let bearer = format!("Authorization: Bearer {TOKEN}");
    let (code, page) = request(a, "GET", "/submit", &[], "");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("<option>tiny.toml</option>") && !page.contains("outside"), "{page}");

    // Refused, and nothing created: no token, a wrong origin, names outside the folder or
    // not listed, a bad priority.
    for (headers, form, want) in [
        (vec![origin.as_str()], "runbook=tiny.toml", 401),
        (vec![bearer.as_str(), "Origin: http://evil.example"], "runbook=tiny.toml", 403),
        (vec![bearer.as_str(), origin.as_str()], "runbook=..%2Foutside.toml", 400),
        (vec![bearer.as_str(), origin.as_str()], "runbook=%2Fetc%2Fpasswd", 400),
        (vec![bearer.as_str(), origin.as_str()], "runbook=nope.toml", 400),
        (vec![bearer.as_str(), origin.as_str()], "runbook=tiny.toml&priority=high", 400),
    ] {
        let (code, body) = request(a, "POST", "/submit", &headers, form);
        assert_eq!(code, want, "{headers:?} {form}: {body}");
        assert_eq!(campaigns(&lab), Vec::<String>::new(), "{form} created nothing");
    }
    let (_, body) = request(a, "POST", "/submit", &[&bearer, &origin], "runbook=..%2Foutside.toml");
    assert!(body.contains("`../outside.toml` is not a runbook of") && body.contains("fix: pick one"), "{body}");

    // Submitted: queued for the agents, with its priority, and listed with a Cancel button.
    let (code, body) = request(a, "POST", "/submit", &[&bearer, &origin], "runbook=tiny.toml&priority=7");
    assert_eq!(code, 200, "{body}");
    let ids: Vec<String> = lab.sql("SELECT id FROM campaigns");
    assert_eq!(ids.len(), 1, "{body}");
    let id = &ids[0];
    assert!(body.contains(&format!("Submitted campaign <a href=\"/campaigns/{id}\">{id}</a>")), "{body}");
    assert!(body.contains("No agent serves local now"), "{body}");
    assert_eq!(campaigns(&lab), [format!("{id} queued 1")]);
    assert_eq!(lab.sql::<i64>("SELECT priority FROM campaigns"), [7]);
    let (_, page) = request(a, "GET", "/campaigns", &[], "");
    let cancel = format!("<form method=\"post\" action=\"/campaigns/{id}/cancel\"");
    assert!(page.contains("<h2>Submitted campaigns</h2>") && page.contains(&cancel), "{page}");

    // Cancel: without the token nothing changes; with it the queued campaign is gone.
    let path = format!("/campaigns/{id}/cancel");
    let (code, body) = request(a, "POST", &path, &[&origin], "");
    assert_eq!(code, 401, "{body}");
    assert_eq!(campaigns(&lab), [format!("{id} queued 1")]);
    let (code, body) = request(a, "POST", &path, &[&bearer, &origin], "");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("was queued for the agents: removed"), "{body}");
    assert_eq!(campaigns(&lab), Vec::<String>::new());
    assert_eq!(request(a, "POST", &path, &[&bearer, &origin], "").0, 404, "nothing left to cancel");

    // An agent: on the lab page, and it runs what is submitted next.
    let agent = crate::agent_ops::Agent::start(&lab);
    let (_, page) = request(a, "GET", "/", &[], "");
    let version = env!("CARGO_PKG_VERSION");
    assert!(page.contains("<td>local</td><td>serving</td>") && page.contains(version), "{page}");
    let (code, body) = request(a, "POST", "/submit", &[&bearer, &origin], "runbook=tiny.toml");
    assert_eq!(code, 200, "{body}");
    assert!(!body.contains("No agent serves"), "{body}");
    wait_until("the agent ran the campaign", || campaigns(&lab).first().is_some_and(|c| c.ends_with(" done 1")));
    let valid: Vec<i64> = lab.sql("SELECT COUNT(DISTINCT trial_idx) FROM attempts WHERE status = 'valid'");
    let planned: Vec<i64> = lab.sql("SELECT COUNT(*) FROM trials");
    assert!(planned[0] > 0 && valid == planned, "every planned trial valid: {valid:?} of {planned:?}");
    // Over: no Cancel button any more.
    let (_, page) = request(a, "GET", "/campaigns", &[], "");
    assert!(!page.contains("<h2>Submitted campaigns</h2>"), "{page}");
    agent.drain();
}

/// A running campaign of the agents is cancelled from the page as `lab cancel` does: the
/// agent stops its trial at once, the campaign is interrupted and resumable.
#[test]
fn a_running_submitted_campaign_is_cancelled_from_the_page() {
    let lab = TempLab::new();
    let dir = lab.dir.path();
    std::fs::write(dir.join("serve.token"), TOKEN).unwrap();
    // The lab's own folder as the runbook folder: the runbook below is written there.
    let text =
        std::fs::read_to_string(&lab.lab).unwrap() + "\n[serve]\ntoken_file = \"serve.token\"\nrunbooks = \".\"\n";
    std::fs::write(&lab.lab, text).unwrap();
    crate::shared_lab::runbook(&lab, "long", "600s", 1);
    lab.cmd(&["status"]).assert().success();
    let agent = crate::agent_ops::Agent::start(&lab);
    let server = crate::serve::serve(&lab, &[]);
    let a = server.addr.as_str();
    let (origin, bearer) = (format!("Origin: http://{a}"), format!("Authorization: Bearer {TOKEN}"));

    let (code, body) = request(a, "POST", "/submit", &[&bearer, &origin], "runbook=long.toml");
    assert_eq!(code, 200, "{body}");
    let id: String = lab.sql("SELECT id FROM campaigns").remove(0);
    // In its soak, as the lab page shows it (stopped while it launches, see the report).
    let soaking = || {
        let status: serde_json::Value =
            serde_json::from_str(&request(a, "GET", "/status.json", &[], "").1).unwrap_or_default();
        let host = status["devices"].as_array().and_then(|d| d.iter().find(|d| d["device"] == "this-host")).cloned();
        host.is_some_and(|d| d["phase"] == "soak")
    };
    wait_until("the agent's trial soaks", soaking);
    assert_eq!(campaigns(&lab), [format!("{id} running 1")]);
    let (_, page) = request(a, "GET", "/", &[], "");
    assert!(page.contains(&format!("<form method=\"post\" action=\"/campaigns/{id}/cancel\"")), "{page}");

    let (code, body) = request(a, "POST", &format!("/campaigns/{id}/cancel"), &[&bearer, &origin], "");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("its agents stop it now") && body.contains("lab submit --resume"), "{body}");
    assert_eq!(campaigns(&lab), [format!("{id} interrupted 1")]);
    let ended = || std::fs::read_to_string(dir.join("soaks.log")).unwrap_or_default().contains("long end");
    let until = Instant::now() + Duration::from_secs(60);
    while !ended() {
        assert!(Instant::now() < until, "the agent never stopped the trial's app; it said:\n{}", agent.said());
        std::thread::sleep(Duration::from_millis(50));
    }
    // Over: cancelling again is refused.
    let (code, body) = request(a, "POST", &format!("/campaigns/{id}/cancel"), &[&bearer, &origin], "");
    assert_eq!(code, 409, "{body}");
    agent.drain();
}
