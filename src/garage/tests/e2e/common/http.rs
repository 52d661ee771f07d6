//! Plain HTTP requests with curl, for the tests that look at statuses
//! and headers as a browser would (CORS, the website endpoint).

use std::collections::HashMap;
use std::process::Command;

use super::stderr;

/// An HTTP answer: status, headers (names lowercased; the last of a
/// repeated header), body bytes.
pub struct Answer {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Runs curl with `args` (plus `-s`, a 30 s limit, the headers to
/// standard output and the body to a file; no redirect followed) and
/// parses the answer.
pub fn curl(args: &[&str]) -> Answer {
    let dir = tempfile::tempdir().unwrap();
    let body_path = dir.path().join("body");
    let out = Command::new("curl")
        .args(["-s", "--max-time", "30", "-D", "-", "-o"])
        .arg(&body_path)
        .args(args)
        .output()
        .expect("curl runs");
    assert!(out.status.success(), "curl {args:?}: {}", stderr(&out));
    let head = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = std::fs::read(&body_path).unwrap_or_default();
    Answer {
        status,
        headers,
        body,
    }
}
