//! The built-in single-node configuration made ready to use: on first
//! start the node gives itself a storage role and applies layout version
//! 1, and a key named `default` (allowed to create buckets) is created.
//! Every start prints the S3 endpoint and that key on standard output
//! (not in the log: the log never holds secrets).

use garage_model::helper::Metadata;
use garage_rpc::layout::NodeRole;
use garage_rpc::system::{LayoutUpdate, System};
use tracing::info;

/// The zone and capacity the single node gives itself.
const ZONE: &str = "dc1";
const CAPACITY: u64 = 100 << 30;
const KEY_NAME: &str = "default";

pub fn ensure_layout(system: &System) -> anyhow::Result<()> {
    let layout = system.layout();
    if !layout.current().roles.is_empty() {
        return Ok(());
    }
    let version = layout.current().version + 1;
    system.update_layout(LayoutUpdate::StageRoles(vec![(
        system.id(),
        Some(NodeRole {
            zone: ZONE.into(),
            capacity: Some(CAPACITY),
            tags: vec![],
        }),
    )]))?;
    system.update_layout(LayoutUpdate::Apply { version })?;
    info!("single node: layout version {version} applied (zone {ZONE}, capacity 100 GiB)");
    Ok(())
}

pub async fn ensure_key_and_print(
    metadata: &Metadata,
    endpoint: &str,
    region: &str,
) -> anyhow::Result<()> {
    let existing = metadata
        .list_keys()
        .await?
        .into_iter()
        .find(|k| k.name() == KEY_NAME);
    let key = match existing {
        Some(k) => k,
        None => {
            let k = metadata.create_key(KEY_NAME).await?;
            let k = metadata
                .update_key(&k, |k| {
                    if let Some(p) = k.params_mut() {
                        p.allow_create_bucket.update(true);
                    }
                })
                .await?;
            info!("single node: created access key {} ({KEY_NAME})", k.key_id);
            k
        }
    };
    let secret = key.params().map(|p| p.secret_key.as_str()).unwrap_or("");
    println!(
        "\nS3 endpoint: {endpoint} (region {region})\n\
         access key id: {}\n\
         secret access key: {secret}\n\
         e.g.: AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY={secret} AWS_DEFAULT_REGION={region} \
         aws --endpoint-url {endpoint} s3 mb s3://my-bucket\n",
        key.key_id, key.key_id
    );
    Ok(())
}
