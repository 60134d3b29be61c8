//! `lab completions` and `lab man` through the real binary: each script and the man page are
//! produced, snapshotted, accepted by the shells and renderers that are installed, and name
//! every command the CLI has.

use assert_cmd::Command;
use clap::CommandFactory;

fn lab(args: &[&str]) -> Command {
    let mut c = Command::cargo_bin("lab").unwrap();
    c.args(args).env_remove("LAB_CONFIG");
    c
}

fn stdout_of(args: &[&str]) -> String {
    String::from_utf8(lab(args).assert().success().get_output().stdout.clone()).unwrap()
}

/// Every command and subcommand path the CLI parses (`hosts check`, `schedule run-due`, …),
/// from the same definitions the binary uses, so a new command is checked without editing
/// this test.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, prefix: &[String], out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            let mut path = prefix.to_vec();
            path.push(sub.get_name().to_string());
            out.push(path.clone());
            walk(sub, &path, out);
        }
    }
    let mut out = Vec::new();
    walk(&lab::cli::args::Cli::command(), &[], &mut out);
    out
}

/// Whether `tool` is on PATH (the shells other than bash, groff, man are optional here).
fn installed(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// Runs `tool ARGS FILE` on `text` written to a file; panics with its stderr when it fails.
fn run_on_file(tool: &str, args: &[&str], text: &str, name: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(name);
    std::fs::write(&file, text).unwrap();
    let out = std::process::Command::new(tool).args(args).arg(&file).output().unwrap();
    assert!(out.status.success(), "{tool} {args:?} rejects {name}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn the_paths_cover_the_commands_this_test_relies_on() {
    let paths = command_paths();
    for p in [&["status"][..], &["completions"], &["man"], &["hosts", "forward"], &["schedule", "run-due"]] {
        assert!(paths.iter().any(|q| q == p), "{p:?} not among {paths:?}");
    }
}

#[test]
fn bash_script_parses_names_every_command_and_completes() {
    let script = stdout_of(&["completions", "bash"]);
    run_on_file("bash", &["-n"], &script, "lab.bash");
    // clap's bash script finds the command path word by word: `case "${cmd},${i}"` with an
    // arm `lab__subcmd__hosts,forward)` that sets `cmd="lab__subcmd__hosts__subcmd__forward"`
    // (a `-` in a name is spelt `__subcmd__` too).
    for path in command_paths() {
        let (leaf, parents) = path.split_last().unwrap();
        let name = |p: &[String]| {
            p.iter().fold("lab".to_string(), |acc, w| format!("{acc}__subcmd__{}", w.replace('-', "__subcmd__")))
        };
        let arm = format!("{},{leaf})", name(parents));
        assert!(script.contains(&arm), "bash script lacks the arm {arm} for {path:?}");
        assert!(script.contains(&format!("cmd=\"{}\"", name(&path))), "bash script never completes {path:?}");
    }
    // The script completes for real: load it and ask as bash-completion does ($1 the command,
    // $2 the word being completed, $3 the word before it).
    let ask = |words: &str, cur: &str, prev: &str| {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lab.bash");
        std::fs::write(&file, &script).unwrap();
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _lab lab '{cur}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display()
        );
        let out = std::process::Command::new("bash").arg("-c").arg(probe).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let commands = ask("lab sta", "sta", "lab");
    assert_eq!(commands.lines().collect::<Vec<_>>(), ["status"], "`lab sta<TAB>`");
    let flags = ask("lab status --w", "--w", "status");
    assert_eq!(flags.lines().collect::<Vec<_>>(), ["--watch"], "`lab status --w<TAB>`");
    let shells = ask("lab completions ''", "", "completions");
    for shell in ["bash", "zsh", "fish"] {
        assert!(shells.split_whitespace().any(|w| w == shell), "`lab completions <TAB>` lacks {shell}: {shells}");
    }
    insta::assert_snapshot!("completions_bash", script);
}

/// The script for `shell`, checked as zsh's and fish's are: it names every command (that
/// the shell accepts its syntax is a test of its own, where the shell is installed).
fn script_checked_by(shell: &str) -> String {
    let script = stdout_of(&["completions", shell]);
    for path in command_paths() {
        assert!(script.contains(path.last().unwrap().as_str()), "{shell} script never names {path:?}");
    }
    script
}

#[test_needs::needs(zsh)]
#[test]
fn zsh_accepts_its_script() {
    run_on_file("zsh", &["-n"], &stdout_of(&["completions", "zsh"]), "_lab");
}

#[test_needs::needs(fish)]
#[test]
fn fish_accepts_its_script() {
    run_on_file("fish", &["--no-execute"], &stdout_of(&["completions", "fish"]), "lab.fish");
}

#[test]
fn zsh_script_is_whole() {
    let script = script_checked_by("zsh");
    assert!(script.starts_with("#compdef lab"), "{}", &script[..script.len().min(200)]);
    assert!(script.contains("'--watch[Keep going"), "zsh script lacks `lab status --watch`");
    insta::assert_snapshot!("completions_zsh", script);
}

#[test]
fn fish_script_is_whole() {
    let script = script_checked_by("fish");
    assert!(script.contains("__fish_lab_using_subcommand status\" -l watch"), "fish script lacks `lab status --watch`");
    insta::assert_snapshot!("completions_fish", script);
}

#[test]
fn an_unknown_shell_is_bad_input_naming_the_choices() {
    let out = lab(&["completions", "tcsh"]).assert().code(2).get_output().clone();
    assert!(out.stdout.is_empty(), "nothing on stdout");
    let err = String::from_utf8(out.stderr).unwrap();
    let first = err.lines().next().unwrap_or_default();
    assert!(first.starts_with("error:") && first.contains("'tcsh'"), "{err}");
    assert!(err.contains("[possible values: bash, zsh, fish]"), "{err}");
}

/// Renders a page as `man` would (groff with every warning on, `-k`: through preconv, the
/// page is UTF-8) and returns its bare text.
fn rendered(page: &str) -> String {
    assert!(installed("groff"), "groff is not on PATH (apt-get install groff-base)");
    let out = run_on_file("groff", &["-k", "-man", "-Tutf8", "-ww"], page, "lab.1");
    assert!(out.stderr.is_empty(), "groff warns: {}", String::from_utf8_lossy(&out.stderr));
    strip_formatting(&String::from_utf8_lossy(&out.stdout))
}

#[test]
fn man_page_is_roff_that_renders() {
    let page = stdout_of(&["man"]);
    assert!(page.starts_with(".ie \\n(.g .ds Aq"), "roff from clap_mangen: {}", &page[..page.len().min(200)]);
    assert!(page.contains(".TH lab 1"), "a section-1 page named lab");
    for path in command_paths().iter().filter(|p| p.len() == 1) {
        assert!(page.contains(&format!("\nlab\\-{}(1)\n", path[0])), "man page lacks {path:?}");
    }
    assert!(!page.contains("lab\\-help(1)"), "no page for `help`, so none named");
    let version = env!("CARGO_PKG_VERSION");
    insta::assert_snapshot!("man_page", page.replace(version, "<version>"));
}

#[test_needs::needs(groff)]
#[test]
fn man_page_renders_with_its_sections() {
    let text = rendered(&stdout_of(&["man"]));
    for section in ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SUBCOMMANDS", "VERSION"] {
        assert!(text.contains(section), "rendered page lacks {section}:\n{text}");
    }
    assert!(text.contains("Reproducible device-lab orchestrator"), "{text}");
}

#[test]
fn every_page_the_man_page_names_can_be_printed() {
    let version = format!("\"lab {}\"", env!("CARGO_PKG_VERSION"));
    for path in command_paths() {
        let words: Vec<&str> = path.iter().map(String::as_str).collect();
        let page = stdout_of(&[&["man"][..], &words].concat());
        let title = format!(".TH lab-{} 1  {version}", words.join("-"));
        assert!(page.lines().any(|l| l.trim_end() == title), "`lab man {}` lacks `{title}`", words.join(" "));
    }
    let forward = stdout_of(&["man", "hosts", "forward"]);
    assert!(forward.contains("\\fB\\-\\-local\\-port\\fR"), "its own options: {forward}");
}

#[test_needs::needs(groff)]
#[test]
fn a_commands_page_renders_its_own_synopsis() {
    let text = rendered(&stdout_of(&["man", "hosts", "forward"]));
    // groff justifies lines with extra spaces.
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("SYNOPSIS lab hosts forward [--lab] [--local-port]"), "{text}");
}

#[test]
fn man_for_an_unknown_command_is_bad_input_naming_the_commands() {
    let out = lab(&["man", "hosts", "nope"]).assert().code(2).get_output().clone();
    assert!(out.stdout.is_empty(), "nothing on stdout");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err, "error: `lab hosts` has no command `nope`: pick one of: check, forward\n");
    let leaf = lab(&["man", "plan", "x"]).assert().code(2).get_output().stderr.clone();
    assert_eq!(
        String::from_utf8(leaf).unwrap(),
        "error: `lab plan` has no command `x`: it has none; its own page: `lab man plan`\n"
    );
}

/// groff -Tutf8 bolds with SGR escapes or backspace overstrikes; compare the bare text.
fn strip_formatting(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{8}' => {
                out.pop();
            }
            '\x1b' => {
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            c => out.push(c),
        }
    }
    out
}
