//! `garage convert-db`: copies a metadata database into another engine (or
//! into a fresh, compacted copy of the same engine). Run it with garage
//! stopped.

use anyhow::{bail, Context};
use garage_db::{Engine, OpenOptions};
use garage_util::config::parse_size;

use crate::args::ConvertDbOpt;

/// Entries copied per output transaction.
const BATCH: usize = 1000;

pub fn run(c: &ConvertDbOpt) -> anyhow::Result<()> {
    let input_engine: Engine = c
        .input_engine
        .parse()
        .context("-a (input engine) is wrong")?;
    let output_engine: Engine = c
        .output_engine
        .parse()
        .context("-b (output engine) is wrong")?;
    if c.input_path == c.output_path {
        bail!("-i and -o name the same path: the output must be a new database");
    }
    if !input_engine.exists_at(&c.input_path) {
        bail!(
            "-i: no {input_engine} database at {} (give the database itself: <metadata_dir>/{} )",
            c.input_path.display(),
            input_engine.db_path(std::path::Path::new("")).display()
        );
    }
    if c.output_path.exists() {
        bail!(
            "-o: {} already exists; remove it or choose another path (convert-db never merges into an existing database)",
            c.output_path.display()
        );
    }
    let lmdb_map_size = match &c.lmdb_map_size {
        Some(s) => parse_size(s).map_err(|e| anyhow::anyhow!("--lmdb-map-size: {e}"))?,
        None => garage_db::lmdb_adapter::DEFAULT_MAP_SIZE,
    };

    let input = garage_db::open(
        input_engine,
        &c.input_path,
        &OpenOptions {
            create: false,
            lmdb_map_size,
            lmdb_write_map: false,
            fsync: false,
        },
    )
    .with_context(|| format!("cannot open input database {}", c.input_path.display()))?;
    let output = garage_db::open(
        output_engine,
        &c.output_path,
        &OpenOptions {
            create: true,
            lmdb_map_size,
            lmdb_write_map: false,
            fsync: true,
        },
    )
    .with_context(|| format!("cannot create output database {}", c.output_path.display()))?;
    let (trees, entries) = garage_db::copy_all(&input, &output, BATCH)
        .context("copy failed; the output database is incomplete: remove it before retrying")?;
    println!(
        "Converted {trees} trees, {entries} entries: {input_engine} database {} -> {output_engine} database {}",
        c.input_path.display(),
        c.output_path.display()
    );
    Ok(())
}
