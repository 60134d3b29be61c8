//! `ImportKind`: which device output `lab import` is given, and what each kind expects.

use serde::Serialize;

/// A kind of captured output; what each holds is [`ImportKind::about`] (the one text `lab
/// import --help` shows too), its name on the command line [`ImportKind::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImportKind {
    AndroidBatterystats,
    AndroidBatteryHistory,
    AndroidBattery,
    AndroidThermal,
    AndroidWifiStatus,
    AndroidDumpsysWifi,
    AndroidBluetooth,
    AndroidMeminfo,
    AndroidCpuinfo,
    ProcStat,
    Perfetto,
    IosBattery,
    IosPowerlog,
    IosSysdiagnose,
}

impl ImportKind {
    /// Every kind, in the order `lab import --help` lists them.
    pub const ALL: [ImportKind; 14] = [
        ImportKind::AndroidBatterystats,
        ImportKind::AndroidBatteryHistory,
        ImportKind::AndroidBattery,
        ImportKind::AndroidThermal,
        ImportKind::AndroidWifiStatus,
        ImportKind::AndroidDumpsysWifi,
        ImportKind::AndroidBluetooth,
        ImportKind::AndroidMeminfo,
        ImportKind::AndroidCpuinfo,
        ImportKind::ProcStat,
        ImportKind::Perfetto,
        ImportKind::IosBattery,
        ImportKind::IosPowerlog,
        ImportKind::IosSysdiagnose,
    ];

    /// One line on what the kind reads (the variant's doc, as `lab import --help` shows it).
    pub fn about(self) -> &'static str {
        match self {
            ImportKind::AndroidBatterystats => {
                "`dumpsys batterystats --checkin` (or `-c`): per-app estimates, CPU, network, discharge"
            }
            ImportKind::AndroidBatteryHistory => {
                "The human-readable `Battery History` of `dumpsys batterystats`: level drop and rate"
            }
            ImportKind::AndroidBattery => "`dumpsys battery`: one snapshot, or two (before, after)",
            ImportKind::AndroidThermal => "`dumpsys thermalservice`",
            ImportKind::AndroidWifiStatus => "`cmd wifi status`",
            ImportKind::AndroidDumpsysWifi => "`dumpsys wifi` (supplicant events)",
            ImportKind::AndroidBluetooth => "`dumpsys bluetooth_manager`",
            ImportKind::AndroidMeminfo => "`dumpsys meminfo <package>`",
            ImportKind::AndroidCpuinfo => "`dumpsys cpuinfo` (use --package for one app)",
            ImportKind::ProcStat => "`/proc/<pid>/stat`: one read, or two (before, after)",
            ImportKind::Perfetto => "A Perfetto `android.power` trace (`.pftrace`): energy per rail, battery counters",
            ImportKind::IosBattery => {
                "iOS battery registry (IOPMPowerSource / AppleSmartBattery), XML or binary plist: one snapshot, or two (before, after)"
            }
            ImportKind::IosPowerlog => {
                "An iPhone's powerlog database (`CurrentPowerlog.PLSQL`, a sysdiagnose's `logs/powerlogs/powerlog_*.PLSQL`): its last unplugged stretch as the soak"
            }
            ImportKind::IosSysdiagnose => {
                "A sysdiagnose archive (`.tar.gz`): its newest `logs/powerlogs/*.PLSQL`, read as `ios-powerlog` is"
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ImportKind::AndroidBatterystats => "android-batterystats",
            ImportKind::AndroidBatteryHistory => "android-battery-history",
            ImportKind::AndroidBattery => "android-battery",
            ImportKind::AndroidThermal => "android-thermal",
            ImportKind::AndroidWifiStatus => "android-wifi-status",
            ImportKind::AndroidDumpsysWifi => "android-dumpsys-wifi",
            ImportKind::AndroidBluetooth => "android-bluetooth",
            ImportKind::AndroidMeminfo => "android-meminfo",
            ImportKind::AndroidCpuinfo => "android-cpuinfo",
            ImportKind::ProcStat => "proc-stat",
            ImportKind::Perfetto => "perfetto",
            ImportKind::IosBattery => "ios-battery",
            ImportKind::IosPowerlog => "ios-powerlog",
            ImportKind::IosSysdiagnose => "ios-sysdiagnose",
        }
    }

    /// What the kind's files hold, for error messages.
    pub fn expects(self) -> &'static str {
        match self {
            ImportKind::AndroidBatterystats => "`dumpsys batterystats --checkin` output",
            ImportKind::AndroidBatteryHistory => "`dumpsys batterystats` output with its Battery History",
            ImportKind::AndroidBattery => "`dumpsys battery` output",
            ImportKind::AndroidThermal => "`dumpsys thermalservice` output",
            ImportKind::AndroidWifiStatus => "`cmd wifi status` output",
            ImportKind::AndroidDumpsysWifi => "`dumpsys wifi` output",
            ImportKind::AndroidBluetooth => "`dumpsys bluetooth_manager` output",
            ImportKind::AndroidMeminfo => "`dumpsys meminfo <package>` output",
            ImportKind::AndroidCpuinfo => "`dumpsys cpuinfo` output",
            ImportKind::ProcStat => "a /proc/<pid>/stat line",
            ImportKind::Perfetto => "a binary Perfetto trace (`perfetto -o FILE`, not the text format)",
            ImportKind::IosBattery => "an IOPMPowerSource/AppleSmartBattery registry plist",
            ImportKind::IosPowerlog => "an iOS powerlog database (.PLSQL)",
            ImportKind::IosSysdiagnose => "a sysdiagnose archive (.tar.gz) with logs/powerlogs/*.PLSQL",
        }
    }

    /// Whether a second file (the "after" snapshot) is accepted.
    pub fn takes_pair(self) -> bool {
        matches!(self, ImportKind::AndroidBattery | ImportKind::IosBattery | ImportKind::ProcStat)
    }
}
