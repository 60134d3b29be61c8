//! One `[[device]]` of a lab file: identity, platform, tether, and its platform's section
//! (validate_platform.rs).

use crate::config::lab::read_lab::LOCAL_HOST;
use crate::config::lab::read_platform::{REMOVED_KEYS, SECTION_KEYS, read_kind};
use crate::config::syntax::names::{NameSet, check_name};
use crate::config::syntax::problems::Problems;
use crate::config::syntax::table::{Field, Table};
use crate::config::{DeviceKind, DeviceSpec, Host, Platform, TetherSpec};

const DEVICE_KEYS: &[&str] = &["name", "host", "platform", "model", "os", "tags", "tether", "monitor"];
const PLATFORMS: &[&str] = &["sim", "host", "android", "ios"];
const TETHER_KINDS: &[&str] = &["none", "manual", "software", "monitor"];

pub(crate) fn platform_from(s: &str) -> Option<Platform> {
    match s {
        "sim" => Some(Platform::Sim),
        "host" => Some(Platform::Host),
        "android" => Some(Platform::Android),
        "ios" => Some(Platform::Ios),
        _ => None,
    }
}

/// Reads one device; `None` when something essential (name, platform, ...) is wrong,
/// after reporting every problem found in it.
pub(crate) fn read_device(
    t: &Table,
    p: &mut Problems,
    hosts: &[Host],
    names: &mut NameSet,
    base: &std::path::Path,
) -> Option<DeviceSpec> {
    t.check_keys_except(p, &[DEVICE_KEYS, SECTION_KEYS].concat(), REMOVED_KEYS);

    let name = read_name(t, p, names, "device", "phone-1");
    let host = read_host_name(t, p, hosts);

    let platform =
        t.required(p, "platform", "platform = \"sim\"").and_then(|f| f.one_of(p, PLATFORMS)).and_then(platform_from);
    let model = t.required(p, "model", "model = \"Pixel 5\"").and_then(|f| f.text(p));
    let os = t.get("os").map_or(Some(String::new()), |f| f.str(p).map(str::to_string));
    let tags = t.get("tags").map_or(Some(Vec::new()), |f| read_tags(&f, p));
    let tether = t.get("tether").map_or(Some(None), |f| read_tether(&f, p, platform).map(Some));
    let kind = read_kind(t, p, platform, base);

    let kind = kind?;
    let tether = tether?.unwrap_or_else(|| default_tether(kind.platform()));
    check_standin_hub(t, p, &kind, &tether)?;
    Some(DeviceSpec { name: name?, host: host?, model: model?, os: os?, tags: tags?, tether, kind })
}

/// `[device.sim] standin_hub` reads the port of a uhubctl tether: without one it has none.
fn check_standin_hub(t: &Table, p: &mut Problems, kind: &DeviceKind, tether: &TetherSpec) -> Option<()> {
    let on = matches!(kind, DeviceKind::Sim(s) if s.standin_hub);
    if !on || matches!(tether, TetherSpec::Uhubctl { .. } | TetherSpec::UhubctlAuto) {
        return Some(());
    }
    if let Some(f) = t.get("sim").and_then(|s| s.table(p)).and_then(|s| s.get("standin_hub")) {
        f.problem(
            p,
            format!(
                "a simulated phone asks the stand-in hub at its tether's port, but its tether is `{}`",
                tether.label()
            ),
            "give it tether = { uhubctl = { location = \"1-1\", port = 2 } } (or \"auto\"), or remove standin_hub",
        );
    }
    None
}

/// Without a `tether` key: simulators cut their own power, a host is never tethered,
/// and a phone's cable is pulled by an operator.
fn default_tether(platform: Platform) -> TetherSpec {
    match platform {
        Platform::Sim => TetherSpec::Software,
        Platform::Host => TetherSpec::None,
        Platform::Android | Platform::Ios => TetherSpec::Manual,
    }
}

fn read_tags(f: &Field, p: &mut Problems) -> Option<Vec<String>> {
    let list = f.strings(p)?;
    let mut tags = Vec::new();
    let mut ok = true;
    for (i, (tag, span)) in list.into_iter().enumerate() {
        if tag.trim().is_empty() || tag.trim() != tag {
            p.push(
                span,
                &format!("{}[{i}]", f.path),
                format!("invalid tag \"{tag}\""),
                "tags must be non-empty and have no surrounding spaces",
            );
            ok = false;
        } else if !tags.contains(&tag) {
            tags.push(tag);
        }
    }
    ok.then_some(tags)
}

/// `"none" | "manual" | "software" | "monitor"`, `{ uhubctl = { location = "1-1", port = 2 } }` or
/// `{ uhubctl = "auto" }`.
fn read_tether(f: &Field, p: &mut Problems, platform: Option<Platform>) -> Option<TetherSpec> {
    let spec = if f.item.is_str() {
        match f.one_of(p, TETHER_KINDS)? {
            "none" => TetherSpec::None,
            "manual" => TetherSpec::Manual,
            "monitor" => TetherSpec::Monitor,
            _ => TetherSpec::Software,
        }
    } else if f.item.is_table_like() {
        let t = f.table(p)?;
        t.check_keys(p, &["uhubctl"]);
        let hub_field = t.required(p, "uhubctl", "uhubctl = { location = \"1-1\", port = 2 }")?;
        if hub_field.item.is_str() {
            hub_field.one_of(p, &["auto"])?;
            return Some(TetherSpec::UhubctlAuto);
        }
        let hub = hub_field.table(p)?;
        hub.check_keys(p, &["location", "port", "repeat"]);
        let location = hub.required(p, "location", "location = \"1-1\"").and_then(|lf| {
            let l = lf.text(p)?;
            // uhubctl hub locations: bus, then dash- and dot-separated port numbers ("1-1.4").
            let valid = l.chars().all(|c| c.is_ascii_digit() || c == '-' || c == '.')
                && l.starts_with(|c: char| c.is_ascii_digit())
                && l.ends_with(|c: char| c.is_ascii_digit());
            if !valid {
                lf.problem(
                    p,
                    format!("\"{l}\" is not a uhubctl hub location"),
                    "write the location uhubctl prints, e.g. \"1-1\" or \"2-1.4\"",
                );
                return None;
            }
            Some(l)
        });
        let port = hub.required(p, "port", "port = 2").and_then(|pf| pf.integer_in(p, 1, 255));
        // uhubctl's README suggests 10 to 1000 repeats for hubs whose ports come back on.
        let repeat = hub.get("repeat").and_then(|rf| rf.integer_in(p, 1, 1000)).map(|r| r as u32);
        TetherSpec::Uhubctl { location: location?, port: port? as u32, repeat }
    } else {
        f.wrong_type(
            p,
            "\"none\", \"manual\", \"software\" or a uhubctl table",
            "write `tether = \"manual\"` or `tether = { uhubctl = { location = \"1-1\", port = 2 } }`",
        );
        return None;
    };
    if spec == TetherSpec::Software
        && let Some(pl @ (Platform::Ios | Platform::Host)) = platform
    {
        f.problem(
            p,
            format!("{} {pl} device cannot untether itself in software", if pl == Platform::Ios { "an" } else { "a" }),
            "use tether = \"manual\" (an operator pulls the cable), a uhubctl hub port, or \"none\"",
        );
        return None;
    }
    Some(spec)
}

/// `name` of a `what` table: required, valid, and not a second one's.
pub(crate) fn read_name(t: &Table, p: &mut Problems, names: &mut NameSet, what: &str, example: &str) -> Option<String> {
    t.required(p, "name", &format!("name = \"{example}\"")).and_then(|f| {
        let n = f.text(p)?;
        if !check_name(p, f.span(), &f.path, what, &n) {
            return None;
        }
        names.add(p, &n, f.span(), &f.path);
        Some(n)
    })
}

/// `host` of a table: a host of this lab, `local` when not given.
pub(crate) fn read_host_name(t: &Table, p: &mut Problems, hosts: &[Host]) -> Option<String> {
    match t.get("host") {
        None => Some(LOCAL_HOST.to_string()),
        Some(f) => f.text(p).and_then(|h| {
            if hosts.iter().any(|x| x.name == h) {
                return Some(h);
            }
            let known: Vec<&str> = hosts.iter().map(|x| x.name.as_str()).collect();
            f.problem(
                p,
                format!("host `{h}` is not defined in this lab"),
                format!("add a [[host]] with name = \"{h}\", or use one of: {}", known.join(", ")),
            );
            None
        }),
    }
}
