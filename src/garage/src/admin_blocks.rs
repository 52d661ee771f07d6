//! `garage block …`, `garage repair blocks|scrub …`, run by the daemon
//! that the CLI reached; each returns the text the CLI prints.

use std::fmt::Write;

use garage_block::manager::BlockManager;
use garage_block::rc::queue_key;
use garage_util::data::Hash;
use garage_util::time::now_msec;

use crate::admin::table::format as columns;
use crate::cli::{BlockOperation, RepairWhat, ScrubCmd, WorkerOperation};

type Result<T> = std::result::Result<T, String>;

fn parse_hash(s: &str) -> Result<Hash> {
    s.parse()
        .map_err(|_| format!("{s:?} is not a block hash: give its 64 hexadecimal digits"))
}

fn ago(ms: u64) -> String {
    let now = now_msec();
    if ms >= now {
        format!("in {}s", (ms - now) / 1000)
    } else {
        format!("{}s ago", (now - ms) / 1000)
    }
}

pub async fn block(m: &BlockManager, op: BlockOperation) -> Result<String> {
    match op {
        BlockOperation::ListErrors => {
            let mut rows = vec!["Hash\tFailures\tLast try\tNext try".to_string()];
            for (h, e) in m.resync_errors().map_err(|e| e.to_string())? {
                rows.push(format!(
                    "{}\t{}\t{}\t{}",
                    h.hex(),
                    e.failures,
                    ago(e.last_try),
                    ago(e.next_try)
                ));
            }
            Ok(columns(&rows))
        }
        BlockOperation::Info { hash } => {
            let h = parse_hash(&hash)?;
            let rc = m.rc.get(&h).map_err(|e| e.to_string())?;
            let stored = m.store.find(&h);
            let mut out = String::new();
            let _ = writeln!(out, "Block hash:        {}", h.hex());
            let _ = writeln!(out, "Reference count:   {:?}", rc);
            match stored {
                Some((path, compressed)) => {
                    let _ = writeln!(
                        out,
                        "Stored here:       {} ({})",
                        path.display(),
                        if compressed { "zstd" } else { "plain" }
                    );
                }
                None => {
                    let _ = writeln!(out, "Stored here:       no");
                }
            }
            Ok(out)
        }
        BlockOperation::RetryNow { all, blocks } => {
            let hashes: Vec<Hash> = if all {
                m.resync_errors()
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .map(|(h, _)| h)
                    .collect()
            } else if blocks.is_empty() {
                return Err("give block hashes, or --all".into());
            } else {
                blocks
                    .iter()
                    .map(|b| parse_hash(b))
                    .collect::<Result<_>>()?
            };
            for h in hashes.iter() {
                m.rc.resync_queue
                    .insert(queue_key(now_msec(), h), [])
                    .map_err(|e| e.to_string())?;
            }
            Ok(format!(
                "{} blocks queued for a resync now.\n",
                hashes.len()
            ))
        }
    }
}

pub async fn repair(m: &BlockManager, what: RepairWhat) -> Result<String> {
    match what {
        RepairWhat::Tables => Err("tables are repaired through AdminRpc::RepairTables".into()),
        RepairWhat::Blocks => {
            let mut n = 0;
            for item in m.rc.rc.iter() {
                let (k, _) = item.map_err(|e| e.to_string())?;
                if let Some(h) = Hash::try_from_slice(&k) {
                    m.rc.resync_queue
                        .insert(queue_key(now_msec(), &h), [])
                        .map_err(|e| e.to_string())?;
                    n += 1;
                }
            }
            Ok(format!("{n} blocks queued for a resync check.\n"))
        }
        RepairWhat::Rebalance => {
            let n = m.rebalance().await.map_err(|e| e.to_string())?;
            Ok(format!("{n} blocks moved to their data directory.\n"))
        }
        RepairWhat::Scrub(cmd) => {
            let mut st = m.scrub_state().map_err(|e| e.to_string())?;
            let msg = match cmd {
                ScrubCmd::Start => {
                    m.scrub_start().map_err(|e| e.to_string())?;
                    return Ok("Scrub started.\n".into());
                }
                ScrubCmd::Pause => {
                    st.paused = true;
                    "Scrub paused."
                }
                ScrubCmd::Resume => {
                    st.paused = false;
                    "Scrub resumed."
                }
                ScrubCmd::Cancel => {
                    st.running = false;
                    st.cursor = None;
                    "Scrub cancelled."
                }
                ScrubCmd::SetTranquility { tranquility } => {
                    st.tranquility = tranquility;
                    "Scrub tranquility set."
                }
            };
            m.set_scrub_state(&st).map_err(|e| e.to_string())?;
            Ok(format!("{msg}\n"))
        }
    }
}

/// `garage worker list | get | set`.
pub async fn worker(g: &crate::garage::Garage, op: WorkerOperation) -> Result<String> {
    use std::sync::atomic::Ordering;
    let m = &g.block_manager;
    match op {
        WorkerOperation::List => {
            let mut rows = vec!["Worker\tState\tQueue\tErrors".to_string()];
            for t in g.tables.iter() {
                let s = t.stats().map_err(|e| e.to_string())?;
                for (what, queue) in [
                    ("Merkle updater", s.merkle_todo),
                    ("GC", s.gc_todo),
                    ("insert queue", s.insert_queue),
                ] {
                    rows.push(format!(
                        "{} {what}\t{}\t{queue}\t",
                        s.name,
                        if queue > 0 { "busy" } else { "idle" }
                    ));
                }
                rows.push(format!("{} sync\tperiodic\t\t", s.name));
            }
            let queue = m.rc.resync_queue.len().map_err(|e| e.to_string())?;
            let errors = m.resync_errors().map_err(|e| e.to_string())?.len();
            let workers = m.resync_settings.workers.load(Ordering::Relaxed);
            for i in 0..workers {
                rows.push(format!(
                    "Block resync worker #{}\t{}\t{queue}\t{errors}",
                    i + 1,
                    if queue > 0 { "busy" } else { "idle" }
                ));
            }
            let sc = m.scrub_state().map_err(|e| e.to_string())?;
            let state = match (sc.running, sc.paused) {
                (true, true) => "paused".to_string(),
                (true, false) => format!("running ({} checked)", sc.checked),
                (false, _) => "idle".to_string(),
            };
            rows.push(format!("Block scrub worker\t{state}\t\t{}", sc.corrupted));
            Ok(columns(&rows))
        }
        WorkerOperation::Get { variable } => {
            let sc = m.scrub_state().map_err(|e| e.to_string())?;
            let vars = [
                (
                    "resync-tranquility",
                    m.resync_settings
                        .tranquility
                        .load(Ordering::Relaxed)
                        .to_string(),
                ),
                (
                    "resync-worker-count",
                    m.resync_settings
                        .workers
                        .load(Ordering::Relaxed)
                        .to_string(),
                ),
                ("scrub-tranquility", sc.tranquility.to_string()),
            ];
            let mut out = String::new();
            for (k, v) in vars.iter() {
                if variable.as_deref().is_none_or(|x| x == *k) {
                    let _ = writeln!(out, "{k}  {v}");
                }
            }
            if out.is_empty() {
                return Err(unknown_variable(variable.as_deref().unwrap_or("")));
            }
            Ok(out)
        }
        WorkerOperation::Set { variable, value } => {
            let n: u64 = value
                .parse()
                .map_err(|_| format!("{variable}: {value:?} is not a number"))?;
            match variable.as_str() {
                "resync-tranquility" => m
                    .resync_settings
                    .set_tranquility(n as u32)
                    .map_err(|e| e.to_string())?,
                "resync-worker-count" => m.resync_settings.set_workers(n as usize)?,
                "scrub-tranquility" => {
                    let mut sc = m.scrub_state().map_err(|e| e.to_string())?;
                    sc.tranquility = n as u32;
                    m.set_scrub_state(&sc).map_err(|e| e.to_string())?;
                }
                other => return Err(unknown_variable(other)),
            }
            Ok(format!("{variable} set to {n}.\n"))
        }
    }
}

fn unknown_variable(v: &str) -> String {
    format!(
        "unknown worker variable {v:?}: use resync-tranquility, resync-worker-count or scrub-tranquility"
    )
}
