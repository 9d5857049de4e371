//! TLS: the certificate chain and key, read from PEM files at start and again when the
//! operator asks (SIGHUP, as after a renewal), with rustls (ring as its provider). A reload that
//! fails keeps the certificate in use and says why; connections already open keep theirs.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// The files a TLS server reads: the certificate chain (the server's certificate first) and
/// its private key, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain.
    pub cert: PathBuf,
    /// The private key (PKCS #8, PKCS #1 or SEC1).
    pub key: PathBuf,
}

/// The acceptor in use, replaced whole at a reload.
#[derive(Clone)]
pub(crate) struct Tls {
    files: TlsFiles,
    current: Arc<RwLock<TlsAcceptor>>,
}

impl Tls {
    /// Reads the files; an error names the file and what is wrong with it.
    pub(crate) fn load(files: &TlsFiles) -> Result<Tls, String> {
        let acceptor = TlsAcceptor::from(server_config(files)?);
        Ok(Tls {
            files: files.clone(),
            current: Arc::new(RwLock::new(acceptor)),
        })
    }

    /// The acceptor for a new connection.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Reads the files again; on an error the certificate in use stays.
    pub(crate) fn reload(&self) -> Result<(), String> {
        let acceptor = TlsAcceptor::from(server_config(&self.files)?);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = acceptor;
        Ok(())
    }
}

fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, String> {
    let cert = files.cert.display();
    let key_file = files.key.display();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert)
        .map_err(|e| format!("cannot read the TLS certificate {cert}: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot read the TLS certificate {cert}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "{cert} holds no certificate: give a PEM file with `-----BEGIN CERTIFICATE-----` blocks, the server's certificate first"
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        format!("cannot read the TLS key {key_file}: {e} (a PEM private key is expected: `-----BEGIN PRIVATE KEY-----`, RSA or EC)")
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("the TLS key {key_file} does not fit the certificate {cert}: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
