//! A headless Chromium (Debian's `chromium`) driven over the Chrome
//! DevTools Protocol: navigate, run script in the page, wait for a
//! condition, take screenshots. The test talks to the browser on
//! 127.0.0.1 only.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{json, Value};
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Message, WebSocket};

/// How long one protocol command may take.
const COMMAND_DEADLINE: Duration = Duration::from_secs(60);

pub struct Browser {
    child: Child,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium with one page of `width` × `height` CSS pixels.
    pub fn start(width: u32, height: u32) -> Browser {
        let found = Command::new("chromium").arg("--version").output();
        assert!(
            found.as_ref().is_ok_and(|o| o.status.success()),
            "this test needs Debian's chromium (`apt-get install -y chromium`; .ci/run installs it): {found:?}"
        );
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        // Chromium prints its DevTools address on stderr; a thread reads
        // stderr to the end so that the pipe never fills.
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(COMMAND_DEADLINE)
            .expect("chromium prints its DevTools address");
        let (ws, _) = tungstenite::connect(url.as_str()).expect("DevTools connection");
        if let MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        }
        let mut b = Browser {
            child,
            ws,
            next_id: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = b.send("Target.createTarget", json!({"url": "about:blank"}), false);
        let session = b.send(
            "Target.attachToTarget",
            json!({"targetId": target["targetId"], "flatten": true}),
            false,
        );
        b.session = session["sessionId"].as_str().unwrap().to_string();
        b.call("Page.enable", json!({}));
        b.call("Runtime.enable", json!({}));
        b.viewport(width, height, false);
        b
    }

    /// Sends one command (to the page unless `browser_level`) and returns
    /// its result; panics on a protocol error.
    fn send(&mut self, method: &str, params: Value, on_page: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if on_page {
            msg["sessionId"] = json!(self.session);
        }
        self.ws
            .send(Message::text(msg.to_string()))
            .expect("DevTools send");
        let deadline = Instant::now() + COMMAND_DEADLINE;
        while Instant::now() < deadline {
            let m = match self.ws.read() {
                Ok(m) => m,
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    continue
                }
                Err(e) => panic!("DevTools connection: {e}"),
            };
            let Message::Text(t) = m else { continue };
            let v: Value = serde_json::from_str(t.as_str()).unwrap();
            if v["id"] != json!(id) {
                continue; // an event, or an older answer
            }
            if let Some(e) = v.get("error") {
                panic!("{method}: {e}");
            }
            return v["result"].clone();
        }
        panic!("{method}: no answer in {COMMAND_DEADLINE:?}");
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, true)
    }

    /// Sets the page's viewport (CSS pixels; `mobile` for a phone).
    pub fn viewport(&mut self, width: u32, height: u32, mobile: bool) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        );
    }

    pub fn goto(&mut self, url: &str) {
        let r = self.call("Page.navigate", json!({"url": url}));
        assert!(r.get("errorText").is_none(), "navigate to {url}: {r}");
    }

    /// Runs `js` in the page (awaiting a promise) and returns its value.
    pub fn eval(&mut self, js: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": js, "awaitPromise": true, "returnByValue": true}),
        );
        if let Some(e) = r.get("exceptionDetails") {
            panic!("script failed: {js}\n{e}");
        }
        r["result"]["value"].clone()
    }

    /// Waits until `condition` (a script expression) is true in the page.
    /// A condition that throws (an element not rendered yet, while the page
    /// changes) counts as false until the deadline.
    pub fn wait_for(&mut self, what: &str, condition: &str, deadline: Duration) {
        let end = Instant::now() + deadline;
        let guarded = format!(
            "(() => {{ try {{ return !!({condition}); }} catch (e) {{ return false; }} }})()"
        );
        loop {
            if self.eval(&guarded) == json!(true) {
                return;
            }
            if Instant::now() > end {
                let text = self.eval("document.body ? document.body.innerText : ''");
                panic!("timed out after {deadline:?} waiting for {what}; the page shows:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Puts the file at `path` into the file input `selector`, as a person
    /// choosing it would.
    pub fn set_file(&mut self, selector: &str, path: &Path) {
        let doc = self.call("DOM.getDocument", json!({}));
        let node = self.call(
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": selector}),
        );
        assert_ne!(node["nodeId"], json!(0), "no {selector} in the page");
        self.call(
            "DOM.setFileInputFiles",
            json!({"nodeId": node["nodeId"], "files": [path.display().to_string()]}),
        );
    }

    /// Presses and releases `key` (`Tab` or `Enter`) as a keyboard would,
    /// on the focused element.
    pub fn press(&mut self, key: &str) {
        let (code, text) = match key {
            "Tab" => (9, ""),
            "Enter" => (13, "\r"),
            _ => panic!("press: no key code for {key:?}"),
        };
        for kind in ["keyDown", "keyUp"] {
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code,
                       "text": if kind == "keyDown" { text } else { "" }}),
            );
        }
    }

    /// Lets the page download files into `dir`.
    pub fn allow_downloads(&mut self, dir: &Path) {
        self.send(
            "Browser.setDownloadBehavior",
            json!({"behavior": "allow", "downloadPath": dir.display().to_string()}),
            false,
        );
    }

    /// A PNG screenshot of the viewport, written to `path`; returns it.
    pub fn screenshot(&mut self, path: &Path) -> Vec<u8> {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, &png).unwrap();
        png
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The share of a PNG's pixels that differ from its top-left pixel (a
/// blank page: 0).
pub fn non_background_share(png_bytes: &[u8]) -> f64 {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let data = &buf[..info.buffer_size()];
    let first = &data[..px];
    let n = data.len() / px;
    let differ = data.chunks(px).filter(|p| *p != first).count();
    differ as f64 / n as f64
}
