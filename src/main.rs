fn main() -> std::process::ExitCode {
    warden_cli::main()
}
