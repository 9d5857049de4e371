//! Who may call what. Two secrets, both optional on a loopback address: the **management
//! token** opens everything (the management API, the Settings page, the agent API), the
//! **agent token** opens only the agent API (sessions, events, the event stream). A server on
//! any other address must have a management token: [`Tokens::check_listen`] refuses to start
//! without one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The shortest token accepted: a guessable secret on a network is no secret.
pub const MIN_TOKEN_LEN: usize = 16;

/// The longest token file read.
const MAX_TOKEN_FILE: u64 = 4096;

/// What a route requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone (health, the OpenAPI document, the page's assets and sign-in).
    Public,
    /// The agent token or the management token.
    Agent,
    /// The management token.
    Management,
}

impl Access {
    /// The name the OpenAPI document uses (`x-warden-access`).
    pub fn name(self) -> &'static str {
        match self {
            Access::Public => "public",
            Access::Agent => "agent",
            Access::Management => "management",
        }
    }
}

/// Why the tokens could not be read, or the server may not start with them.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file could not be read.
    #[error("cannot read the token file {path}: {reason}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The token is too short, empty or has spaces inside.
    #[error(
        "the {what} is not usable: {reason} (make one with `head -c 32 /dev/urandom | base64`)"
    )]
    Weak {
        /// Which token, from where.
        what: String,
        /// Why.
        reason: String,
    },
    /// An agent token without a management token would leave management open.
    #[error(
        "an agent token was given without a management token: give --token-file (or WARDEN_TOKEN) too, so the management API is not left open"
    )]
    AgentWithoutManagement,
    /// The agent token is the management token: agents could manage rules.
    #[error(
        "the agent token is the management token, so agents could switch rules off: give the agent token a value of its own (`head -c 32 /dev/urandom | base64`), or give no agent token and hand agents the management token knowingly"
    )]
    AgentIsManagement,
    /// A non-loopback address without a token.
    #[error(
        "refusing to listen on {addr} without a token: any machine that reaches it could switch rules off. Give --token-file FILE (or set WARDEN_TOKEN), or listen on a loopback address such as 127.0.0.1"
    )]
    OpenOnNetwork {
        /// The address asked for.
        addr: SocketAddr,
    },
}

/// A secret, compared in constant time and never printed.
#[derive(Clone)]
struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    /// Compares without an early exit, so the time taken does not tell how much matched.
    fn matches(&self, presented: &[u8]) -> bool {
        let mut diff = self.0.len() ^ presented.len();
        for (i, a) in self.0.iter().enumerate() {
            let b = presented.get(i).copied().unwrap_or(0);
            diff |= usize::from(a ^ b);
        }
        diff == 0
    }
}

/// The tokens a server accepts.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    management: Option<Secret>,
    agent: Option<Secret>,
}

impl Tokens {
    /// No tokens: only for a loopback address.
    pub fn none() -> Self {
        Tokens::default()
    }

    /// Tokens given as text (`agent` is optional).
    pub fn new(management: &str, agent: Option<&str>) -> Result<Self, TokenError> {
        Tokens {
            management: Some(secret(management, "management token")?),
            agent: agent.map(|a| secret(a, "agent token")).transpose()?,
        }
        .checked()
    }

    /// Refuses an agent token without a management token, or the same as it.
    fn checked(self) -> Result<Self, TokenError> {
        match (&self.management, &self.agent) {
            (None, Some(_)) => Err(TokenError::AgentWithoutManagement),
            (Some(m), Some(a)) if m.matches(&a.0) => Err(TokenError::AgentIsManagement),
            _ => Ok(self),
        }
    }

    /// Reads the tokens from files and the environment: the management token from
    /// `token_file`, else `$WARDEN_TOKEN`; the agent token from `agent_token_file`, else
    /// `$WARDEN_AGENT_TOKEN`. `env` reads a variable (so tests need not set the process's).
    pub fn load(
        token_file: Option<&Path>,
        agent_token_file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, TokenError> {
        let read = |file: Option<&Path>, var: &str, what: &str| -> Result<_, TokenError> {
            match file {
                Some(path) => Ok(Some(secret(
                    &read_token_file(path)?,
                    &format!("{what} in {}", path.display()),
                )?)),
                None => env(var)
                    .map(|t| secret(&t, &format!("{what} in ${var}")))
                    .transpose(),
            }
        };
        Tokens {
            management: read(token_file, "WARDEN_TOKEN", "management token")?,
            agent: read(agent_token_file, "WARDEN_AGENT_TOKEN", "agent token")?,
        }
        .checked()
    }

    /// Whether requests must carry a token.
    pub fn required(&self) -> bool {
        self.management.is_some()
    }

    /// Refuses an address reachable from other machines when no token guards it.
    pub fn check_listen(&self, addr: SocketAddr) -> Result<(), TokenError> {
        if !self.required() && !addr.ip().is_loopback() {
            return Err(TokenError::OpenOnNetwork { addr });
        }
        Ok(())
    }

    /// Whether `presented` (a bearer token, or none) opens `access`.
    pub fn allows(&self, access: Access, presented: Option<&[u8]>) -> bool {
        let Some(management) = &self.management else {
            return true;
        };
        if access == Access::Public {
            return true;
        }
        let Some(p) = presented else {
            return false;
        };
        management.matches(p)
            || (access == Access::Agent && self.agent.as_ref().is_some_and(|a| a.matches(p)))
    }

    /// Whether `presented` is the management token (the Settings page's sign-in).
    pub fn is_management(&self, presented: &[u8]) -> bool {
        self.management
            .as_ref()
            .is_some_and(|m| m.matches(presented))
    }
}

fn secret(text: &str, what: &str) -> Result<Secret, TokenError> {
    let t = text.trim();
    let weak = |reason: &str| TokenError::Weak {
        what: what.to_string(),
        reason: reason.to_string(),
    };
    if t.is_empty() {
        return Err(weak("it is empty"));
    }
    if t.chars().count() < MIN_TOKEN_LEN {
        return Err(weak(&format!(
            "it is shorter than {MIN_TOKEN_LEN} characters"
        )));
    }
    if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(weak("it has spaces or control characters inside"));
    }
    Ok(Secret(t.as_bytes().to_vec()))
}

fn read_token_file(path: &Path) -> Result<String, TokenError> {
    let unreadable = |reason: String| TokenError::Unreadable {
        path: path.to_path_buf(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| unreadable(e.to_string()))?;
    if !meta.is_file() {
        return Err(unreadable("not a regular file".into()));
    }
    if meta.len() > MAX_TOKEN_FILE {
        return Err(unreadable(format!(
            "larger than {MAX_TOKEN_FILE} bytes; a token file holds one token"
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                file = %path.display(),
                "the token file can be read by other users of this machine; `chmod 600` it"
            );
        }
    }
    std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = "management-token-0123456789";
    const A: &str = "agent-token-0123456789abcdef";

    #[test]
    fn no_token_opens_everything_on_loopback_only() {
        let t = Tokens::none();
        assert!(t.allows(Access::Management, None));
        assert!(t.check_listen("127.0.0.1:1".parse().unwrap()).is_ok());
        assert!(t.check_listen("[::1]:1".parse().unwrap()).is_ok());
        let err = t.check_listen("0.0.0.0:8080".parse().unwrap()).unwrap_err();
        assert!(err.to_string().contains("--token-file"), "{err}");
    }

    #[test]
    fn the_agent_token_opens_the_agent_api_only() {
        let t = Tokens::new(M, Some(A)).unwrap();
        assert!(t.allows(Access::Agent, Some(A.as_bytes())));
        assert!(!t.allows(Access::Management, Some(A.as_bytes())));
        assert!(t.allows(Access::Management, Some(M.as_bytes())));
        assert!(t.allows(Access::Agent, Some(M.as_bytes())));
        assert!(!t.allows(Access::Agent, None));
        assert!(!t.allows(Access::Agent, Some(b"management-token-012345678")));
        assert!(!t.allows(Access::Agent, Some(b"management-token-01234567890")));
        assert!(t.allows(Access::Public, None));
    }

    #[test]
    fn weak_tokens_are_refused_with_the_reason() {
        for (text, why) in [
            ("", "empty"),
            ("short", "shorter than 16"),
            ("has a space in the middle", "spaces"),
        ] {
            let err = Tokens::new(text, None).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn tokens_come_from_files_then_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, format!("{M}\n")).unwrap();
        let t = Tokens::load(Some(&file), None, |_| None).unwrap();
        assert!(t.is_management(M.as_bytes()));
        let t = Tokens::load(None, None, |v| (v == "WARDEN_TOKEN").then(|| M.to_string())).unwrap();
        assert!(t.required());
        let err = Tokens::load(None, None, |v| {
            (v == "WARDEN_AGENT_TOKEN").then(|| A.to_string())
        })
        .unwrap_err();
        assert!(matches!(err, TokenError::AgentWithoutManagement));
        let err = Tokens::load(Some(&dir.path().join("missing")), None, |_| None).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }

    #[test]
    fn one_token_for_both_roles_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, format!("{M}\n")).unwrap();
        // The same file for both, or the same text.
        let err = Tokens::load(Some(&file), Some(&file), |_| None).unwrap_err();
        assert!(matches!(err, TokenError::AgentIsManagement), "{err}");
        assert!(err.to_string().contains("a value of its own"), "{err}");
        let err = Tokens::new(M, Some(M)).unwrap_err();
        assert!(matches!(err, TokenError::AgentIsManagement), "{err}");
    }
}
