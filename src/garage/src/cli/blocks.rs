//! `garage block …` and `garage worker …`: the node-local requests of
//! [`garage_admin::ops::node`] on the reached node, their answers printed.

use std::fmt::Write;

use anyhow::bail;

use super::{expect, Admin};
use crate::args::{BlockOperation, WorkerOperation};
use garage_admin::columns::format as columns;
use garage_admin::ops::node::{
    BlockVersionBacklink, GetBlockInfoRequest, GetWorkerInfoRequest, GetWorkerVariableRequest,
    ListWorkersRequest, NodeRequest as N, NodeResponse as A, RetryBlockResyncRequest,
    SetWorkerVariableRequest, WorkerInfo, WorkerState,
};

fn secs(ago: u64, ahead: u64) -> (String, String) {
    (format!("{ago}s ago"), format!("in {ahead}s"))
}

pub async fn block(admin: &Admin, op: &BlockOperation) -> anyhow::Result<()> {
    let out = match op {
        BlockOperation::ListErrors => {
            let errors = expect!(admin.node(N::ListBlockErrors).await?, A::BlockErrors(e) => e)?;
            let mut rows = vec!["Hash\tFailures\tLast try\tNext try".to_string()];
            for e in errors {
                let (last, next) = secs(e.last_try_secs_ago, e.next_try_in_secs);
                rows.push(format!(
                    "{}\t{}\t{last}\t{next}",
                    e.block_hash, e.error_count
                ));
            }
            columns(&rows)
        }
        BlockOperation::Info { hash } => {
            let req = N::GetBlockInfo(GetBlockInfoRequest {
                block_hash: hash.clone(),
            });
            let b = expect!(admin.node(req).await?, A::Block(b) => b)?;
            let mut out = String::new();
            let _ = writeln!(out, "Block hash:        {}", b.block_hash);
            let _ = writeln!(out, "Reference count:   {}", b.refcount);
            let _ = writeln!(
                out,
                "Stored here:       {}",
                b.stored_here.as_deref().unwrap_or("no")
            );
            let mut rows = vec!["Version\tBucket\tKey\tState".to_string()];
            for v in b.versions.iter() {
                let (bucket, key) = match &v.backlink {
                    Some(BlockVersionBacklink::Object { bucket_id, key }) => {
                        (bucket_id.clone(), key.clone())
                    }
                    Some(BlockVersionBacklink::Upload { upload_id }) => {
                        ("(multipart upload)".to_string(), upload_id.clone())
                    }
                    None => ("?".into(), "?".into()),
                };
                let state = match (v.garbage_collected, v.deleted) {
                    (true, _) => "version not found",
                    (false, true) => "deleted",
                    (false, false) => "live",
                };
                rows.push(format!("{}\t{bucket}\t{key}\t{state}", v.version_id));
            }
            if rows.len() > 1 {
                let _ = writeln!(out, "\nReferenced by:");
                out.push_str(&columns(&rows));
            } else {
                let _ = writeln!(out, "Referenced by:     no live reference");
            }
            out
        }
        BlockOperation::RetryNow { all, blocks } => {
            if !all && blocks.is_empty() {
                bail!("give block hashes, or --all");
            }
            let req = N::RetryBlockResync(RetryBlockResyncRequest {
                all: all.then_some(true),
                block_hashes: (!all).then(|| blocks.clone()),
            });
            let r = expect!(admin.node(req).await?, A::Retried(r) => r)?;
            format!("{} blocks queued for a resync now.\n", r.count)
        }
        BlockOperation::Purge { yes, blocks } => {
            if !yes {
                bail!(
                    "block purge deletes every object that uses these blocks: add --yes to confirm"
                );
            }
            let req = N::PurgeBlocks(blocks.clone());
            let p = expect!(admin.node(req).await?, A::Purged(p) => p)?;
            let mut out = format!(
                "Purged {} blocks: {} versions deleted, {} objects deleted, {} multipart uploads aborted.\n",
                p.blocks_purged, p.versions_deleted, p.objects_deleted, p.uploads_deleted
            );
            if p.versions_locked > 0 {
                let _ = writeln!(
                    out,
                    "{} versions were kept: their object lock forbids deleting them.",
                    p.versions_locked
                );
            }
            out
        }
    };
    print!("{out}");
    Ok(())
}

/// A worker's state in words.
fn state(w: &WorkerInfo) -> &'static str {
    match w.state {
        WorkerState::Busy => "busy",
        WorkerState::Throttled => "throttled",
        WorkerState::Idle => "idle",
        WorkerState::Paused => "paused",
    }
}

pub async fn worker(admin: &Admin, op: &WorkerOperation) -> anyhow::Result<()> {
    let out = match op {
        WorkerOperation::List => {
            let req = N::ListWorkers(ListWorkersRequest::default());
            let workers = expect!(admin.node(req).await?, A::Workers(w) => w)?;
            let mut rows = vec!["TID\tWorker\tState\tQueue\tErrors\tLast error".to_string()];
            for w in workers.iter() {
                rows.push(format!(
                    "{}\t{}\t{}\t{}\t{}\t{}",
                    w.id,
                    w.name,
                    state(w),
                    w.queue_length.map(|q| q.to_string()).unwrap_or_default(),
                    if w.errors > 0 {
                        format!("{} ({} in a row)", w.errors, w.consecutive_errors)
                    } else {
                        String::new()
                    },
                    w.last_error
                        .as_ref()
                        .map(|e| format!("{}s ago", e.secs_ago))
                        .unwrap_or_default(),
                ));
            }
            columns(&rows)
        }
        WorkerOperation::Info { tid } => {
            let req = N::GetWorkerInfo(GetWorkerInfoRequest { id: *tid as u64 });
            let w = expect!(admin.node(req).await?, A::Worker(w) => w)?;
            let mut rows = vec![
                format!("Worker:\t{}", w.name),
                format!("State:\t{}", state(&w)),
            ];
            if let Some(p) = &w.progress {
                rows.push(format!("Progress:\t{p}"));
            }
            if let Some(q) = w.queue_length {
                rows.push(format!("Queue length:\t{q}"));
            }
            rows.push(format!(
                "Errors:\t{} ({} in a row)",
                w.errors, w.consecutive_errors
            ));
            if let Some(e) = &w.last_error {
                rows.push(format!("Last error:\t{} ({}s ago)", e.message, e.secs_ago));
            }
            rows.push(format!("Does:\t{}", w.does));
            for d in w.details.iter() {
                rows.push(format!("{}:\t{}", d.name, d.value));
            }
            columns(&rows)
        }
        WorkerOperation::Get { variable } => {
            let req = N::GetWorkerVariable(GetWorkerVariableRequest {
                variable: variable.clone(),
            });
            let vars = expect!(admin.node(req).await?, A::Variables(v) => v)?;
            let mut out = String::new();
            for (k, v) in vars {
                let _ = writeln!(out, "{k}  {v}");
            }
            out
        }
        WorkerOperation::Set { variable, value } => {
            let req = N::SetWorkerVariable(SetWorkerVariableRequest {
                variable: variable.clone(),
                value: value.clone(),
            });
            let r = expect!(admin.node(req).await?, A::VariableSet(r) => r)?;
            format!("{} set to {}.\n", r.variable, r.value)
        }
    };
    print!("{out}");
    Ok(())
}
