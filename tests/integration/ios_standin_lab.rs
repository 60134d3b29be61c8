//! `lab` itself (the real binary, its `ios` backend on the real idevice crate) against the
//! stand-in iPhone (standins/iphone) on a Unix socket: every way a phone can be unusable
//! stops `lab run` with exit 3 and one line that names the fix, before anything is
//! recorded; a usable phone gets the .ipa installed over AFC and the installation proxy
//! (once: the second campaign finds the recorded hash and bundle version), its battery
//! read over USB before the trial, and the app launched and stopped over DVT.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::TempLab;
use common::iphone::{StandIn, UDID, phone_toml};

/// A lab whose `iphone-1` is `udid` behind the stand-in's socket, and a runbook of one
/// build (an .ipa the stand-in made) and one trial.
/// Its tether is the default for a phone (manual) and nobody answers the unplug step: the
/// short tether and operator timeouts end an attempt there in seconds.
fn lab_for(standin: &StandIn, udid: &str) -> (TempLab, PathBuf) {
    lab_on(standin, udid, "[[host]]\nname = \"local\"\n", "local")
}

/// The same, with the phone on `host` (described by `host_table`).
fn lab_on(standin: &StandIn, udid: &str, host_table: &str, host: &str) -> (TempLab, PathBuf) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let lab = TempLab::from_text(&format!(
        "[lab]\nname = \"ios\"\nendpoint_bind = \"0.0.0.0:{port}\"\nendpoint_url = \"http://lab-machine.invalid:{port}\"\n\n\
         {host_table}\n\
         [[device]]\nname = \"iphone-1\"\nhost = \"{host}\"\nplatform = \"ios\"\nmodel = \"iPhone 13 Pro\"\n\
         [device.ios]\nudid = \"{udid}\"\nusbmuxd = \"{}\"\n",
        standin.socket.display()
    ));
    let ipa = lab.dir.path().join("Control.ipa");
    let made = Command::new(common::standin("iphone"))
        .args(["ipa", "--bundle-id", "io.example.control", "--version", "42", "--out"])
        .arg(&ipa)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let rb = lab.dir.path().join("ios.toml");
    std::fs::write(
        &rb,
        "name = \"ios\"\nduration = \"5s\"\nrepeats = 1\nretries = 0\ndevices = [\"iphone-1\"]\n\n\
         [timeouts]\ntether = \"1s\"\noperator = \"2s\"\n\n\
         [builds.control]\nbaseline = true\n[builds.control.ios]\nipa = \"Control.ipa\"\nbundle_id = \"io.example.control\"\n\n\
         [configs.default]\n[configs.default.ios]\nenv = { ENVOY_DNS_REFRESH_S = \"60\" }\n",
    )
    .unwrap();
    (lab, rb)
}

/// `lab run` on a phone of iOS `version` scripted with `extra` lines: its exit code and
/// the line naming the phone.
fn refused(version: &str, extra: &str) -> (i32, String, TempLab) {
    let standin = StandIn::start(&[(UDID, extra)]);
    // The stand-in reads its phone file on every request.
    let file = standin.root().join(format!("phones/{UDID}.toml"));
    std::fs::write(
        &file,
        phone_toml(extra).replace("ProductVersion = \"16.7.2\"", &format!("ProductVersion = \"{version}\"")),
    )
    .unwrap();
    let (lab, rb) = lab_for(&standin, UDID);
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = stderr.lines().find(|l| l.contains("iphone-1")).unwrap_or_else(|| panic!("{stderr}")).to_string();
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    (out.status.code().unwrap_or(-1), line, lab)
}

#[test]
fn each_way_a_phone_is_unusable_is_one_line_with_its_fix_and_exit_3_before_any_trial() {
    let cases = [
        ("16.7.2", "fault = \"not_paired\"", "is not paired with host local", "idevicepair pair -u"),
        (
            "16.7.2",
            "fault = \"untrusted\"",
            "does not trust host local (lockdown says InvalidHostID",
            "idevicepair unpair",
        ),
        ("16.7.2", "fault = \"locked\"", "is locked (GetProhibited)", "fix: unlock it"),
        ("16.7.2", "fault = \"password_protected\"", "is locked (PasswordProtected)", "fix: unlock it"),
        ("16.7.2", "developer_mode = false", "has Developer Mode off", "Developer Mode > On"),
        (
            "16.7.2",
            "developer_image_mounted = false",
            "(iOS 16.7.2) has no developer disk image mounted",
            "fix: mount it",
        ),
        ("17.5.1", "fault = \"no_tunnel\"", "(iOS 17.5.1) offers no CoreDevice tunnel", "personalized developer image"),
    ];
    for (version, extra, what, fix) in cases {
        let (code, line, lab) = refused(version, extra);
        assert_eq!(code, 3, "{what}: {line}");
        assert!(line.contains(&format!("iPhone {UDID} ")) && line.contains(what), "{what}: {line}");
        assert!(line.contains(fix), "{fix}: {line}");
        assert!(lab.campaigns().is_empty(), "{what}: nothing may be recorded");
    }
}

#[test]
fn a_phone_usbmuxd_does_not_list_is_not_connected_and_the_listed_ones_are_named() {
    let standin = StandIn::start(&[(UDID, "")]);
    let (lab, rb) = lab_for(&standin, "00008030-00AA00BB00CC00DD");
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "device iphone-1 is not connected: usbmuxd at {} on host local lists {UDID}, not iPhone 00008030-00AA00BB00CC00DD; fix: plug it in",
            standin.socket.display()
        )),
        "{stderr}"
    );
    assert!(lab.campaigns().is_empty());
}

#[test]
fn a_usable_phone_gets_the_ipa_installed_once_its_battery_read_and_the_app_launched_and_stopped_over_dvt() {
    let standin = StandIn::start(&[(UDID, "")]);
    let (lab, rb) = lab_for(&standin, UDID);
    let ipa_sha = common::adb::sha256(&std::fs::read(lab.dir.path().join("Control.ipa")).unwrap());
    for round in 0..2 {
        let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // Launched over DVT, then nobody confirms the unplug: the untether times out, the
        // attempt is invalid (exit 4) and the app is stopped over DVT again.
        assert_eq!(out.status.code(), Some(4), "round {round}: {stdout}\n{stderr}");
        let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts");
        assert!(reasons.last().is_some_and(|r| r.contains("untether did not finish")), "{reasons:?}");
        let (launches, kills) = (standin.journalled("dvt", "launch"), standin.journalled("dvt", "kill"));
        assert_eq!((launches.len(), kills.len()), (round + 1, round + 1), "{launches:?} {kills:?}");
        let launch = &launches[round];
        assert_eq!(launch["bundle_id"], "io.example.control", "{launch}");
        assert_eq!(launch["env"]["LAB_TRIAL"], "0000-iphone-1-control-r0", "{launch}");
        assert_eq!(launch["env"]["ENVOY_DNS_REFRESH_S"], "60", "the config's env: {launch}");
        assert_eq!((&kills[round]["pid"], &kills[round]["running"]), (&launch["pid"], &serde_json::json!(true)));
    }
    // Installed over AFC + the installation proxy once, with the .ipa's bytes; the second
    // campaign found the recorded hash and bundle version and skipped it.
    let installs = standin.journalled("com.apple.mobile.installation_proxy", "Install");
    assert_eq!(installs.len(), 1, "{installs:?}");
    assert_eq!(installs[0]["sha256"], ipa_sha.as_str(), "{installs:?}");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(lab.artifacts().join(format!("ios-installs/{UDID}.json"))).unwrap())
            .unwrap();
    assert_eq!(record["io.example.control"]["sha256"], ipa_sha.as_str());
    assert_eq!(record["io.example.control"]["bundle_version"], "42");
    // Before the trial, the battery as lockdown's battery domain and IOPMPowerSource say it.
    for s in lab.sql::<String>("SELECT state_before FROM attempts") {
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["battery_pct"]["value"], 85.0, "{s}");
        assert_eq!(v["battery_pct"]["from"], "read", "{s}");
        assert_eq!(v["charging"]["value"], true, "{s}");
        assert_eq!(v["battery_temp_c"]["value"], 30.0, "{s}");
        assert!(v["brightness_pct"]["state"] == "unknown", "no host-side API: {s}");
    }
}

#[test_needs::needs(sshd)]
#[test]
fn a_phone_on_an_ssh_lab_host_is_reached_through_a_forward_of_that_hosts_usbmuxd() {
    let sshd = common::sshd::start();
    let standin = StandIn::start(&[(UDID, "")]);
    let (lab, rb) = lab_on(&standin, UDID, &sshd.host_table(""), "shelf-1");
    let before = sshd.accepted_logins();
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    // Everything the phone was asked came through sshd (a stream-local forward to the
    // socket on the host), on the lab's one connection pool for that host.
    assert!(sshd.accepted_logins() > before, "no SSH login: {stderr}");
    assert_eq!(standin.journalled("com.apple.mobile.installation_proxy", "Install").len(), 1);
    let s: Vec<String> = lab.sql("SELECT state_before FROM attempts");
    let v: serde_json::Value = serde_json::from_str(&s[0]).unwrap();
    assert_eq!(
        (v["battery_pct"]["value"].as_f64(), v["battery_pct"]["from"].as_str()),
        (Some(85.0), Some("read")),
        "{v}"
    );
}

#[test]
fn a_configured_pair_record_is_used_when_usbmuxd_has_none_and_a_bad_one_is_refused() {
    let standin = StandIn::start(&[(UDID, "fault = \"not_paired\"")]);
    let (lab, rb) = lab_for(&standin, UDID);
    let record = standin.root().join(format!("pair/{UDID}.plist"));
    let with_record = |path: &std::path::Path| {
        let text = std::fs::read_to_string(&lab.lab).unwrap();
        let text = text.split("pair_record").next().unwrap().to_string();
        std::fs::write(&lab.lab, format!("{text}pair_record = \"{}\"\n", path.display())).unwrap();
    };
    with_record(&record);
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Past every check (usbmuxd has no record for it: the file's was used) to the install.
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(standin.journalled("com.apple.mobile.installation_proxy", "Install").len(), 1, "{stderr}");

    let garbage = lab.dir.path().join("garbage.plist");
    std::fs::write(&garbage, b"not a plist").unwrap();
    with_record(&garbage);
    let campaigns = lab.campaigns().len();
    let out = lab.cmd(&["run", rb.to_str().unwrap()]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&format!("pair record {} is unusable", garbage.display())), "{stderr}");
    assert!(stderr.contains(&format!("fix: copy `/var/lib/lockdown/{UDID}.plist`")), "{stderr}");
    assert_eq!(lab.campaigns().len(), campaigns, "nothing recorded");
}
