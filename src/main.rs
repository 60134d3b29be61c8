fn main() -> std::process::ExitCode {
    lab::cli::main()
}
