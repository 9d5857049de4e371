//! The HTTP server under the scripted models (`messages_api.rs`, `responses_api.rs`,
//! `gemini_api.rs`): one thread per connection on a free loopback port, one request per
//! connection, until dropped. Each model's module answers the requests.

#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A request, read.
pub struct Request {
    pub method: String,
    pub path: String,
    /// Its headers, names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// Whether the request has the header `name` (in lower case).
    pub fn has_header(&self, name: &str) -> bool {
        self.headers.iter().any(|(n, _)| n == name)
    }
}

/// A server on a loopback port, answering with `answer` until dropped.
pub struct Loopback {
    pub url: String,
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Loopback {
    pub fn start(
        answer: impl Fn(Request, &mut TcpStream) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> Loopback {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let answer = Arc::new(answer);
        let st = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let answer = answer.clone();
                std::thread::spawn(move || {
                    let _ = read(conn).and_then(|(request, mut out)| answer(request, &mut out));
                });
            }
        });
        Loopback {
            url: format!("http://127.0.0.1:{port}"),
            port,
            stop,
        }
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accepting thread so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Reads one request from `conn`; the stream to answer on.
fn read(conn: TcpStream) -> std::io::Result<(Request, TcpStream)> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if name == "content-length" {
                length = value.trim().parse().unwrap_or(0);
            }
            headers.push((name, value.trim().to_string()));
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let mut words = request_line.split_whitespace();
    let request = Request {
        method: words.next().unwrap_or("").to_string(),
        path: words.next().unwrap_or("").to_string(),
        headers,
        body,
    };
    Ok((request, conn))
}

/// Writes a whole answer and closes the exchange.
pub fn respond(out: &mut TcpStream, status: &str, kind: &str, body: &[u8]) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )?;
    out.write_all(body)?;
    out.flush()
}
