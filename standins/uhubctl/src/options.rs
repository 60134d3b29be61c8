//! uhubctl 2.x's command line, parsed the way its `main` does with glibc's `getopt_long`:
//! short options in clusters (`-fl3-4`), long options and their unique prefixes
//! (`--loc 3-4`, `--location=3-4`), operands anywhere refused after the options are read,
//! the same messages and exit codes. Options are acted on in order, so `-v` or a bad `-p`
//! ends the run where it stands.

/// `-a`: uhubctl's POWER_* values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Keep,
    Off,
    On,
    Cycle,
    Toggle,
    Flash,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub location: String,
    pub level: i64,
    pub vendor: String,
    pub search: String,
    pub searchhub: String,
    /// Bitmap of ports, port 1 in bit 0.
    pub ports: u32,
    pub action: Action,
    /// Seconds, for cycle and flash.
    pub delay: f64,
    pub repeat: i64,
    /// Milliseconds between repeated off requests.
    pub wait: i64,
    pub exact: bool,
    pub reset: bool,
    pub force: bool,
    pub nodesc: bool,
}

/// uhubctl's `ALL_HUB_PORTS` for `MAX_HUB_PORTS` = 14.
pub const ALL_PORTS: u32 = (1 << 14) - 1;

pub const VERSION: &str = "2.6.0";

impl Default for Options {
    fn default() -> Options {
        Options {
            location: String::new(),
            level: 0,
            vendor: String::new(),
            search: String::new(),
            searchhub: String::new(),
            ports: ALL_PORTS,
            action: Action::Keep,
            delay: 2.0,
            repeat: 1,
            wait: 20,
            exact: false,
            reset: false,
            force: false,
            nodesc: false,
        }
    }
}

/// A run that ends while its options are read: what it prints and its exit code.
#[derive(Debug, PartialEq)]
pub struct Early {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Early {
    fn fail(stderr: String) -> Early {
        Early { code: 1, stdout: String::new(), stderr }
    }
}

const HINT: &str = "Run with -h to get usage info.\n";

/// The options with an argument, as in uhubctl.c's short_options "l:L:n:a:p:d:r:w:s:H:hvefRNSy:".
const WITH_ARG: &str = "lLnapdrwsHy";
const FLAGS: &str = "hvefRNS";

const LONG: [(&str, char); 18] = [
    ("location", 'l'),
    ("vendor", 'n'),
    ("search", 's'),
    ("searchhub", 'H'),
    ("level", 'L'),
    ("ports", 'p'),
    ("action", 'a'),
    ("delay", 'd'),
    ("repeat", 'r'),
    ("wait", 'w'),
    ("exact", 'e'),
    ("force", 'f'),
    ("nodesc", 'N'),
    ("nosysfs", 'S'),
    ("sysdev", 'y'),
    ("reset", 'R'),
    ("version", 'v'),
    ("help", 'h'),
];

pub fn usage(o: &Options) -> String {
    format!(
        "uhubctl: utility to control USB port power for smart hubs.\n\
         Usage: uhubctl [options]\n\
         Without options, show status for all smart hubs.\n\
         \n\
         Options [defaults in brackets]:\n\
         --action,   -a - action to off/on/cycle/toggle/flash (0/1/2/3/4) for affected ports.\n\
         --ports,    -p - ports to operate on    [all hub ports].\n\
         --location, -l - limit hub by location  [all smart hubs].\n\
         --level     -L - limit hub by location level (e.g. a-b.c is level 3).\n\
         --vendor,   -n - limit hub by vendor id [{}] (partial ok).\n\
         --searchhub,-H - limit hub by description.\n\
         --search,   -s - limit hub by attached device description.\n\
         --delay,    -d - delay for cycle/flash action [{} sec].\n\
         --repeat,   -r - repeat power off count [{}] (some devices need it to turn off).\n\
         --exact,    -e - exact location (no USB3 duality handling).\n\
         --force,    -f - force operation even on unsupported hubs.\n\
         --nodesc,   -N - do not query device description (helpful for unresponsive devices).\n\
         --nosysfs,  -S - do not use the Linux sysfs port disable interface.\n\
         --sysdev,   -y - open system device node instead of scanning.\n\
         --reset,    -R - reset hub after each power-on action, causing all devices to reassociate.\n\
         --wait,     -w - wait before repeat power off [{} ms].\n\
         --version,  -v - print program version.\n\
         --help,     -h - print this text.\n\
         \n\
         Send bugs and requests to: https://github.com/mvp/uhubctl\n\
         version: {VERSION}\n",
        if o.vendor.is_empty() { "any" } else { &o.vendor },
        o.delay,
        o.repeat,
        o.wait,
    )
}

/// C's `atoi`: optional blanks and sign, then the leading digits; 0 when there are none.
pub fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let n = rest
        .bytes()
        .take_while(u8::is_ascii_digit)
        .fold(0i64, |n, d| n.saturating_mul(10).saturating_add(i64::from(d - b'0')));
    if neg { -n } else { n }
}

/// C's `atof` for plain decimals (`2`, `0.5`, `1e-1`): the longest prefix that parses.
fn atof(s: &str) -> f64 {
    let s = s.trim_start();
    (1..=s.len()).rev().filter(|&n| s.is_char_boundary(n)).find_map(|n| s[..n].parse::<f64>().ok()).unwrap_or(0.0)
}

/// `snprintf` into one of uhubctl's fixed buffers.
fn clip(s: &str, size: usize) -> String {
    let mut end = s.len().min(size - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// uhubctl's `ports2bitmap` (`1,3-5`), its messages and its exit.
fn ports2bitmap(list: &str) -> Result<u32, Early> {
    let mut ports = 0;
    for part in list.split(',') {
        let buf = clip(part, 8); // char buf[8], strncpy of at most 7
        let a = atoi(&buf);
        let b = buf.find('-').map(|d| atoi(&buf[d + 1..])).unwrap_or(a);
        if a > b {
            return Err(Early::fail(format!("Bad port spec {a}-{b}, first port must be less than last\n")));
        }
        if a <= 0 || a > 14 || b <= 0 || b > 14 {
            return Err(Early::fail(format!("Bad port spec {a}-{b}, port numbers must be from 1 to 14\n")));
        }
        for i in a..=b {
            ports |= 1 << (i - 1);
        }
    }
    Ok(ports)
}

/// One option and its argument, as `getopt_long` returns them.
fn apply(o: &mut Options, c: char, arg: &str) -> Result<(), Early> {
    match c {
        'l' => o.location = clip(arg, 32),
        'L' => o.level = atoi(arg),
        'n' => o.vendor = clip(arg, 16),
        's' => o.search = clip(arg, 64),
        'H' => o.searchhub = clip(arg, 64),
        'p' if arg.eq_ignore_ascii_case("all") => {}
        'p' if !arg.is_empty() => o.ports = ports2bitmap(arg)?,
        'p' => {}
        'a' => {
            let names = [
                (Action::Off, "off", "0"),
                (Action::On, "on", "1"),
                (Action::Cycle, "cycle", "2"),
                (Action::Toggle, "toggle", "3"),
                (Action::Flash, "flash", "4"),
            ];
            // An unknown action leaves the one before it, as uhubctl's ifs do.
            if let Some((a, _, _)) = names.iter().find(|(_, w, d)| arg.eq_ignore_ascii_case(w) || arg == *d) {
                o.action = *a;
            }
        }
        'd' => o.delay = atof(arg),
        'r' => o.repeat = atoi(arg),
        'w' => o.wait = atoi(arg),
        'e' => o.exact = true,
        'f' => o.force = true,
        'R' => o.reset = true,
        'N' => o.nodesc = true,
        'S' => {}
        'y' => {
            return Err(Early::fail(format!(
                "uhubctl stand-in: -y {arg}: opening a system device node is not modelled; describe the hub in UHUBCTL_STATE\n"
            )));
        }
        'v' => return Err(Early { code: 0, stdout: format!("{VERSION}\n"), stderr: String::new() }),
        'h' => return Err(Early { code: 1, stdout: usage(o), stderr: String::new() }),
        _ => unreachable!("only options of uhubctl's option string get here"),
    }
    Ok(())
}

/// `argv` without the program name; `prog` is how glibc names the program in its messages.
pub fn parse(prog: &str, args: &[String]) -> Result<Options, Early> {
    let mut o = Options::default();
    let mut operands = 0;
    let mut it = args.iter();
    let bad = |what: String| Early::fail(format!("{prog}: {what}\n{HINT}"));
    while let Some(arg) = it.next() {
        if arg == "--" {
            operands += it.len();
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let exact = LONG.iter().find(|(n, _)| *n == name);
            let prefixed: Vec<_> = LONG.iter().filter(|(n, _)| n.starts_with(name)).collect();
            let (full, c) = match (exact, prefixed.as_slice()) {
                (Some(hit), _) => *hit,
                (None, [hit]) => **hit,
                (None, []) => return Err(bad(format!("unrecognized option '{arg}'"))),
                (None, many) => {
                    let names: Vec<String> = many.iter().map(|(n, _)| format!(" '--{n}'")).collect();
                    return Err(bad(format!("option '--{name}' is ambiguous; possibilities:{}", names.concat())));
                }
            };
            if WITH_ARG.contains(c) {
                let value = match value {
                    Some(v) => v,
                    None => it.next().ok_or_else(|| bad(format!("option '--{full}' requires an argument")))?,
                };
                apply(&mut o, c, value)?;
            } else if value.is_some() {
                return Err(bad(format!("option '--{full}' doesn't allow an argument")));
            } else {
                apply(&mut o, c, "")?;
            }
            continue;
        }
        let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) else {
            operands += 1; // glibc moves operands past the options and goes on
            continue;
        };
        for (at, c) in cluster.char_indices() {
            if WITH_ARG.contains(c) {
                let rest = &cluster[at + c.len_utf8()..];
                let value = if rest.is_empty() {
                    it.next().ok_or_else(|| bad(format!("option requires an argument -- '{c}'")))?
                } else {
                    rest
                };
                apply(&mut o, c, value)?;
                break;
            }
            if !FLAGS.contains(c) {
                return Err(bad(format!("invalid option -- '{c}'")));
            }
            apply(&mut o, c, "")?;
        }
    }
    if operands > 0 {
        return Err(Early::fail(format!("Invalid command line syntax!\n{HINT}")));
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Options, Early> {
        parse("uhubctl", &args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn err(args: &[&str]) -> String {
        let e = p(args).unwrap_err();
        assert_eq!(e.code, 1, "{e:?}");
        e.stderr
    }

    #[test]
    fn short_long_clustered_and_abbreviated_forms_mean_the_same() {
        let want =
            Options { location: "3-4".into(), force: true, action: Action::Off, ports: 0b1010, ..Default::default() };
        for args in [
            &["-f", "-l", "3-4", "-p", "2,4", "-a", "0"][..],
            &["-fl3-4", "-p2,4", "-aoff"],
            &["--force", "--location=3-4", "--ports", "2,4", "--action", "OFF"],
            &["--for", "--loc", "3-4", "--po=2,4", "--act=off"],
        ] {
            assert_eq!(p(args).unwrap(), want, "{args:?}");
        }
        let o =
            p(&["-a", "cycle", "-d", "0.5", "-r", "10", "-w", "5", "-e", "-R", "-N", "-S", "-L", "3", "-n", "2109"])
                .unwrap();
        assert_eq!(
            (o.action, o.delay, o.repeat, o.wait, o.level, o.vendor.as_str()),
            (Action::Cycle, 0.5, 10, 5, 3, "2109")
        );
        assert!(o.exact && o.reset && o.nodesc);
        assert_eq!(p(&["-a", "3"]).unwrap().action, Action::Toggle);
        assert_eq!(p(&["-a", "on", "-a", "sideways"]).unwrap().action, Action::On, "unknown: the last one stays");
        assert_eq!(p(&["-p", "all"]).unwrap().ports, ALL_PORTS);
        assert_eq!(p(&["-p", "1-4"]).unwrap().ports, 0b1111);
        assert_eq!(p(&["-p", "1,3-5,11-13"]).unwrap().ports, 0b1_1100_0001_1101);
        assert_eq!(p(&["--search", "X"]).unwrap().search, "X", "an exact name beats the longer --searchhub");
    }

    #[test]
    fn errors_are_glibc_and_uhubctl_words_with_exit_1() {
        assert_eq!(err(&["-p", "5-2"]), "Bad port spec 5-2, first port must be less than last\n");
        assert_eq!(err(&["-p", "0"]), "Bad port spec 0-0, port numbers must be from 1 to 14\n");
        assert_eq!(err(&["-p", "15"]), "Bad port spec 15-15, port numbers must be from 1 to 14\n");
        assert_eq!(err(&["-p", "1,"]), "Bad port spec 0-0, port numbers must be from 1 to 14\n");
        assert_eq!(err(&["-x"]), "uhubctl: invalid option -- 'x'\nRun with -h to get usage info.\n");
        assert_eq!(err(&["-l"]), "uhubctl: option requires an argument -- 'l'\nRun with -h to get usage info.\n");
        assert_eq!(err(&["--bogus=1"]), "uhubctl: unrecognized option '--bogus=1'\nRun with -h to get usage info.\n");
        assert_eq!(
            err(&["--force=1"]),
            "uhubctl: option '--force' doesn't allow an argument\nRun with -h to get usage info.\n"
        );
        assert_eq!(
            err(&["--ports"]),
            "uhubctl: option '--ports' requires an argument\nRun with -h to get usage info.\n"
        );
        assert_eq!(
            err(&["--re"]),
            "uhubctl: option '--re' is ambiguous; possibilities: '--repeat' '--reset'\nRun with -h to get usage info.\n"
        );
        assert_eq!(err(&["status", "-l", "1-1"]), "Invalid command line syntax!\nRun with -h to get usage info.\n");
        assert_eq!(err(&["-l", "1-1", "--", "-a"]), "Invalid command line syntax!\nRun with -h to get usage info.\n");
        assert!(err(&["-y", "/dev/bus/usb/001/002"]).contains("not modelled"));
    }

    #[test]
    fn version_and_help_end_the_run_where_they_stand() {
        assert_eq!(p(&["-v", "-x"]).unwrap_err(), Early { code: 0, stdout: "2.6.0\n".into(), stderr: String::new() });
        let h = p(&["-d", "5", "-h"]).unwrap_err();
        assert_eq!(h.code, 1);
        assert!(h.stdout.starts_with("uhubctl: utility to control USB port power for smart hubs.\n"), "{}", h.stdout);
        assert!(h.stdout.contains("[5 sec]") && h.stdout.contains("[any]") && h.stdout.ends_with("version: 2.6.0\n"));
        assert!(err(&["-p", "0", "-v"]).starts_with("Bad port spec"), "options act in order");
    }

    #[test]
    fn c_number_parsing() {
        assert_eq!((atoi(" 12x"), atoi("-3"), atoi("x"), atoi("")), (12, -3, 0, 0));
        assert_eq!((atof("0.5s"), atof("2"), atof("x")), (0.5, 2.0, 0.0));
    }
}
