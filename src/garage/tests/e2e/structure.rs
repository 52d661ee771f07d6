//! The modules of the binary and of the admin crate depend on each other
//! one way: no import cycle between their files (issue 18). A file
//! `a/b.rs` is module `a::b`;
//! it depends on the modules its `crate::…` and `super::…` paths name,
//! groups included (`use super::{a, b}`, `use crate::{a::{b, c}, d}`;
//! test modules excluded). A child naming its parent (`super::Admin` in
//! `admin/bucket.rs`) is not counted: a parent module and its children
//! are one unit, as they are in Rust.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every module of `src/` (by path, `a::b`) and its source (without its
/// test module).
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            if p.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().map(String::as_str) == Some("mod") {
                parts.pop();
            }
            let name = parts.join("::");
            let text = std::fs::read_to_string(&p).unwrap();
            let text = text.split("#[cfg(test)]").next().unwrap().to_string();
            out.insert(name, text);
        }
    }
    out
}

/// The module a path names: the longest known module that prefixes it.
fn resolve(known: &BTreeMap<String, String>, path: &[&str]) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| known.contains_key(m))
}

fn parent(m: &str) -> &str {
    m.rsplit_once("::").map(|(p, _)| p).unwrap_or("main")
}

/// The paths written at the start of `rest` (just after `crate::` or
/// `super::`), each as its segments: `a::b` gives one path, a group
/// `{a::{b, c}, d}` gives `a::b`, `a::c` and `d`.
fn paths_at(rest: &str) -> Vec<Vec<String>> {
    fn path(s: &str) -> (Vec<String>, &str) {
        let end = s
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(s.len());
        let segs = s[..end]
            .split("::")
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect();
        (segs, &s[end..])
    }
    // The items of the group opening `s` (after its `{`), and what follows
    // its `}`.
    fn group(mut s: &str) -> (Vec<Vec<String>>, &str) {
        let mut out = Vec::new();
        loop {
            s = s.trim_start();
            if let Some(r) = s.strip_prefix('}') {
                return (out, r);
            }
            if s.is_empty() {
                return (out, s);
            }
            let (head, r) = path(s);
            let r = r.trim_start();
            if let Some(inner) = r.strip_prefix('{') {
                let (items, r2) = group(inner);
                out.extend(items.into_iter().map(|i| [head.clone(), i].concat()));
                s = r2;
            } else {
                // `self` names the group's prefix itself.
                if head == ["self"] {
                    out.push(Vec::new());
                } else if !head.is_empty() {
                    out.push(head);
                }
                // Skip `as name`, `self`, up to the next item.
                let stop = r.find([',', '}']).unwrap_or(r.len());
                s = &r[stop..];
            }
            s = s.trim_start().strip_prefix(',').unwrap_or(s);
        }
    }
    match rest.strip_prefix('{') {
        Some(inner) => group(inner).0,
        None => {
            let (head, r) = path(rest);
            match r.strip_prefix('{') {
                Some(inner) => group(inner)
                    .0
                    .into_iter()
                    .map(|i| [head.clone(), i].concat())
                    .collect(),
                None => vec![head],
            }
        }
    }
}

fn edges(known: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in known {
        let mut refs: Vec<Vec<String>> = Vec::new();
        for (i, _) in text.match_indices("crate::") {
            refs.extend(paths_at(&text[i + 7..]));
        }
        // `super::x` in `a::b` names `a::x`.
        let up = parent(m);
        for (i, _) in text.match_indices("super::") {
            if text[..i].ends_with("::") {
                continue;
            }
            let base: Vec<String> = if up == "main" {
                vec![]
            } else {
                up.split("::").map(String::from).collect()
            };
            refs.extend(
                paths_at(&text[i + 7..])
                    .into_iter()
                    .map(|p| [base.clone(), p].concat()),
            );
        }
        for r in refs {
            let r: Vec<&str> = r.iter().map(String::as_str).collect();
            let Some(t) = resolve(known, &r) else {
                continue;
            };
            // Itself, or one of its ancestors (a child naming its parent).
            if t == *m || m.starts_with(&format!("{t}::")) {
                continue;
            }
            out.entry(m.clone()).or_default().insert(t);
        }
    }
    out
}

/// The cycles of the graph (strongly connected components of more than
/// one module).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = g.keys().chain(g.values().flatten()).collect();
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for t in g.get(&n).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut done = BTreeSet::new();
    for n in nodes.iter() {
        if done.contains(*n) || !reaches[n].contains(*n) {
            continue;
        }
        let scc: Vec<String> = nodes
            .iter()
            .filter(|m| reaches[n].contains(**m) && reaches[*m].contains(*n))
            .map(|m| (*m).clone())
            .collect();
        done.extend(scc.iter().cloned());
        out.push(scc);
    }
    out
}

#[test]
fn no_import_cycles_in_the_binary_nor_in_the_admin_crate() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let binary = modules(&here.join("src"));
    let admin = modules(&here.join("../admin/src"));
    assert!(
        admin.contains_key("ops::bucket") && binary.contains_key("cli::bucket"),
        "{:?} {:?}",
        admin.keys(),
        binary.keys()
    );
    // Names say where you are: the CLI is `cli`, not a second "admin",
    // and no other crate is brought in under `crate::` (a `use` at the
    // crate root would make `crate::ops` mean another crate's module).
    assert!(!binary.contains_key("admin"), "{:?}", binary.keys());
    let root = std::fs::read_to_string(here.join("src/main.rs")).unwrap();
    assert!(
        !root
            .lines()
            .any(|l| l.starts_with("use garage_") || l.starts_with("pub use garage_")),
        "src/main.rs brings another crate's modules in under crate::"
    );
    let g = edges(&admin);
    // The layering of the admin crate: HTTP → RPC → operations.
    assert!(g["admin_api::bucket"].contains("ops::bucket"), "{g:?}");
    assert!(g["admin_rpc"].contains("ops"), "{g:?}");
    for m in admin.keys().filter(|m| m.starts_with("ops")) {
        for t in g.get(m).into_iter().flatten() {
            assert!(
                !t.starts_with("admin_api") && !t.starts_with("admin_rpc"),
                "{m} names {t}: the operations know neither HTTP nor the RPC"
            );
        }
    }
    assert!(
        !g["admin_rpc"].iter().any(|t| t.starts_with("admin_api")),
        "{g:?}"
    );
    let c = cycles(&g);
    assert!(c.is_empty(), "import cycles in garage_admin: {c:?}");
    let c = cycles(&edges(&binary));
    assert!(c.is_empty(), "import cycles in the binary: {c:?}");
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut known = BTreeMap::new();
    known.insert("a".to_string(), "use crate::b::x;".to_string());
    known.insert("b".to_string(), "fn f() { crate::c::y() }".to_string());
    known.insert("c".to_string(), "use crate::a;".to_string());
    known.insert("d".to_string(), "use crate::a;".to_string());
    let c = cycles(&edges(&known));
    assert_eq!(c, vec![vec!["a".to_string(), "b".into(), "c".into()]]);
}

#[test]
fn grouped_imports_count() {
    let p = |s: &str| -> Vec<String> { paths_at(s).into_iter().map(|p| p.join("::")).collect() };
    assert_eq!(p("a::b::C;"), ["a::b::C"]);
    assert_eq!(p("{a, b::c};"), ["a", "b::c"]);
    assert_eq!(
        p("x::{a::{b, c}, d as e, self};"),
        ["x::a::b", "x::a::c", "x::d", "x"]
    );
    // A planted cycle through grouped imports, `super::` and `crate::`.
    let mut known = BTreeMap::new();
    known.insert("cli".to_string(), String::new());
    known.insert("cli::a".to_string(), "use super::{b, Thing};".to_string());
    known.insert(
        "cli::b".to_string(),
        "use crate::{cli::{a, c}, other};".to_string(),
    );
    known.insert("cli::c".to_string(), String::new());
    let c = cycles(&edges(&known));
    assert_eq!(c, vec![vec!["cli::a".to_string(), "cli::b".into()]]);
}

/// The methods of `Api` each module defines (in its `impl Api` blocks),
/// by name.
fn api_methods(modules: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (m, text) in modules {
        let mut inside = false;
        for line in text.lines() {
            if line.starts_with("impl Api {") {
                inside = true;
            } else if inside && line == "}" {
                inside = false;
            } else if inside {
                let l = line
                    .strip_prefix("    ")
                    .filter(|l| !l.starts_with(' '))
                    .unwrap_or_default();
                let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
                let l = l.strip_prefix("pub ").unwrap_or(l);
                let l = l.strip_prefix("async ").unwrap_or(l);
                if let Some(rest) = l.strip_prefix("fn ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.insert(name, m.clone());
                }
            }
        }
    }
    out
}

/// Calls of another module's `Api` methods (`self.m(`, `api.m(`,
/// `this.m(`, whitespace ignored), as edges from the caller to the
/// module that defines `m`: a cross-family call is a dependency as much
/// as an import is.
fn method_edges(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let methods = api_methods(modules);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, text) in modules {
        let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        for (name, owner) in methods.iter() {
            if owner == m {
                continue;
            }
            let called = ["self.", "api.", "this."]
                .iter()
                .any(|r| flat.contains(&format!("{r}{name}(")));
            if called {
                out.entry(m.clone()).or_default().insert(owner.clone());
            }
        }
    }
    out
}

#[test]
fn method_calls_are_edges() {
    let mut known = BTreeMap::new();
    known.insert(
        "a".to_string(),
        "use crate::b::Thing;\nimpl Api {\n    pub async fn find(&self) {}\n}".to_string(),
    );
    known.insert(
        "b".to_string(),
        "impl Api {\n    fn other(&self) {\n        self\n            .find();\n    }\n}"
            .to_string(),
    );
    let e = method_edges(&known);
    assert_eq!(e["b"], BTreeSet::from(["a".to_string()]));
    assert!(!e.contains_key("a"));
    let mut g = edges(&known);
    for (m, t) in e {
        g.entry(m).or_default().extend(t);
    }
    assert_eq!(cycles(&g), vec![vec!["a".to_string(), "b".into()]]);
}

/// The S3 crate is organised by family of operations, one folder each
/// (issue 33): each folder says what it owns, and neither the families
/// nor the shared files at the crate's root (`ctx`, `error`, `meta`,
/// `request`, …) depend on each other in circles, by an import or by a
/// call of another family's `Api` method (issue 45). A family is one
/// unit here: files of one family may name each other.
#[test]
fn the_s3_families_do_not_import_each_other_in_circles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../api/src");
    let api = modules(&src);
    // The unit of a module: its family folder, or the root file itself.
    let unit = |m: &str| -> String {
        let top = m.split("::").next().unwrap_or(m);
        top.to_string()
    };
    let families: BTreeSet<String> = api
        .keys()
        .map(|m| unit(m))
        .filter(|u| src.join(u).is_dir())
        .collect();
    for f in [
        "objects",
        "multipart",
        "listing",
        "bucket",
        "access",
        "encryption",
        "conditional",
        "versions",
        "lifecycle",
        "website",
        "server",
        "logging",
    ] {
        assert!(families.contains(f), "no family folder {f}: {families:?}");
    }
    for f in families.iter() {
        assert!(
            api[f].trim_start().starts_with("//!"),
            "src/api/src/{f}/mod.rs must open with a //! comment saying what the family owns"
        );
    }
    // No HTTP listener in the S3 crate: it is garage_http's.
    assert!(!api.contains_key("listener"), "{:?}", api.keys());
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut all = edges(&api);
    for (m, targets) in method_edges(&api) {
        all.entry(m).or_default().extend(targets);
    }
    for (m, targets) in all {
        for t in targets {
            let (a, b) = (unit(&m), unit(&t));
            if a != b {
                g.entry(a).or_default().insert(b);
            }
        }
    }
    assert!(g["objects"].contains("versions"), "{g:?}");
    // Seen by their calls only: the objects family's methods called by
    // the logging family, the authorization step's requester by `s3`.
    assert!(g["logging"].contains("objects"), "{g:?}");
    assert!(g["s3"].contains("access"), "{g:?}");
    let c = cycles(&g);
    assert!(
        c.is_empty(),
        "import circles between the S3 crate's families: {c:?}"
    );
}

#[test]
fn admin_does_not_depend_on_the_s3_crate() {
    let toml =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../admin/Cargo.toml"))
            .unwrap();
    assert!(
        !toml.contains("garage_api"),
        "garage_admin depends on garage_api"
    );
    assert!(
        toml.contains("garage_http"),
        "garage_admin serves with garage_http's listener"
    );
}

/// Test helpers do not ship in production builds: `garage_util::fuzzing`,
/// `garage_table::testing`, `garage_block::store::DIR_SYNCS` and
/// `garage_model::block_ref_table::NoBlockRefHook` exist under
/// `cfg(test)` or the crates' `testing` feature, which only
/// dev-dependencies enable.
#[test]
fn test_helpers_are_left_out_of_production_builds() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for (lib, module) in [
        ("util/src/lib.rs", "pub mod fuzzing;"),
        ("util/src/lib.rs", "pub mod fixtures;"),
        ("table/src/lib.rs", "pub mod testing;"),
        (
            "block/src/store.rs",
            "pub static DIR_SYNCS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);",
        ),
        ("model/src/block_ref_table.rs", "pub struct NoBlockRefHook;"),
    ] {
        let text = std::fs::read_to_string(src.join(lib)).unwrap();
        let before = text
            .lines()
            .take_while(|l| l.trim() != module)
            .last()
            .unwrap_or_default();
        assert_eq!(
            before.trim(),
            "#[cfg(any(test, feature = \"testing\"))]",
            "{lib}: `{module}` must be behind cfg(test) or the testing feature"
        );
    }
    for e in std::fs::read_dir(&src).unwrap() {
        let toml = e.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&toml) else {
            continue;
        };
        // The [dependencies] section: up to the next section.
        let deps = text
            .split("\n[")
            .find(|s| s.starts_with("dependencies]"))
            .unwrap_or_default();
        assert!(
            !deps.contains("\"testing\""),
            "{}: a production dependency enables a testing feature",
            toml.display()
        );
    }
    let util = std::fs::read_to_string(src.join("util/Cargo.toml")).unwrap();
    assert!(
        !util.contains("garage_db"),
        "garage_util depends on garage_db"
    );
}

/// Writes of the object and history tables in `text` (whitespace ignored,
/// so a call chain over several lines counts): `objects`, `object_table`,
/// `history` or `history_table` followed by an insert.
fn object_writes(text: &str) -> Vec<String> {
    let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut found = Vec::new();
    for table in ["objects", "object_table", "history", "history_table"] {
        for method in [
            "insert",
            "insert_many",
            "insert_or_queue",
            "insert_later",
            "insert_ordered",
        ] {
            let call = format!("{table}.{method}(");
            for (i, _) in flat.match_indices(&call) {
                // `owned_by_history.insert(` is another name.
                let before = flat[..i].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    continue;
                }
                found.push(call.clone());
            }
        }
    }
    found
}

/// The object-write protocol has one home (issue 45):
/// `garage_model::object_write` is the only module that writes the object
/// and history tables; every other writer (S3 handlers, lifecycle,
/// purge, admin) calls it.
#[test]
fn only_the_object_write_protocol_writes_objects() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut offenders = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let crate_src = e.unwrap().path().join("src");
        if !crate_src.is_dir() {
            continue;
        }
        for (module, text) in modules(&crate_src) {
            let name = format!("{}::{module}", crate_src.display());
            if name.ends_with("model/src::object_write") || module.ends_with("tests") {
                continue;
            }
            for w in object_writes(&text) {
                offenders.push(format!("{name}: {w}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "object or history table written outside garage_model::object_write: {offenders:?}"
    );
    // A planted violation is found, over two lines too.
    let planted =
        "let r = self.objects\n    .insert_ordered(&objs).await;\nself.history.insert(&h);";
    assert_eq!(
        object_writes(planted),
        vec!["objects.insert_ordered(", "history.insert("]
    );
    assert!(object_writes("owned_by_history.insert(x.uuid);").is_empty());
}

/// Access decisions made in `text` (whitespace ignored): calls that find
/// the requester or decide an access, which only the authorization step
/// (`access::step`, run from the table of `s3.rs`) makes.
fn access_decisions(text: &str) -> Vec<String> {
    let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut found = Vec::new();
    for call in [
        ".requester(",
        ".authorize(",
        ".authorize_copy(",
        ".decider(",
        ".owned_bucket(",
    ] {
        for _ in flat.match_indices(call) {
            found.push(call.to_string());
        }
    }
    found
}

/// One authorization step (issue 45): every S3 operation names its rule
/// in the table of `s3.rs`, checked before its handler runs; no handler
/// finds its requester or decides an access itself.
#[test]
fn s3_handlers_receive_their_authorization() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../api/src");
    let api = modules(&src);
    let mut offenders = Vec::new();
    for (module, text) in api.iter() {
        if ["s3", "access::step", "access::authorize"].contains(&module.as_str()) {
            continue;
        }
        for d in access_decisions(text) {
            offenders.push(format!("{module}: {d}"));
        }
    }
    assert!(
        offenders.is_empty(),
        "access decided outside the authorization step (access::step): {offenders:?}"
    );
    // Every operation of the table has a rule, and handlers take it.
    let table = &api["s3"];
    let rows = table.matches("(r): ").count();
    assert!(rows >= 60, "{rows} rows in the table of s3.rs");
    assert_eq!(rows, table.matches("\n        = ").count());
    let handlers: usize = api.values().map(|t| t.matches("ctx: Ctx<").count()).sum();
    assert_eq!(handlers, rows, "handlers taking a Ctx vs rows of the table");
    // A planted violation is found, over two lines too.
    let planted = "let who = self.requester(&req).await?;\nlet b = self\n    .authorize(&who, b, a, None, None)";
    assert_eq!(
        access_decisions(planted),
        vec![".requester(", ".authorize("]
    );
    assert!(access_decisions("let r = api.requester_count;").is_empty());
}

/// The most lines a file of the S3 crate holds, its test module left out.
const MAX_S3_FILE_LINES: usize = 800;

/// The modules of `modules` longer than `limit` lines, with their length.
fn oversized(modules: &BTreeMap<String, String>, limit: usize) -> Vec<(String, usize)> {
    modules
        .iter()
        .map(|(m, text)| (m.clone(), text.lines().count()))
        .filter(|(_, n)| *n > limit)
        .collect()
}

/// Places in `text` where clippy's `too_many_arguments` is silenced.
fn silenced_argument_counts(text: &str) -> usize {
    text.matches("clippy::too_many_arguments").count()
}

/// A newcomer can read the S3 crate a file at a time (issue 45): no file
/// of `src/api/src` over [`MAX_S3_FILE_LINES`] lines without its test
/// module, and nowhere in the workspace a function whose arguments are so
/// many that clippy's `too_many_arguments` is silenced (they become a
/// struct).
#[test]
fn s3_files_are_short_and_functions_take_few_arguments() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let api = modules(&src.join("api/src"));
    assert!(api.len() > 30, "the S3 crate's modules are found");
    let long = oversized(&api, MAX_S3_FILE_LINES);
    assert!(
        long.is_empty(),
        "files of src/api/src over {MAX_S3_FILE_LINES} lines (split them by what they do): {long:?}"
    );
    let mut silenced = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let crate_src = e.unwrap().path().join("src");
        if !crate_src.is_dir() {
            continue;
        }
        for (module, text) in modules(&crate_src) {
            if silenced_argument_counts(&text) > 0 {
                silenced.push(format!("{}::{module}", crate_src.display()));
            }
        }
    }
    assert!(
        silenced.is_empty(),
        "clippy::too_many_arguments silenced (group the arguments in a struct): {silenced:?}"
    );
    // Planted violations are found.
    let mut planted = BTreeMap::new();
    planted.insert("big".to_string(), "x\n".repeat(MAX_S3_FILE_LINES + 1));
    planted.insert("small".to_string(), "x\n".repeat(MAX_S3_FILE_LINES));
    assert_eq!(
        oversized(&planted, MAX_S3_FILE_LINES),
        vec![("big".to_string(), MAX_S3_FILE_LINES + 1)]
    );
    assert_eq!(
        silenced_argument_counts("#[allow(clippy::too_many_arguments)]\nfn f() {}"),
        1
    );
}

/// End-to-end test files that read a node's log, and why: what they test
/// is the log line itself (a message an operator reads), or a listener's
/// readiness. Every other test reads `--json`, the admin API or a metric
/// (issue 45); a number a test needs comes from a counter
/// (`Cluster::counter`), never from a sentence.
const LOG_READERS: &[(&str, &str)] = &[
    (
        "admin_api.rs",
        "the warning for an API without a token; a Unix-socket listener ready",
    ),
    (
        "clocks.rs",
        "the clock warnings operators read, and that they are not repeated",
    ),
    (
        "cluster.rs",
        "both sides of a refused handshake say why; the bootstrap lines",
    ),
    (
        "config_compat.rs",
        "the warnings about ignored configuration keys",
    ),
    (
        "metrics.rs",
        "the Prometheus server's own log, not garage's",
    ),
    (
        "security.rs",
        "no secret in the log; the rate-limited refusal line",
    ),
    ("server.rs", "the startup lines, and no secret logged"),
    ("traces.rs", "the OTLP exporter's lines"),
    ("upgrade.rs", "a refused peer's message names both versions"),
    ("web.rs", "the website listener ready"),
];

/// Whether test source `text` reads a process's log.
fn reads_logs(text: &str) -> bool {
    let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    flat.contains(".log()") || flat.contains(".wait_log(")
}

#[test]
fn tests_read_json_and_counters_not_log_lines() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/e2e");
    let mut readers = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".rs") || name == "structure.rs" {
            continue;
        }
        if reads_logs(&std::fs::read_to_string(&p).unwrap()) {
            readers.push(name);
        }
    }
    assert!(
        !readers.is_empty(),
        "log readers are found in {}",
        dir.display()
    );
    let allowed: Vec<&str> = LOG_READERS.iter().map(|(f, _)| *f).collect();
    let unlisted: Vec<&String> = readers
        .iter()
        .filter(|f| !allowed.contains(&f.as_str()))
        .collect();
    assert!(
        unlisted.is_empty(),
        "test files reading a node's log for what a counter or --json would give (add a counter and read it with Cluster::counter): {unlisted:?}"
    );
    // The list stays true: each file on it still reads a log.
    let stale: Vec<&&str> = allowed
        .iter()
        .filter(|f| !readers.iter().any(|r| r == *f))
        .collect();
    assert!(
        stale.is_empty(),
        "LOG_READERS names files that read no log: {stale:?}"
    );
    // A planted violation is found, over two lines too.
    assert!(reads_logs(
        "c.nodes[0]\n    .proc()\n    .log()\n    .contains(\"done: 3\")"
    ));
    assert!(reads_logs("n.proc().wait_log(\"repair\")"));
    assert!(!reads_logs("c.counter(0, \"repair_fixed_total\")"));
}

/// Whether `text` registers a worker by hand (`….register(WorkerSpec::new(`,
/// or `workers.register(spec)` on a node's registry) rather than through
/// `runner::spawn` (issue 45).
fn registers_by_hand(text: &str) -> bool {
    let flat: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    flat.contains("workers.register(")
        || flat.match_indices(".register(").any(|(i, m)| {
            let rest = &flat[i + m.len()..];
            let rest = rest.strip_prefix("garage_util::worker::").unwrap_or(rest);
            rest.starts_with("WorkerSpec::new(")
        })
}

/// Every background loop implements `garage_util::worker::Worker` and is
/// started with `runner::spawn`, which registers it, runs its steps, backs
/// off after errors and stops it within the exit deadline: no loop
/// registers with the worker registry by hand.
#[test]
fn background_loops_follow_the_worker_contract() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut by_hand = Vec::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let crate_src = e.unwrap().path().join("src");
        if !crate_src.is_dir() {
            continue;
        }
        let krate = crate_src
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if krate == "util" {
            continue;
        }
        for (module, text) in modules(&crate_src) {
            if registers_by_hand(&text) {
                by_hand.push(format!("{krate}/src::{module}"));
            }
        }
    }
    by_hand.sort();
    assert!(
        by_hand.is_empty(),
        "background loops registered by hand (implement garage_util::worker::Worker and start it with runner::spawn): {by_hand:?}"
    );
    // A planted violation is found, over two lines too.
    assert!(registers_by_hand(
        "let w = self.system.workers.register(\n    WorkerSpec::new(\"x\", \"y\"));"
    ));
    assert!(registers_by_hand(
        "let h = g.system.workers.register(spec);"
    ));
    assert!(!registers_by_hand(
        "registry.register_variable(\"speed\", …)"
    ));
    assert!(!registers_by_hand("if self.register(&unstarted.conn) {"));
}
