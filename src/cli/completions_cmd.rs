//! `lab completions SHELL`: a completion script generated from the same clap `Command` that
//! parses the arguments, so it cannot offer a command or flag the CLI does not have.

use clap::{CommandFactory, ValueEnum};
use clap_complete::Shell;

use super::args::Cli;
use super::exit::CliError;

/// The shells the README documents installing for (clap_complete knows more; these are the
/// ones whose scripts the tests check).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to print the script for.
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

pub fn run(args: &CompletionsArgs) -> Result<String, CliError> {
    let shell = match args.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut cmd = Cli::command();
    let name = cmd.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    String::from_utf8(script)
        .map_err(|e| CliError::internal(format!("the {shell} completion script clap_complete made is not UTF-8: {e}")))
}
