//! A whole campaign on an iPhone through the real binary, its `ios` backend and the real
//! idevice crate; only the phone is stood in for (standins/iphone, iOS 16): install over AFC,
//! launch over DVT with the trial's settings, the operator unplugging and plugging the cable
//! (`lab confirm` from another process), the sysdiagnose the operator triggers after
//! re-tether pulled through crash-report copy, and the untethered stretch read from its
//! powerlog. A soak whose powerlog shows charging is invalid.

use crate::common;

use common::iphone::{
    StandIn, UDID, assert_launched_with_the_trials_settings, assert_soaks_read_from_the_powerlog, campaign, left_in,
    now_s, plugged, run_campaign,
};

#[test]
fn an_iphone_campaign_reads_the_untethered_soak_from_the_phones_own_powerlog() {
    let standin = StandIn::start(&[(UDID, "")]);
    let (lab, rb) = campaign(&standin);
    // Tethered samples asked for: an untethered soak gets none (they stop at the unplug).
    let text = std::fs::read_to_string(&lab.lab).unwrap();
    assert!(text.rsplit('[').next().unwrap().starts_with("device.ios]"), "the last table: {text}");
    std::fs::write(&lab.lab, format!("{text}samples = [\"cpu\", \"energy\"]\n")).unwrap();
    let (mut unplugged_at, mut plugged_at, mut trial) = (0.0, 0.0, 0);
    let run = run_campaign(&lab, &rb, |step| match step {
        "unplug" => {
            plugged(&standin, false);
            unplugged_at = now_s();
        }
        "plug-in" => {
            // The phone logs the plug-in now, before the lab hears of it (the confirmation):
            // the soak's window ends where the soak did, so this charge is not inside it.
            plugged_at = now_s();
            plugged(&standin, true);
        }
        "sysdiagnose" => {
            // The operator's button press: the second trial's powerlog shows it charging.
            standin.sysdiagnose(UDID, unplugged_at - 1.0, plugged_at, (trial == 1).then_some(2.0));
            trial += 1;
        }
        other => panic!("unexpected step {other}"),
    });
    let (out, err) = (&run.out, &run.err);
    assert_eq!(run.steps, ["unplug", "plug-in", "sysdiagnose", "unplug", "plug-in", "sysdiagnose"], "{out}\n{err}");
    assert_eq!(run.code, Some(4), "one trial charged: {out}\n{err}");

    // Launched over DVT with the trial's settings, in order; stopped after collection.
    assert_launched_with_the_trials_settings(&standin.journalled("dvt", "launch"));
    assert_eq!(standin.journalled("dvt", "kill").len(), 2);

    assert_soaks_read_from_the_powerlog(&lab);
    let metrics: Vec<String> = lab.sql("SELECT DISTINCT metric FROM measurements");
    for m in ["cpu_pct", "energy_level", "memory_mb"] {
        assert!(!metrics.iter().any(|x| x == m), "{m} in {metrics:?}");
    }
    // The phone keeps none of the sysdiagnoses.
    let left = left_in(&standin.root().join(format!("crashes/{UDID}/DiagnosticLogs/sysdiagnose")));
    assert!(left.is_empty(), "{left:?}");
}
