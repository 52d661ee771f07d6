//! Shared harness of the end-to-end tests: runs the real `garage` binary as
//! separate processes, reads their logs, waits for conditions with
//! deadlines (never fixed sleeps) and cleans up after them.
#![allow(dead_code)]

pub mod brokers;
pub mod browser;
pub mod cluster;
pub mod gateway;
pub mod http;
pub mod mc;
pub mod proxy;
pub mod s3;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// `n` random bytes (an object body nobody can guess or compress).
pub fn random_bytes(n: usize) -> Vec<u8> {
    use rand::RngCore;
    let mut v = vec![0u8; n];
    rand::rng().fill_bytes(&mut v);
    v
}

/// Runs `f` to completion on a runtime of two worker threads (the SDK
/// tests' clients are async).
pub fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(f)
}

/// Default deadline for a process to reach a state; generous for 2 shared
/// cores, but only ever spent when something is wrong.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The `garage` binary under test: the one cargo built with the tests, or
/// `GARAGE_TEST_BIN` (a copy, so that a long checker run keeps its binary
/// while the tree is rebuilt).
pub fn garage_bin() -> PathBuf {
    std::env::var_os("GARAGE_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_garage")))
}

/// A `garage` command run to completion in `dir`.
pub fn garage(dir: &Path, args: &[&str]) -> Output {
    base_command(dir)
        .args(args)
        .output()
        .expect("cannot run garage")
}

pub fn base_command(dir: &Path) -> Command {
    base_command_of(&garage_bin(), dir)
}

/// [`base_command`] with another `garage` binary (an earlier release's).
pub fn base_command_of(bin: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir)
        .env_remove("GARAGE_CONFIG_FILE")
        .env_remove("GARAGE_RPC_SECRET")
        .env_remove("GARAGE_RPC_SECRET_FILE")
        .env("RUST_LOG", test_log_level());
    cmd
}

/// The `RUST_LOG` of every garage process a test starts: `info`, or
/// `GARAGE_TEST_LOG` (e.g. `GARAGE_TEST_LOG=trace cargo test -p garage`,
/// to run the suite with every log line and check that no secret is in
/// any of them: see [`cluster::Cluster::note_secret`]).
pub fn test_log_level() -> String {
    std::env::var("GARAGE_TEST_LOG").unwrap_or_else(|_| "info".into())
}

/// The secrets among `secrets` that `log` contains (empty strings are
/// never found).
pub fn leaked<'a>(log: &str, secrets: &'a [String]) -> Vec<&'a str> {
    secrets
        .iter()
        .filter(|s| !s.is_empty() && log.contains(s.as_str()))
        .map(String::as_str)
        .collect()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

type Lines = Arc<(Mutex<Vec<String>>, Condvar)>;

/// A running `garage` process whose stderr is collected line by line.
/// Dropping it SIGKILLs the process.
pub struct Proc {
    child: Child,
    lines: Lines,
    pub dir: PathBuf,
}

impl Proc {
    pub fn spawn(dir: &Path, args: &[&str]) -> Proc {
        Self::spawn_with(base_command(dir).args(args))
    }

    pub fn spawn_with(cmd: &mut Command) -> Proc {
        Self::spawn_with_stdout(cmd, Stdio::null())
    }

    /// Like [`Proc::spawn_with`], with standard output sent to `stdout`
    /// (the log is standard error).
    pub fn spawn_with_stdout(cmd: &mut Command, stdout: Stdio) -> Proc {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start garage");
        let lines: Lines = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let err = child.stderr.take().unwrap();
        let l2 = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                eprintln!("[garage] {line}");
                l2.0.lock().unwrap().push(line);
                l2.1.notify_all();
            }
        });
        let dir = cmd
            .get_current_dir()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Proc { child, lines, dir }
    }

    /// Waits until a log line contains `pattern`; returns that line.
    pub fn wait_log(&self, pattern: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        let (lock, cv) = &*self.lines;
        let mut lines = lock.lock().unwrap();
        loop {
            if let Some(l) = lines.iter().find(|l| l.contains(pattern)) {
                return l.clone();
            }
            let now = Instant::now();
            assert!(
                now < deadline,
                "no log line containing {pattern:?} within {DEADLINE:?}; log so far:\n{}",
                lines.join("\n")
            );
            lines = cv.wait_timeout(lines, deadline - now).unwrap().0;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        self.lines.0.lock().unwrap().join("\n")
    }

    pub fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success(), "kill -{sig} failed");
    }

    /// The process's exit status if it has exited (without waiting).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Waits for the process to exit, with the default deadline.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "garage did not exit in time");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The canonical bytes (format 2) of every entry of every table in the
/// metadata database of the node at `node_dir`, read beside the running
/// daemon: a node stores entries in format 3, compressed, where a search
/// of the files' bytes would not see their content.
#[allow(dead_code)]
pub fn table_values(node_dir: &Path) -> Vec<Vec<u8>> {
    let meta = node_dir.join("meta");
    let engine = [garage_db::Engine::Lmdb, garage_db::Engine::Sqlite]
        .into_iter()
        .find(|e| e.exists_at(&e.db_path(&meta)))
        .expect("a metadata database");
    let opts = garage_db::OpenOptions {
        create: false,
        ..Default::default()
    };
    let db = garage_db::open(engine, &engine.db_path(&meta), &opts).unwrap();
    let mut out = Vec::new();
    for name in db.list_trees().unwrap() {
        if !name.ends_with(":table") {
            continue;
        }
        for kv in db.open_tree(&name).unwrap().iter() {
            let (k, v) = kv.unwrap();
            let c = garage_table::encoding::canonical(&k, &v).unwrap();
            out.push(c.into_owned());
        }
    }
    out
}

/// Objects written with a `secret` marker were encrypted: the marker is
/// found in clear in no file of the node (blocks in `data`, inline objects
/// in `meta`) nor in any table entry once restored from how it is stored,
/// while the `control` marker of plain objects is found in both
/// directories, which shows the search works.
#[allow(dead_code)]
pub fn plaintext_not_stored(node_dir: &Path, secret: &[u8], control: &[u8]) {
    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                files(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let contains = |b: &[u8], m: &[u8]| b.windows(m.len()).any(|w| w == m);
    for sub in ["data", "meta"] {
        let mut all = Vec::new();
        files(&node_dir.join(sub), &mut all);
        let mut seen = false;
        for f in &all {
            let Ok(b) = std::fs::read(f) else { continue };
            assert!(
                !contains(&b, secret),
                "encrypted plaintext found in clear in {}",
                f.display()
            );
            seen |= contains(&b, control);
        }
        if sub == "meta" {
            for v in table_values(node_dir) {
                assert!(
                    !contains(&v, secret),
                    "encrypted plaintext found in clear in a table entry"
                );
                seen |= contains(&v, control);
            }
        }
        assert!(
            seen,
            "the plain control marker is not found in {sub}: the search is blind"
        );
    }
}
