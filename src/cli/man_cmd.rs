//! `lab man [COMMAND…]`: a man page (roff), generated from the clap `Command` that parses the
//! arguments, so it says what `--help` says. `lab`'s page lists its commands as `lab-run(1)`,
//! …; `lab man run` prints that page.

use clap::CommandFactory;

use super::args::Cli;
use super::exit::CliError;

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// A command's own page, e.g. `run` or `hosts forward`; default: lab's page.
    #[arg(value_name = "COMMAND")]
    pub command: Vec<String>,
}

pub fn run(args: &ManArgs) -> Result<String, CliError> {
    // As clap_mangen's own generate_to: no `help` command, which needs no page; built, so
    // each command has its display name (`lab-hosts-forward`), the page's title.
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    for (depth, word) in args.command.iter().enumerate() {
        let Some(sub) = cmd.find_subcommand(word).cloned() else {
            let at = ["lab"].into_iter().chain(args.command[..depth].iter().map(String::as_str)).collect::<Vec<_>>();
            let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
            let fix = if names.is_empty() {
                format!("it has none; its own page: `lab man {}`", at[1..].join(" "))
            } else {
                format!("pick one of: {}", names.join(", "))
            };
            return Err(CliError::bad_input(format!("`{}` has no command `{word}`: {fix}", at.join(" "))));
        };
        cmd = sub;
    }
    let mut page = Vec::new();
    // The footer's source: "lab 0.1.0" on every page (clap_mangen takes a command's own
    // name and version, and a subcommand has none).
    clap_mangen::Man::new(cmd)
        .source(format!("lab {}", env!("CARGO_PKG_VERSION")))
        .render(&mut page)
        .map_err(|e| CliError::internal(format!("cannot render the man page: {e}")))?;
    String::from_utf8(page).map_err(|e| CliError::internal(format!("the man page clap_mangen made is not UTF-8: {e}")))
}
