//! `garage block …`, `garage repair blocks|scrub …`, run by the daemon
//! that the CLI reached; each returns the text the CLI prints.

use std::fmt::Write;

use garage_block::manager::BlockManager;
use garage_block::rc::queue_key;
use garage_model::purge::{Purge, PurgeCount};
use garage_model::version_table::{read_version, VersionBacklink};
use garage_util::data::{Hash, Uuid};
use garage_util::time::now_msec;
use tracing::info;

use crate::admin::table::format as columns;
use crate::cli::{BlockOperation, RepairWhat, ScrubCmd, WorkerOperation};
use garage_model::garage::Garage;

type Result<T> = std::result::Result<T, String>;

pub fn parse_hash(s: &str) -> Result<Hash> {
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

pub async fn block(g: &Garage, op: BlockOperation) -> Result<String> {
    let m = &g.block_manager;
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
            let mut rows = vec!["Version\tBucket\tKey\tState".to_string()];
            for r in block_refs(g, &h).await? {
                let (bucket, key) = match &r.backlink {
                    Some(VersionBacklink::Object { bucket_id, key }) => {
                        (bucket_id.hex(), key.clone())
                    }
                    Some(VersionBacklink::MultipartUpload { upload_id }) => {
                        ("(multipart upload)".to_string(), upload_id.hex())
                    }
                    None => ("?".into(), "?".into()),
                };
                let state = match r.deleted {
                    Some(true) => "deleted",
                    Some(false) => "live",
                    None => "version not found",
                };
                rows.push(format!("{}\t{bucket}\t{key}\t{state}", r.version.hex()));
            }
            if rows.len() > 1 {
                let _ = writeln!(out, "\nReferenced by:");
                out.push_str(&columns(&rows));
            } else {
                let _ = writeln!(out, "Referenced by:     no live reference");
            }
            Ok(out)
        }
        BlockOperation::RetryNow { all, blocks } => {
            let n = retry_now(m, all, &blocks)?;
            Ok(format!("{n} blocks queued for a resync now.\n"))
        }
        BlockOperation::Purge { yes, blocks } => {
            if !yes {
                return Err("block purge deletes every object that uses these blocks: \
                            add --yes to confirm"
                    .into());
            }
            let hashes = blocks
                .iter()
                .map(|b| parse_hash(b))
                .collect::<Result<Vec<_>>>()?;
            let total = purge_blocks(g, &hashes).await?;
            let mut out = format!(
                "Purged {} blocks: {} versions deleted, {} objects deleted, {} multipart uploads aborted.\n",
                hashes.len(),
                total.versions,
                total.objects_deleted,
                total.uploads_aborted
            );
            if total.locked > 0 {
                out.push_str(&format!(
                    "{} versions were kept: their object lock forbids deleting them.\n",
                    total.locked
                ));
            }
            Ok(out)
        }
    }
}

/// A `block_ref` entry of a block and the version it names.
pub struct BlockRef {
    pub version: Uuid,
    /// What the version belongs to; none if the version is not found.
    pub backlink: Option<VersionBacklink>,
    /// Whether the version is deleted; none if it is not found.
    pub deleted: Option<bool>,
    /// Whether the `block_ref` entry itself is marked deleted.
    pub ref_deleted: bool,
}

/// The versions referencing a block (at most 1000).
pub async fn block_refs(g: &Garage, h: &Hash) -> Result<Vec<BlockRef>> {
    let refs = g
        .block_ref_table
        .get_range(h, None, None, 1000, false)
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(refs.len());
    for r in refs {
        let v = read_version(&g.version_table, &r.version)
            .await
            .map_err(|e| e.to_string())?;
        out.push(BlockRef {
            version: r.version,
            backlink: v.as_ref().map(|v| v.backlink.clone()),
            deleted: v.as_ref().map(|v| v.deleted.get()),
            ref_deleted: r.deleted.get(),
        });
    }
    Ok(out)
}

/// Queues blocks (every block in error with `all`) for a resync now;
/// returns how many.
pub fn retry_now(m: &BlockManager, all: bool, blocks: &[String]) -> Result<usize> {
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
    Ok(hashes.len())
}

/// Deletes every object version and upload that uses these blocks.
pub async fn purge_blocks(g: &Garage, hashes: &[Hash]) -> Result<PurgeCount> {
    let purge = Purge {
        objects: g.object_table.clone(),
        versions: g.version_table.clone(),
        block_refs: g.block_ref_table.clone(),
        mpus: g.mpu_table.clone(),
        history: g.history_table.clone(),
    };
    let mut total = PurgeCount::default();
    for h in hashes.iter() {
        let c = purge.purge_block(h).await.map_err(|e| e.to_string())?;
        info!(
            block = %h.hex(),
            "block purge: {} versions deleted, {} objects deleted, {} uploads aborted, {} locked versions kept",
            c.versions, c.objects_deleted, c.uploads_aborted, c.locked
        );
        total.versions += c.versions;
        total.objects_deleted += c.objects_deleted;
        total.uploads_aborted += c.uploads_aborted;
        total.locked += c.locked;
    }
    Ok(total)
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
pub async fn worker(g: &std::sync::Arc<Garage>, op: WorkerOperation) -> Result<String> {
    match op {
        WorkerOperation::List => {
            let mut rows = vec!["TID\tWorker\tState\tQueue\tErrors".to_string()];
            let stats = crate::admin_rpc::node_stats(g).await?;
            for (i, w) in workers(g, &stats)?.iter().enumerate() {
                rows.push(format!(
                    "{}\t{}\t{}\t{}\t{}",
                    i + 1,
                    w.name,
                    w.state,
                    w.queue.map(|q| q.to_string()).unwrap_or_default(),
                    w.errors.map(|q| q.to_string()).unwrap_or_default()
                ));
            }
            Ok(columns(&rows))
        }
        WorkerOperation::Info { tid } => {
            let stats = crate::admin_rpc::node_stats(g).await?;
            let all = workers(g, &stats)?;
            let Some(w) = tid.checked_sub(1).and_then(|i| all.get(i)) else {
                return Err(format!(
                    "no worker {tid}: `garage worker list` numbers them from 1 to {}",
                    all.len()
                ));
            };
            let mut rows = vec![
                format!("Worker:\t{}", w.name),
                format!("State:\t{}", w.state),
            ];
            if let Some(q) = w.queue {
                rows.push(format!("Queue length:\t{q}"));
            }
            if let Some(e) = w.errors {
                rows.push(format!("Errors:\t{e}"));
            }
            for (k, v) in w.details.iter() {
                rows.push(format!("{k}:\t{v}"));
            }
            Ok(columns(&rows))
        }
        WorkerOperation::Get { variable } => {
            let mut out = String::new();
            for (k, v) in worker_variables(g, variable.as_deref())? {
                let _ = writeln!(out, "{k}  {v}");
            }
            Ok(out)
        }
        WorkerOperation::Set { variable, value } => {
            let n = set_worker_variable(g, &variable, &value)?;
            Ok(format!("{variable} set to {n}.\n"))
        }
    }
}

/// The tunable worker variables and their values (only `only`, if
/// given): `garage worker get` and GetWorkerVariable.
pub fn worker_variables(g: &Garage, only: Option<&str>) -> Result<Vec<(&'static str, String)>> {
    use std::sync::atomic::Ordering;
    let m = &g.block_manager;
    let sc = m.scrub_state().map_err(|e| e.to_string())?;
    let vars = vec![
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
    let out: Vec<_> = vars
        .into_iter()
        .filter(|(k, _)| only.is_none_or(|x| x == *k))
        .collect();
    if out.is_empty() {
        return Err(unknown_variable(only.unwrap_or("")));
    }
    Ok(out)
}

/// Sets a worker variable (`garage worker set`, SetWorkerVariable);
/// returns the value set.
pub fn set_worker_variable(g: &Garage, variable: &str, value: &str) -> Result<u64> {
    let m = &g.block_manager;
    let n: u64 = value
        .parse()
        .map_err(|_| format!("{variable}: {value:?} is not a number"))?;
    match variable {
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
    Ok(n)
}

/// One background worker as `worker list`, `worker info` and the admin
/// API show it.
pub struct WorkerRow {
    pub name: String,
    pub state: String,
    pub queue: Option<usize>,
    pub errors: Option<usize>,
    pub details: Vec<(&'static str, String)>,
}

fn busy(queue: usize) -> String {
    if queue > 0 { "busy" } else { "idle" }.to_string()
}

/// The node's workers, in a stable order (their TIDs, from 1), from
/// `stats` (read off the async runtime: `admin_rpc::node_stats`).
pub fn workers(g: &Garage, stats: &crate::admin_rpc::NodeStats) -> Result<Vec<WorkerRow>> {
    use std::sync::atomic::Ordering;
    let m = &g.block_manager;
    let mut out = Vec::new();
    for s in stats.tables.iter() {
        for (what, queue, doc) in [
            (
                "Merkle updater",
                s.merkle_todo,
                "applies entry changes to the table's Merkle tree",
            ),
            (
                "GC",
                s.gc_todo,
                "removes tombstones once every replica has them",
            ),
            (
                "insert queue",
                s.insert_queue,
                "sends entries queued by other tables' hooks",
            ),
        ] {
            out.push(WorkerRow {
                name: format!("{} {what}", s.name),
                state: busy(queue),
                queue: Some(queue),
                errors: None,
                details: vec![
                    ("Does", doc.to_string()),
                    ("Table items", s.items.to_string()),
                ],
            });
        }
        out.push(WorkerRow {
            name: format!("{} sync", s.name),
            state: "periodic".into(),
            queue: None,
            errors: None,
            details: vec![
                (
                    "Does",
                    "compares Merkle trees with the other replicas and sends what they lack".into(),
                ),
                ("Merkle digest", s.merkle_digest.hex()),
            ],
        });
    }
    let (queue, errors) = (stats.resync_queue, stats.resync_errors);
    let n = m.resync_settings.workers.load(Ordering::Relaxed);
    let tranquility = m.resync_settings.tranquility.load(Ordering::Relaxed);
    for i in 0..n {
        out.push(WorkerRow {
            name: format!("Block resync worker #{}", i + 1),
            state: busy(queue),
            queue: Some(queue),
            errors: Some(errors),
            details: vec![
                (
                    "Does",
                    "fetches referenced blocks missing here, deletes unreferenced ones".into(),
                ),
                ("resync-tranquility", tranquility.to_string()),
                ("resync-worker-count", n.to_string()),
            ],
        });
    }
    let sc = m.scrub_state().map_err(|e| e.to_string())?;
    let state = match (sc.running, sc.paused) {
        (true, true) => "paused".to_string(),
        (true, false) => format!("running ({} checked)", sc.checked),
        (false, _) => "idle".to_string(),
    };
    out.push(WorkerRow {
        name: "Block scrub worker".into(),
        state,
        queue: None,
        errors: Some(sc.corrupted as usize),
        details: vec![
            ("Does", "reads every block file and checks its hash".into()),
            ("scrub-tranquility", sc.tranquility.to_string()),
            ("Blocks checked in this pass", sc.checked.to_string()),
            ("Corrupted blocks found", sc.corrupted.to_string()),
            (
                "Last complete pass",
                sc.last_completed.map(ago).unwrap_or_else(|| "never".into()),
            ),
            (
                "Cursor",
                sc.cursor.map(|c| c.hex()).unwrap_or_else(|| "start".into()),
            ),
        ],
    });
    Ok(out)
}

fn unknown_variable(v: &str) -> String {
    format!(
        "unknown worker variable {v:?}: use resync-tranquility, resync-worker-count or scrub-tranquility"
    )
}
