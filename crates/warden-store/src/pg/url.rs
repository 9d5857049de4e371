//! A PostgreSQL URL, read: the driver's own settings (host, port, user, password, database,
//! `connect_timeout`, `application_name`, `options`, `sslmode`...) and Warden's two
//! (`pool_size`, `schema`), which are taken out before the driver sees the rest.

use std::time::Duration;

use postgres::config::Host;

use crate::error::StoreError;

/// Connections a store keeps open at most, unless the URL says `pool_size=N`.
pub(crate) const DEFAULT_POOL_SIZE: u32 = 8;

/// The largest `pool_size` accepted (PostgreSQL's own default `max_connections` is 100).
const MAX_POOL_SIZE: u32 = 1000;

/// How long a connection attempt waits, unless the URL says `connect_timeout=SECONDS`.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A transaction left open this long by a process that stopped responding is ended by the
/// server, releasing its locks (a tick holds one for milliseconds, a slow script for seconds).
const IDLE_IN_TRANSACTION_MS: u64 = 60_000;

/// Whether `db` names a PostgreSQL database rather than a SQLite file.
pub(crate) fn is_postgres_url(db: &str) -> bool {
    let lower = db.get(..13).unwrap_or(db).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A PostgreSQL URL, read.
#[derive(Clone)]
pub(crate) struct PgUrl {
    /// The driver's settings (Warden's options added to `options`).
    pub config: postgres::Config,
    /// How the database is named in messages: the URL without its password.
    pub label: String,
    /// Most connections the pool opens.
    pub pool_size: u32,
    /// The schema Warden's tables live in, when the URL names one (created if missing).
    pub schema: Option<String>,
    /// The `options` the URL gave, before Warden's were added.
    user_options: String,
}

impl std::fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.write_str(&self.label)
    }
}

impl PgUrl {
    /// Reads `url`. Errors never repeat the password.
    pub(crate) fn parse(url: &str) -> Result<PgUrl, StoreError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut pool_size = DEFAULT_POOL_SIZE;
        let mut schema = None;
        let mut rest = Vec::new();
        let redacted = redact(url);
        let bad = |reason: String| StoreError::BadUrl {
            url: redacted.clone(),
            reason,
        };
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "pool_size" => {
                    pool_size = value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (1..=MAX_POOL_SIZE).contains(n))
                        .ok_or_else(|| {
                            bad(format!(
                                "pool_size must be a whole number from 1 to {MAX_POOL_SIZE}, not {value:?}"
                            ))
                        })?;
                }
                "schema" => {
                    let ok = !value.is_empty()
                        && value.len() <= 63
                        && value.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                        && value
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
                    if !ok {
                        return Err(bad(format!(
                            "schema must be a plain lower-case name (letters, digits, `_`; at most 63), not {value:?}"
                        )));
                    }
                    schema = Some(value.to_string());
                }
                _ => rest.push(pair),
            }
        }
        let driver_url = if rest.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", rest.join("&"))
        };
        let mut config: postgres::Config = driver_url.parse().map_err(|e: postgres::Error| {
            bad(format!(
                "{e} (write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE, with pool_size=N and schema=NAME as options)"
            ))
        })?;
        if config.get_hosts().is_empty() {
            config.host("localhost");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("warden");
        }
        let user_options = config.get_options().unwrap_or_default().to_string();
        let label = label(&config, schema.as_deref());
        let mut parsed = PgUrl {
            config,
            label,
            pool_size,
            schema,
            user_options,
        };
        parsed.set_lock_timeout(crate::DEFAULT_LOCK_TIMEOUT);
        Ok(parsed)
    }

    /// Sets the server-side settings of every connection: how long a statement waits for a
    /// lock, the schema, the limit on a transaction left idle.
    pub(crate) fn set_lock_timeout(&mut self, timeout: Duration) {
        let ms = timeout.as_millis().max(1);
        let mut options = format!(
            "{} -c lock_timeout={ms} -c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}",
            self.user_options
        );
        if let Some(schema) = &self.schema {
            options.push_str(&format!(" -c search_path={schema}"));
        }
        self.config.options(options.trim_start());
    }
}

/// `url` without its password (`postgres://ann:***@host/db`).
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let mut out = format!("{scheme}://");
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let hidden = if userinfo.contains(':') { ":***" } else { "" };
            out.push_str(&format!("{user}{hidden}@{host}"));
        }
        None => out.push_str(authority),
    }
    // A password given as an option is hidden too.
    let tail: Vec<String> = tail
        .split('&')
        .map(|p| {
            if p.starts_with("password=") || p.contains("?password=") {
                let (k, _) = p.split_once("password=").unwrap_or((p, ""));
                format!("{k}password=***")
            } else {
                p.to_string()
            }
        })
        .collect();
    out.push_str(&tail.join("&"));
    out
}

/// How a database is named in messages: `postgres://ann@db.internal:5432/warden`.
fn label(config: &postgres::Config, schema: Option<&str>) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                Host::Unix(path) => path.display().to_string(),
            };
            let ports = config.get_ports();
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect();
    let mut out = String::from("postgres://");
    if let Some(user) = config.get_user() {
        out.push_str(user);
        out.push('@');
    }
    out.push_str(&hosts.join(","));
    out.push('/');
    out.push_str(config.get_dbname().unwrap_or(""));
    if let Some(schema) = schema {
        out.push_str(&format!(" (schema {schema})"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_read_and_warden_options_are_taken_out() {
        let u = PgUrl::parse(
            "postgres://ann:s3cret@db.internal:6543/warden?pool_size=3&schema=team_a&connect_timeout=2",
        )
        .unwrap();
        assert_eq!(u.pool_size, 3);
        assert_eq!(u.schema.as_deref(), Some("team_a"));
        assert_eq!(
            u.label,
            "postgres://ann@db.internal:6543/warden (schema team_a)"
        );
        assert_eq!(u.config.get_dbname(), Some("warden"));
        assert_eq!(
            u.config.get_connect_timeout(),
            Some(&Duration::from_secs(2))
        );
        let options = u.config.get_options().unwrap();
        assert!(options.contains("search_path=team_a"), "{options}");
        assert!(options.contains("lock_timeout=2000"), "{options}");
        assert!(!format!("{u:?}").contains("s3cret"));
    }

    #[test]
    fn bad_urls_say_what_is_wrong_without_the_password() {
        for (url, says) in [
            ("postgres://ann:pw@h/db?pool_size=0", "pool_size"),
            ("postgres://ann:pw@h/db?pool_size=many", "pool_size"),
            ("postgres://ann:pw@h/db?schema=Robert';DROP", "schema"),
            ("postgres://ann:pw@h/db?frobnicate=1", "frobnicate"),
            ("postgres://ann:pw@h:notaport/db", "postgres://USER"),
        ] {
            let e = PgUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains(":pw@"), "{url}: {e}");
        }
    }

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_postgres_url("postgres://h/db"));
        assert!(is_postgres_url("PostgreSQL://h/db"));
        assert!(!is_postgres_url("warden.db"));
        assert!(!is_postgres_url("./postgres/warden.db"));
        assert!(!is_postgres_url(""));
    }

    #[test]
    fn redacting_hides_every_password() {
        assert_eq!(redact("postgres://ann:pw@h/db"), "postgres://ann:***@h/db");
        assert_eq!(
            redact("postgres://h/db?password=pw"),
            "postgres://h/db?password=***"
        );
        assert_eq!(redact("postgres://ann@h"), "postgres://ann@h");
    }
}
