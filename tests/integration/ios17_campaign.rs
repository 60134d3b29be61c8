//! A whole campaign on an iOS 17 iPhone through the real binary, its `ios` backend and the
//! real idevice crate; only the phone is stood in for (standins/iphone's iOS 17 path): the
//! preflight opens the CoreDevice tunnel, the app is installed over AFC, launched over the
//! app service (RSD inside the tunnel) with the trial's settings, the operator unplugs and
//! plugs the cable (`lab confirm` from another process) and — unlike iOS 16 — is asked for
//! no sysdiagnose: the lab captures it from the diagnostics service and reads the
//! untethered stretch from its powerlog, then stops the app with SIGTERM.

use crate::common;

use common::iphone::{
    StandIn, UDID, assert_launched_with_the_trials_settings, assert_soaks_read_from_the_powerlog, campaign, left_in,
    now_s, phone17_toml, plugged, run_campaign,
};

#[test]
fn an_ios_17_campaign_launches_over_the_app_service_and_captures_its_own_sysdiagnose() {
    let standin = StandIn::start_files(&[(UDID, phone17_toml(""))]);
    let (lab, rb) = campaign(&standin);
    let (mut unplugged_at, mut trial) = (0.0, 0);
    let run = run_campaign(&lab, &rb, |step| match step {
        "unplug" => {
            plugged(&standin, false);
            unplugged_at = now_s();
        }
        "plug-in" => {
            // What the phone will have written when asked: its plug-in logged now, before
            // the lab hears of it (the soak's window ends where the soak did); the second
            // trial's powerlog shows it charging inside the soak.
            standin.sysdiagnose(UDID, unplugged_at - 1.0, now_s(), (trial == 1).then_some(2.0));
            trial += 1;
            plugged(&standin, true);
        }
        other => panic!("unexpected step {other}"),
    });
    let (out, err) = (&run.out, &run.err);
    assert_eq!(run.steps, ["unplug", "plug-in", "unplug", "plug-in"], "no sysdiagnose step on 17: {out}\n{err}");
    assert_eq!(run.code, Some(4), "one trial charged: {out}\n{err}");

    // The preflight and every call after it went through the tunnel.
    let tunnels = standin.journalled("coredeviceproxy", "handshake");
    assert!(tunnels.len() >= 5, "preflight, two launches, two captures, two stops: {tunnels:?}");
    assert!(standin.journalled("tunnel", "drop").is_empty());
    assert!(standin.journalled("dvt", "launch").is_empty(), "no DVT on 17");

    // Installed over AFC + the installation proxy, launched over the app service with the
    // trial's settings in order, stopped with SIGTERM after collection.
    assert_eq!(standin.journalled("com.apple.mobile.installation_proxy", "Install").len(), 2);
    let launches = standin.journalled("appservice", "launch");
    assert_launched_with_the_trials_settings(&launches);
    for l in &launches {
        assert_eq!(l["options"]["terminateExisting"], true, "{l}");
        let order: Vec<&str> = l["env_order"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        assert!(order.starts_with(&["LAB_TRIAL"]), "the backend's names first, then the config's: {order:?}");
        assert_eq!(order.last(), Some(&"ENVOY_DNS_REFRESH_S"), "{order:?}");
    }
    let signals = standin.journalled("appservice", "signal");
    let stopped: Vec<(u64, i64, bool)> = signals
        .iter()
        .map(|s| (s["pid"].as_u64().unwrap(), s["signal"].as_i64().unwrap(), s["ended"].as_bool().unwrap()))
        .collect();
    let pids: Vec<u64> = launches.iter().map(|l| l["pid"].as_u64().unwrap()).collect();
    assert_eq!(stopped, pids.iter().map(|p| (*p, 15, true)).collect::<Vec<_>>());

    // Captured by the lab, streamed whole, removed from the phone.
    let captures = standin.journalled("diagnosticsservice", "capture");
    assert_eq!(captures.len(), 2, "{captures:?}");
    assert!(captures.iter().all(|c| c["streamed"] == true && c["isDryRun"] == false), "{captures:?}");
    assert!(left_in(&standin.root().join(format!("sysdiagnose/{UDID}"))).is_empty());
    assert!(
        standin.journalled("com.apple.crashreportcopymobile", "FileRefOpen").is_empty(),
        "not pulled from crash reports"
    );

    assert_soaks_read_from_the_powerlog(&lab);
}
