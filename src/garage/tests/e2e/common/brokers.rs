//! The brokers and receivers of the notification tests, as real
//! processes on loopback: a webhook receiver (tests/clients/webhook, a
//! Python HTTP server), a NATS server with JetStream built from its Go
//! module (tests/clients/nats), and Mosquitto (Debian's package). Each
//! can be stopped and started again on the same port, keeping its data.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use super::cluster::wait_until;

/// A TCP port free on 127.0.0.1 now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_port(what: &str, port: u16) {
    wait_until(what, Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
}

/// A process, in a process group of its own, killed with all its
/// children when dropped or stopped (`rabbitmq-server` is a script whose
/// Erlang VM would outlive it, holding the test's output open).
pub struct Service {
    child: Option<Child>,
    cmd: Box<dyn Fn() -> Command + Send>,
    what: String,
    pub port: u16,
}

impl Service {
    fn new(what: &str, port: u16, cmd: impl Fn() -> Command + Send + 'static) -> Self {
        let mut s = Service {
            child: None,
            cmd: Box::new(cmd),
            what: what.to_string(),
            port,
        };
        s.start();
        s
    }

    /// Starts it (again), and waits for its port.
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "{} runs already", self.what);
        use std::os::unix::process::CommandExt;
        let child = (self.cmd)()
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.what));
        self.child = Some(child);
        wait_port(&self.what, self.port);
    }

    /// Stops it and its children (SIGTERM to its group, then SIGKILL
    /// after 10 s), and waits until its port is closed.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            signal_group(c.id(), "TERM");
            for _ in 0..100 {
                if c.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            signal_group(c.id(), "KILL");
            let _ = c.wait();
            wait_until(
                &format!("{} stopped", self.what),
                Duration::from_secs(30),
                || std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err(),
            );
        }
    }
}

/// Sends `SIG<sig>` to the process group `pgid`.
fn signal_group(pgid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            signal_group(c.id(), "KILL");
            let _ = c.wait();
        }
    }
}

/// A webhook receiver writing each message it gets as a line of `out`.
pub fn webhook(port: u16, out: &Path) -> Service {
    webhook_with(port, out, None)
}

/// A webhook receiver over HTTPS, with a self-signed certificate for
/// 127.0.0.1 made by openssl in `dir`.
pub fn webhook_tls(port: u16, out: &Path, dir: &Path) -> Service {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let o = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(
        o.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    webhook_with(port, out, Some((cert, key)))
}

fn webhook_with(port: u16, out: &Path, tls: Option<(PathBuf, PathBuf)>) -> Service {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/webhook/receiver.py");
    let out = out.to_path_buf();
    Service::new("the webhook receiver", port, move || {
        let mut c = Command::new("python3");
        c.arg(&script).arg(port.to_string()).arg(&out);
        if let Some((cert, key)) = &tls {
            c.arg(cert).arg(key);
        }
        c
    })
}

/// The `nats-server` binary, built once per test process from its Go
/// module into cargo's directory for integration tests' files.
fn nats_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/nats");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nats-server");
        let o = Command::new("go")
            .args(["build", "-buildvcs=false", "-o"])
            .arg(&out)
            .arg("github.com/nats-io/nats-server/v2")
            .current_dir(&src)
            .output()
            .expect("go runs (script/test checks it is installed)");
        assert!(
            o.status.success(),
            "go build of nats-server (tests/clients/nats): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// A NATS server with JetStream, its store in `dir`.
pub fn nats(port: u16, dir: &Path) -> Service {
    let bin = nats_binary().to_path_buf();
    let dir = dir.to_path_buf();
    Service::new("nats-server", port, move || {
        let mut c = Command::new(&bin);
        c.args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(&dir);
        c
    })
}

/// RabbitMQ (Debian's package, run as this user, not as a service) on
/// `port`, its data in `dir` (durable queues and persistent messages
/// survive a restart). Its Erlang distribution port is another free one.
pub fn rabbitmq(port: u16, dir: &Path) -> Service {
    let dir = dir.to_path_buf();
    let dist = free_port();
    std::fs::create_dir_all(&dir).unwrap();
    Service::new("rabbitmq-server", port, move || {
        // The package's /usr/sbin/rabbitmq-server switches to the user
        // `rabbitmq`; the script it runs does not.
        let mut c = Command::new("/usr/lib/rabbitmq/bin/rabbitmq-server");
        let d = |name: &str| dir.join(name);
        c.env("HOME", &dir)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", port.to_string())
            .env("RABBITMQ_DIST_PORT", dist.to_string())
            .env("RABBITMQ_NODENAME", format!("garage-test-{port}@localhost"))
            .env("RABBITMQ_MNESIA_BASE", d("mnesia"))
            .env("RABBITMQ_LOG_BASE", d("log"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d("plugins"))
            .env("RABBITMQ_FEATURE_FLAGS_FILE", d("feature_flags"))
            .env("RABBITMQ_PID_FILE", d("pid"));
        c
    })
}

/// The class path of a Kafka broker, from its Maven artifacts
/// (tests/clients/kafka), resolved once per test process.
fn kafka_classpath() -> &'static str {
    static CP: OnceLock<String> = OnceLock::new();
    CP.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/kafka");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("kafka-classpath.txt");
        let o = Command::new("mvn")
            .args(["-q", "-B", "dependency:build-classpath"])
            .arg(format!("-Dmdep.outputFile={}", out.display()))
            .current_dir(&src)
            .output()
            .expect("mvn runs (script/test installs it)");
        assert!(
            o.status.success(),
            "mvn dependency:build-classpath (tests/clients/kafka): {}",
            String::from_utf8_lossy(&o.stdout)
        );
        std::fs::read_to_string(out).unwrap().trim().to_string()
    })
}

/// A Kafka broker in KRaft mode (broker and controller in one JVM) on
/// `port`, its log in `dir` (formatted at the first start; it keeps its
/// records across restarts).
pub fn kafka(port: u16, dir: &Path) -> Service {
    let cp = kafka_classpath().to_string();
    std::fs::create_dir_all(dir).unwrap();
    let controller = free_port();
    let props = dir.join("server.properties");
    std::fs::write(
        &props,
        format!(
            "process.roles=broker,controller\nnode.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{controller}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             log.dirs={}\noffsets.topic.replication.factor=1\n\
             transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n\
             num.partitions=1\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let o = Command::new("java")
        .arg("-cp")
        .arg(&cp)
        .args([
            "kafka.tools.StorageTool",
            "format",
            "-t",
            "Z2FyYWdlLXRlc3Qta2ZrIQ",
            "-c",
        ])
        .arg(&props)
        .output()
        .expect("java runs (script/test installs it)");
    assert!(
        o.status.success(),
        "kafka storage format: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    Service::new("kafka", port, move || {
        let mut c = Command::new("java");
        c.args(["-Xmx512m", "-cp", &cp, "kafka.Kafka"]).arg(&props);
        c
    })
}

/// Mosquitto on `port`, its persistence file in `dir` (queued messages of
/// persistent sessions survive a restart).
pub fn mosquitto(port: u16, dir: &Path) -> Service {
    let conf = dir.join("mosquitto.conf");
    // Started as root, mosquitto would switch to the user `mosquitto`,
    // which cannot write its persistence file here: it stays who we are.
    let me = Command::new("id").arg("-un").output().unwrap();
    let me = String::from_utf8_lossy(&me.stdout).trim().to_string();
    std::fs::write(
        &conf,
        format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\nuser {me}\npersistence true\npersistence_location {}/\nmax_queued_messages 100000\n",
            dir.display()
        ),
    )
    .unwrap();
    // Debian puts it in /usr/sbin, which a user's PATH may lack.
    let bin = match Path::new("/usr/sbin/mosquitto").exists() {
        true => PathBuf::from("/usr/sbin/mosquitto"),
        false => PathBuf::from("mosquitto"),
    };
    Service::new("mosquitto", port, move || {
        let mut c = Command::new(&bin);
        c.arg("-c").arg(&conf);
        c
    })
}

/// Ory Hydra (an OpenID Connect provider), built once per test process
/// from its Go module (`tests/clients/hydra`; SQLite for its in-memory
/// store, as Hydra's own build does).
fn hydra_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/hydra");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hydra");
        let o = Command::new("go")
            .args([
                "build",
                "-buildvcs=false",
                "-tags",
                "sqlite,sqlite_omit_load_extension",
                "-o",
            ])
            .arg(&out)
            .arg("github.com/ory/hydra/v2")
            .current_dir(&src)
            .output()
            .expect("go runs (script/test checks it is installed)");
        assert!(
            o.status.success(),
            "go build of hydra (tests/clients/hydra): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// An OpenID Connect provider (Ory Hydra, in memory, development mode
/// for its http:// issuer) on 127.0.0.1: its public port (the issuer
/// `http://127.0.0.1:PUBLIC/`) and its admin port. Tokens last `ttl`.
pub fn hydra(public: u16, admin: u16, ttl: &str) -> Service {
    let bin = hydra_binary().to_path_buf();
    let ttl = ttl.to_string();
    let s = Service::new("hydra", public, move || {
        let mut c = Command::new(&bin);
        c.args(["serve", "all", "--dev", "--sqa-opt-out"])
            .env("DSN", "memory")
            .env("URLS_SELF_ISSUER", format!("http://127.0.0.1:{public}/"))
            .env("URLS_LOGIN", "http://127.0.0.1:9/login")
            .env("URLS_CONSENT", "http://127.0.0.1:9/consent")
            .env("SERVE_PUBLIC_HOST", "127.0.0.1")
            .env("SERVE_PUBLIC_PORT", public.to_string())
            .env("SERVE_ADMIN_HOST", "127.0.0.1")
            .env("SERVE_ADMIN_PORT", admin.to_string())
            .env("STRATEGIES_ACCESS_TOKEN", "jwt")
            .env("SECRETS_SYSTEM", "a-test-secret-of-more-than-32-characters")
            .env("TTL_ID_TOKEN", &ttl)
            .env("TTL_ACCESS_TOKEN", &ttl)
            .env("LOG_LEVEL", "warn");
        c
    });
    wait_port("hydra's admin port", admin);
    s
}

/// An ID token of `subject` (its `preferred_username` too) from the
/// Hydra on `public`/`admin`: the authorization code flow, its login and
/// consent accepted through Hydra's admin API
/// (`tests/clients/hydra/idtoken.py`). Its audience: client
/// `garage-oidc`.
pub fn id_token(public: u16, admin: u16, subject: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/hydra/idtoken.py");
    let o = Command::new("python3")
        .arg(&script)
        .args(["--public", &format!("http://127.0.0.1:{public}")])
        .args(["--admin", &format!("http://127.0.0.1:{admin}")])
        .args(["--subject", subject])
        .output()
        .expect("python3 runs");
    assert!(
        o.status.success(),
        "idtoken.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}
