//! MinIO's client `mc`, built from its Go module (`tests/clients/mc`, a
//! `tool` of that module: never linked into garage), with its own
//! configuration directory and an alias `g` for one endpoint, set with no
//! region: what a user of `mc` types.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use super::{stderr, stdout};

/// The `mc` binary, built once per test process into cargo's directory
/// for integration tests' files (`target/tmp`; Go's build cache makes a
/// rebuild a link).
fn binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/mc");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mc");
        let o = Command::new("go")
            .args(["build", "-buildvcs=false", "-o"])
            .arg(&out)
            .arg("github.com/minio/mc")
            .current_dir(&src)
            .output()
            .expect("go runs (script/test checks it is installed)");
        assert!(
            o.status.success(),
            "go build of mc (tests/clients/mc): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        out
    })
}

/// `mc` with a configuration of its own, and the alias `g` for
/// `endpoint` with `key`.
pub struct Mc {
    config: tempfile::TempDir,
}

impl Mc {
    pub fn new(endpoint: &str, key: &(String, String)) -> Self {
        let mc = Self {
            config: tempfile::tempdir().unwrap(),
        };
        mc.ok(&[
            "alias", "set", "g", endpoint, &key.0, &key.1, "--api", "s3v4",
        ]);
        mc
    }

    /// Runs `mc ARGS` (no colours, no progress bars), in `dir` if given.
    pub fn run_in(&self, dir: Option<&Path>, args: &[&str]) -> Output {
        let mut cmd = Command::new(binary());
        cmd.arg("--config-dir")
            .arg(self.config.path())
            .args(["--no-color", "--quiet", "--disable-pager"])
            .args(args)
            // No proxy, no update check.
            .env_remove("HTTP_PROXY")
            .env_remove("HTTPS_PROXY")
            .env("MC_UPDATE", "off");
        if let Some(d) = dir {
            cmd.current_dir(d);
        }
        cmd.output().expect("mc runs")
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_in(None, args)
    }

    /// [`Mc::run`], which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "mc {args:?} failed:\n{}\n{}",
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    }

    /// `mc --json ARGS`, which must succeed: one JSON value per line.
    pub fn json(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        self.ok(&a)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("mc {args:?}: {e}: {l}")))
            .collect()
    }
}
