//! The server over TLS (rustls), against a real TLS client: answers carry
//! `Strict-Transport-Security`, the sign-in cookie is `Secure`, a client that never finishes
//! its handshake is cut off, plain HTTP to the TLS port gets no answer, files that cannot be
//! used are errors that name them, and an address other machines reach needs TLS (or
//! `plain_http`, behind a proxy). Certificates are made by `openssl`: those tests are ignored in
//! a plain run (a skip would look like a pass) and run by `.ci/run`, which installs it.

mod support;

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use support::{Running, warden};
use tokio::net::TcpStream;
use warden_serve::{ServeOptions, TlsFiles, Tokens};

const TOKEN: &str = "tls-token-0123456789abcdefghijkl";

async fn start(dir: &Path) -> Option<Running> {
    let (cert, key) = support::certificate(dir, &["127.0.0.1", "localhost"], "first")?;
    let options = ServeOptions {
        tokens: Tokens::new(TOKEN, None).unwrap(),
        tls: Some(TlsFiles { cert, key }),
        header_timeout: Duration::from_millis(500),
        ..ServeOptions::default()
    };
    Some(Running::start(warden(dir, None), options).await)
}

/// One request over TLS, trusting the certificate in `cert`: the status, the headers, the body.
async fn https(
    server: &Running,
    cert: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, hyper::HeaderMap, String) {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(cert).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.expect("a TLS handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("127.0.0.1:{}", server.addr.port()));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let answer = sender
        .send_request(req.body(Full::new(Bytes::from(body.to_string()))).unwrap())
        .await
        .unwrap();
    let (parts, body) = answer.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status.as_u16(),
        parts.headers,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

#[ignore = "needs the openssl command (to make certificates): run `cargo test -- --ignored` (CI does)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_answers_say_so_and_the_sign_in_stays_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start(dir.path()).await else {
        return;
    };
    let cert = dir.path().join("first-cert.pem");
    let (status, headers, body) = https(&server, &cert, "GET", "/v1/health", &[], "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        headers["strict-transport-security"], "max-age=31536000",
        "{headers:?}"
    );
    // The sign-in form, from the page's own origin: a Secure cookie.
    let origin = format!("https://127.0.0.1:{}", server.addr.port());
    let (status, headers, body) = https(
        &server,
        &cert,
        "POST",
        "/sign-in",
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("origin", &origin),
        ],
        &format!("token={TOKEN}"),
    )
    .await;
    assert_eq!(status, 303, "{body}");
    let cookie = headers["set-cookie"].to_str().unwrap();
    assert!(cookie.contains("; Secure"), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    server.stop().await.unwrap();
}

#[ignore = "needs the openssl command (to make certificates): run `cargo test -- --ignored` (CI does)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_never_finished_is_cut_off_and_plain_http_gets_no_answer() {
    let dir = tempfile::tempdir().unwrap();
    let Some(server) = start(dir.path()).await else {
        return;
    };
    let addr = server.addr;
    let (silent, plain) = tokio::task::spawn_blocking(move || {
        let read_all = |mut s: std::net::TcpStream| {
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut got = Vec::new();
            // Closed by the server: end of file (or a reset), well before the read timeout.
            match s.read_to_end(&mut got) {
                Ok(_) => got,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => got,
                Err(e) => panic!("still open: {e}"),
            }
        };
        let silent = read_all(std::net::TcpStream::connect(addr).unwrap());
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(
            &mut s,
            b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        (silent, read_all(s))
    })
    .await
    .unwrap();
    assert!(silent.is_empty(), "{silent:?}");
    // Whatever the TLS library answers a plain request with, it is not an HTTP answer.
    assert!(!plain.starts_with(b"HTTP/"), "{plain:?}");
    server.stop().await.unwrap();
}

#[ignore = "needs the openssl command (to make certificates): run `cargo test -- --ignored` (CI does)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_that_cannot_be_used_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let Some((cert, key)) = support::certificate(dir.path(), &["127.0.0.1"], "first") else {
        return;
    };
    let Some((_, other_key)) = support::certificate(dir.path(), &["127.0.0.1"], "second") else {
        return;
    };
    let missing = dir.path().join("missing.pem");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let cases = [
        (
            missing.clone(),
            key.clone(),
            "cannot read the TLS certificate",
        ),
        (empty.clone(), key.clone(), "holds no certificate"),
        (cert.clone(), empty.clone(), "cannot read the TLS key"),
        (cert.clone(), other_key, "does not fit the certificate"),
    ];
    for (cert, key, expected) in cases {
        let options = ServeOptions {
            tls: Some(TlsFiles {
                cert: cert.clone(),
                key,
            }),
            ..ServeOptions::default()
        };
        let w = warden(dir.path(), None);
        let err = warden_serve::Server::bind(w, options)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{err}");
        assert!(err.contains(&*dir.path().to_string_lossy()), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_network_address_needs_tls_or_a_proxy_said_to_provide_it() {
    let dir = tempfile::tempdir().unwrap();
    let on_network = ServeOptions {
        listen: "0.0.0.0:0".parse().unwrap(),
        tokens: Tokens::new(TOKEN, None).unwrap(),
        ..ServeOptions::default()
    };
    let err = warden_serve::Server::bind(warden(dir.path(), None), on_network.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("refusing to serve plain HTTP on 0.0.0.0:0"),
        "{err}"
    );
    assert!(err.contains("--tls-cert"), "{err}");
    let behind_a_proxy = ServeOptions {
        plain_http: true,
        ..on_network
    };
    let server = warden_serve::Server::bind(warden(dir.path(), None), behind_a_proxy).await;
    assert!(server.is_ok(), "{:?}", server.err());
}
