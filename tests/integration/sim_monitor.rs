//! The default lab's simulated power monitor (sim-pixel-1 on sim-monitor-1) through the
//! real binary: the quickstart shows the monitor's figures, and with the idle baseline
//! each trial's net energy is its gross less the idle power over the soak's window (after
//! the warm-up), whose interval is wider than the gross one (the idle recording's own
//! variation adds to it).

use serde_json::Value;

use crate::common::{TempLab, root};

#[test]
fn the_idle_baseline_gives_each_trial_gross_less_idle_and_a_wider_net_interval() {
    let lab = TempLab::new();
    // The quickstart with more repeats, ten trials a variant on the monitored phone, and a
    // warm-up, so the soak's window (its 10 minutes less the warm-up) differs from the soak.
    let text = std::fs::read_to_string(root().join("runbooks/quickstart.toml")).unwrap();
    assert!(text.contains("\nrepeats = 4\n") && text.contains("idle = \"30s\""), "the quickstart idles on its monitor");
    assert!(text.contains("\nduration = \"10m\"\n"), "a 10-minute soak");
    let (soak_s, warmup_s) = (600.0, 45.0);
    let text = text
        .replace("\nrepeats = 4\n", "\nrepeats = 20\n")
        .replace("idle = \"30s\"", "idle = \"30s\"\nwarmup = \"45s\"");
    let path = lab.dir.path().join("quickstart.toml");
    std::fs::write(&path, text).unwrap();
    let out = lab.cmd(&["run", path.to_str().unwrap()]).assert().success().get_output().stdout.clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("monitor_energy_j (J)") && out.contains("monitor_net_energy_j (J)"), "{out}");

    // Per trial: net = gross − idle power × the soak's window, as the run recorded it in the
    // attempt's current.json (docs/platforms/monitors.md: from the soak's start marker plus
    // the warm-up to its end marker).
    let conn = rusqlite::Connection::open(lab.store()).unwrap();
    let rows: Vec<(String, f64)> = {
        let mut st = conn
            .prepare(
                "SELECT metric || ' ' || trial_idx || ' ' || attempt, value FROM measurements \
                 WHERE metric IN ('monitor_energy_j', 'monitor_net_energy_j', 'monitor_idle_power_mw', \
                 'energy_per_request_mj', 'net_energy_per_request_mj', 'requests')",
            )
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    let window_s = |key: &str| -> f64 {
        let dir: String = conn
            .query_row("SELECT artifact_dir FROM attempts WHERE trial_idx || ' ' || attempt = ?1", [key], |r| r.get(0))
            .unwrap();
        let about: Value =
            serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(dir).join("current.json")).unwrap())
                .unwrap();
        let w = &about["window"];
        let (start, end, warmup) =
            (w["start_s"].as_f64().unwrap(), w["end_s"].as_f64().unwrap(), w["warmup_s"].as_f64().unwrap());
        // The markers span the runbook's soak, the warm-up is the runbook's.
        assert!(
            (end - start - soak_s).abs() < 1e-6,
            "{key}: the markers span {} s, the soak is {soak_s} s",
            end - start
        );
        assert_eq!(warmup, warmup_s, "{key}: the runbook's warm-up");
        end - (start + warmup)
    };
    let get = |metric: &str, key: &str| rows.iter().find(|(k, _)| *k == format!("{metric} {key}")).map(|r| r.1);
    let mut trials = 0;
    for (k, gross) in rows.iter().filter(|(k, _)| k.starts_with("monitor_energy_j ")) {
        let key = k.trim_start_matches("monitor_energy_j ");
        let (net, idle) = (get("monitor_net_energy_j", key).unwrap(), get("monitor_idle_power_mw", key).unwrap());
        let window = window_s(key);
        assert!(
            (net - (gross - idle / 1000.0 * window)).abs() < 1e-9,
            "{key}: {net} ≠ {gross} − {idle} mW × the window's {window} s"
        );
        assert!(idle > 10.0 && idle < 300.0, "the phone idles at {idle} mW");
        // Energy per request, gross and net: the app's own count (a simulated phone sends to
        // no endpoint), 600 requests in the 10-minute soak at one a second.
        let requests = get("requests", key).unwrap();
        assert_eq!(requests, 600.0);
        assert!((get("energy_per_request_mj", key).unwrap() - gross * 1000.0 / requests).abs() < 1e-9);
        assert!((get("net_energy_per_request_mj", key).unwrap() - net * 1000.0 / requests).abs() < 1e-9);
        trials += 1;
    }
    assert_eq!(trials, 20, "every trial on sim-pixel-1 (10 a variant)");

    let id = &lab.campaigns()[0];
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(lab.artifacts().join(id).join("report.json")).unwrap()).unwrap();
    let pixel = report["models"].as_array().unwrap().iter().find(|m| m["model"] == "Pixel 5").unwrap();
    let width = |variant: &str, metric: &str| {
        let row = pixel["rows"].as_array().unwrap().iter().find(|r| r["variant"] == variant && r["metric"] == metric);
        let s = &row.unwrap()["stats"];
        eprintln!("{variant} {metric}: {s}");
        s["ci_high"].as_f64().unwrap() - s["ci_low"].as_f64().unwrap()
    };
    for variant in ["idle", "busy"] {
        let (gross, net) = (width(variant, "monitor_energy_j"), width(variant, "monitor_net_energy_j"));
        assert!(net > gross, "{variant}: the net interval ({net} J) is wider than the gross one ({gross} J)");
    }
}

/// A phone that drops off USB with its hub port (a power-cut tether) and idles on its
/// monitor before each trial: after the idle baseline's re-tether it is waited for, so the
/// launch finds it, and every trial is valid.
#[test]
fn a_phone_that_leaves_usb_for_its_idle_baseline_is_waited_for_before_the_launch() {
    use crate::common::uhubctl::{Hubs, usb2_hub};
    let text = "[lab]\nname = \"hub\"\n\n[[device]]\nname = \"steady\"\nplatform = \"sim\"\nmodel = \"Pixel 5\"\n\
                tether = { uhubctl = { location = \"2-1\", port = 1 } }\nmonitor = \"mon\"\n\
                [device.sim]\nemulates = \"android\"\nseed = 1\nusb_only = true\n\n\
                [[monitor]]\nname = \"mon\"\nkind = \"sim\"\n";
    let lab = TempLab::from_text(text);
    let hubs = Hubs::new(&usb2_hub("2-1", vec![serde_json::json!({}); 4]));
    let runbook = lab.dir.path().join("rb.toml");
    std::fs::write(
        &runbook,
        "name = \"hub\"\nduration = \"30m\"\nrepeats = 2\nretries = 0\ndevices = [\"steady\"]\n\
         [builds.app]\nbaseline = true\n[builds.app.sim]\ncpu_pct = 10\nwakeups_per_s = 5\nmemory_mb = 20\n\
         [preconditions]\nuntethered = true\n[monitor]\nidle = \"1m\"\n",
    )
    .unwrap();
    let out = lab.cmd(&["run", runbook.to_str().unwrap()]).envs(hubs.env()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let reasons: Vec<String> = lab.sql("SELECT reasons FROM attempts WHERE status = 'invalid'");
    assert!(reasons.is_empty(), "{reasons:?}");
    assert_eq!(lab.sql::<i64>("SELECT COUNT(*) FROM measurements WHERE metric = 'monitor_net_energy_j'"), [2]);
    // The port went off and on twice a trial: the idle baseline's and the soak's.
    let calls: Vec<String> = hubs.calls().into_iter().map(|(args, _)| args).collect();
    let offs = calls.iter().filter(|c| c.ends_with("-a off")).count();
    let ons = calls.iter().filter(|c| c.ends_with("-a on")).count();
    assert_eq!((offs, ons), (4, 4), "{calls:?}");
    assert!(hubs.powered("2-1", 1), "its port is on at the end");
}
