//! `warden serve`: the rules of this installation as an HTTP service (warden-serve), with the
//! same configuration as every other command, hot reload, and a clean stop on SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use warden_core::Config;
use warden_serve::{DEFAULT_PORT, ServeOptions, Server, Tokens, runtime, shutdown_signal};

use crate::load;

/// The flags of `warden serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// The address to listen on. Any address but a loopback one needs a token.
    #[arg(long, value_name = "ADDR:PORT", default_value_t = SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)))]
    listen: SocketAddr,
    /// A file holding the management token (else $WARDEN_TOKEN): requests then need
    /// `Authorization: Bearer TOKEN`, and the Settings page asks for it.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// A file holding a token for the agent API only (else $WARDEN_AGENT_TOKEN).
    #[arg(long, value_name = "FILE")]
    agent_token_file: Option<PathBuf>,
    /// How many sessions the server keeps in memory (the others are in the store, and read
    /// back at their next event).
    #[arg(long, default_value_t = 100_000)]
    max_sessions: usize,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    body_limit: usize,
    /// Do not reload the rules when their files change.
    #[arg(long)]
    no_watch: bool,
    /// Keep sessions in this process's memory only, instead of saving them in the database
    /// after every event: faster, but a restart loses them.
    #[arg(long)]
    ephemeral_sessions: bool,
    /// Declare a tool of the agents a shell, so that `tool.shell` reads its command (its
    /// input's `command` field, or FIELD); repeat for more. Added to `[shell]` of warden.toml
    /// and to Warden's own (`Bash`, `shell`, `run_shell_command`...).
    #[arg(long = "shell-tool", value_name = "NAME[=FIELD]")]
    shell_tools: Vec<String>,
}

pub(crate) fn run(config: &Config, args: ServeArgs) -> Result<ExitCode, String> {
    let tokens = Tokens::load(
        args.token_file.as_deref(),
        args.agent_token_file.as_deref(),
        |var| std::env::var(var).ok(),
    )
    .map_err(|e| e.to_string())?;
    let options = ServeOptions {
        listen: args.listen,
        tokens,
        user: config.user.clone(),
        project: config.project.clone(),
        max_sessions: args.max_sessions.max(1),
        body_limit: args.body_limit.max(1024),
        durable: !args.ephemeral_sessions,
        claude_code: config.claude_code.clone(),
        ..ServeOptions::default()
    };
    // Checked before the rules load: a refusal should not wait for them.
    options
        .tokens
        .check_listen(options.listen)
        .map_err(|e| e.to_string())?;
    let mut config = config.clone();
    for spec in &args.shell_tools {
        let (name, field) = spec.split_once('=').unwrap_or((spec.as_str(), "command"));
        if name.trim().is_empty() || field.trim().is_empty() {
            return Err(format!(
                "--shell-tool {spec:?}: give the tool's name, and the input field that holds its command after `=` when it is not `command` (--shell-tool run_in_container=cmdline)"
            ));
        }
        config.shell.declare(name, field);
    }
    let warden = load(&config, false)?;
    let rt = runtime().map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let mut server = Server::bind(warden, options).await.map_err(|e| e.to_string())?;
        if !args.no_watch {
            server.watch_files().map_err(|e| e.to_string())?;
        }
        let addr = server.local_addr();
        println!("warden is listening on http://{addr} (the Settings page: http://{addr}/); Ctrl-C or SIGTERM stops it");
        server.run(shutdown_signal()).await.map_err(|e| e.to_string())?;
        println!("warden stopped: every request in flight was answered");
        Ok(ExitCode::SUCCESS)
    })
}
