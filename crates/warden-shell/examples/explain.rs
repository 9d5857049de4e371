//! What Warden sees in a shell command, as JSON: `cargo run -p warden-shell --example explain --
//! 'cd / && rm -rf *'`. The project is the working folder (or `WARDEN_PROJECT`); the home folder
//! is `$HOME`.

fn main() {
    let Some(command) = std::env::args().nth(1) else {
        eprintln!("usage: explain 'COMMAND'");
        std::process::exit(2);
    };
    let project = std::env::var_os("WARDEN_PROJECT")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_default();
    let mut env = warden_shell::Env::for_project(project);
    env.home = std::env::var_os("HOME").map(Into::into);
    let analysis = warden_shell::analyze(&command, &env);
    match serde_json::to_string_pretty(&analysis) {
        Ok(json) => println!("{json}"),
        Err(e) => eprintln!("{e}"),
    }
}
