//! The built-in single-node configuration made ready to use: on first
//! start the node gives itself a storage role and applies layout version
//! 1, and a key named `default` (allowed to create buckets) is created.
//! Every start prints the S3 endpoint and that key on standard output
//! (not in the log: the log never holds secrets).
//!
//! `garage server --single-node` does the layout step with any
//! configuration file (replication_factor = 1), and `--default-bucket`
//! makes a key and a bucket from environment variables (as the reference
//! v2.3 does, for containers).

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

/// `--default-bucket`: the key and bucket named by the environment.
pub struct DefaultBucket {
    key_id: String,
    secret: String,
    bucket: String,
}

const ENV_KEY: &str = "GARAGE_DEFAULT_ACCESS_KEY";
const ENV_SECRET: &str = "GARAGE_DEFAULT_SECRET_KEY";
const ENV_BUCKET: &str = "GARAGE_DEFAULT_BUCKET";

impl DefaultBucket {
    pub fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str, what: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    anyhow::anyhow!("--default-bucket needs {name} ({what}) in the environment")
                })
        };
        Ok(Self {
            key_id: var(ENV_KEY, "an access key id: GK and 24 hex digits")?,
            secret: var(
                ENV_SECRET,
                "its secret: 64 hex digits, e.g. `openssl rand -hex 32`",
            )?,
            bucket: var(ENV_BUCKET, "the bucket's name")?,
        })
    }

    /// Makes the key (imported with the given secret) and the bucket if
    /// they do not exist, and gives the key read, write and owner
    /// permission on the bucket. A key of that id with another secret is
    /// an error (the environment and the cluster disagree).
    pub async fn ensure(&self, metadata: &Metadata) -> anyhow::Result<()> {
        use garage_model::permission::BucketKeyPerm;
        let key = match metadata.get_key(&self.key_id).await {
            Ok(k) if k.key_id == self.key_id => {
                let secret = k.params().map(|p| p.secret_key.as_str());
                if secret != Some(self.secret.as_str()) {
                    anyhow::bail!(
                        "access key {} exists with another secret than {ENV_SECRET}",
                        self.key_id
                    );
                }
                k
            }
            _ => {
                let k = metadata
                    .import_key(&self.key_id, &self.secret, "default")
                    .await
                    .map_err(|e| anyhow::anyhow!("{ENV_KEY}/{ENV_SECRET}: {e}"))?;
                info!("default bucket: imported access key {}", k.key_id);
                k
            }
        };
        let bucket = match metadata.resolve_global_alias(&self.bucket).await? {
            Some(id) => id,
            None => {
                let b = metadata
                    .create_bucket(&self.bucket)
                    .await
                    .map_err(|e| anyhow::anyhow!("{ENV_BUCKET}: {e}"))?;
                info!("default bucket: created bucket {}", self.bucket);
                b.id
            }
        };
        if key.bucket_permissions(&bucket) != BucketKeyPerm::ALL {
            metadata
                .set_permissions(bucket, &key.key_id, BucketKeyPerm::ALL)
                .await?;
        }
        info!(
            "default bucket {} ready for access key {}",
            self.bucket, key.key_id
        );
        Ok(())
    }
}
