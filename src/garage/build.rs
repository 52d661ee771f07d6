//! Records the commit the binary is built from, for `garage --version`:
//! `GARAGE_COMMIT` if set (a build from a source archive), else `git
//! rev-parse HEAD` in the source tree, else `unknown`.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=GARAGE_COMMIT");
    let commit = match std::env::var("GARAGE_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => {
            // Built again when HEAD moves (a commit, a checkout).
            if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
                let dir = Path::new(&dir);
                println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
                if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
                    println!("cargo:rerun-if-changed={}", dir.join(r).display());
                }
                println!(
                    "cargo:rerun-if-changed={}",
                    dir.join("packed-refs").display()
                );
            }
            git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    println!("cargo:rustc-env=GARAGE_COMMIT={commit}");
}
