//! `warden serve`: the rules of this installation as an HTTP service (warden-serve), with the
//! same configuration as every other command, hot reload, and a clean stop on SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use warden_core::Config;
use warden_serve::{
    DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_PORT, ServeOptions, Server, TlsFiles,
    Tokens, runtime, shutdown_signal,
};

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
    /// Serve HTTPS with this certificate chain (PEM, the server's certificate first); with
    /// --tls-key. Both files are read again at SIGHUP, as after a renewal.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve plain HTTP on an address other machines reach: only behind a proxy that
    /// terminates TLS (without TLS, tokens and the sign-in cross the network in clear).
    #[arg(long)]
    plain_http: bool,
    /// How long, in seconds, a connection may send nothing (before its first request or
    /// between two) or take to send a request's head, before it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_HEADER_TIMEOUT.as_secs())]
    header_timeout: u64,
    /// How many connections may be open at once (more wait until one closes). Lowered to fit
    /// the open-file limit, which warden raises to its maximum first.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
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
        header_timeout: std::time::Duration::from_secs(args.header_timeout.max(1)),
        max_connections: connections_within_file_limit(args.max_connections.max(1)),
        tls: args
            .tls_cert
            .clone()
            .zip(args.tls_key.clone())
            .map(|(cert, key)| TlsFiles { cert, key }),
        plain_http: args.plain_http,
        durable: !args.ephemeral_sessions,
        claude_code: config.claude_code.clone(),
        ..ServeOptions::default()
    };
    // Checked before the rules load: a refusal should not wait for them.
    options.check_address().map_err(|e| e.to_string())?;
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
    let tls = options.tls.is_some();
    let warden = load(&config, false)?;
    let rt = runtime().map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let mut server = Server::bind(warden, options).await.map_err(|e| e.to_string())?;
        if !args.no_watch {
            server.watch_files().map_err(|e| e.to_string())?;
        }
        let addr = server.local_addr();
        let scheme = if tls { "https" } else { "http" };
        // 0.0.0.0 is every address of the machine, not one a browser can open.
        let page = if addr.ip().is_unspecified() {
            format!("{scheme}://THIS-MACHINE:{}/, by any of its addresses", addr.port())
        } else {
            format!("{scheme}://{addr}/")
        };
        println!("warden is listening on {scheme}://{addr} (the Settings page: {page}); Ctrl-C or SIGTERM stops it");
        server.run(shutdown_signal()).await.map_err(|e| e.to_string())?;
        println!("warden stopped: every request in flight was answered");
        Ok(ExitCode::SUCCESS)
    })
}

/// Files kept for the database, the rule files and the watcher, besides connections.
const FILES_BESIDES_CONNECTIONS: u64 = 256;

/// `wanted` connections, or fewer if the open-file limit (raised to its maximum first) cannot
/// hold them, saying so: a server out of files can answer nobody.
fn connections_within_file_limit(wanted: usize) -> usize {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit only read and write the struct passed.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return wanted;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            // SAFETY: as above.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
        let room = usize::try_from(limit.rlim_cur.saturating_sub(FILES_BESIDES_CONNECTIONS))
            .unwrap_or(usize::MAX)
            .max(16);
        if room < wanted {
            eprintln!(
                "warden: at most {room} connections at once, not {wanted}: the open-file limit is {} (raise it with `ulimit -n` for more)",
                limit.rlim_cur
            );
            return room;
        }
    }
    wanted
}
