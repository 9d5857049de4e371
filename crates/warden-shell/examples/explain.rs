//! What Warden sees in a shell command, as JSON: `cargo run -p warden-shell --example explain --
//! 'cd / && rm -rf *'`. The project is the working folder; the home folder is `$HOME`.

fn main() {
    let Some(command) = std::env::args().nth(1) else {
        eprintln!("usage: explain 'COMMAND'");
        std::process::exit(2);
    };
    let mut env = warden_shell::Env::for_project(std::env::current_dir().unwrap_or_default());
    env.home = std::env::var_os("HOME").map(Into::into);
    let analysis = warden_shell::analyze(&command, &env);
    match serde_json::to_string_pretty(&analysis) {
        Ok(json) => println!("{json}"),
        Err(e) => eprintln!("{e}"),
    }
}
