//! The `garage` binary: the daemon (`garage server`) and its admin CLI.
//!
//! This crate sits at the top of the workspace and may depend on every other
//! garage crate; nothing depends on it.

mod args;
mod cli;
mod convert_db;
mod gauges;
mod load_config;
mod logging;
mod offline_repair;
mod rpc_addr;
mod server;
mod single;
mod telemetry;

use std::process::ExitCode;

use clap::Parser;

use args::{Command, Opt};

fn init_logging(cmd: &Command) {
    let (default, traces) = match cmd {
        Command::Server { .. } => ("info", true),
        _ => ("warn", false),
    };
    logging::init(default, traces);
}

fn run_admin(opt: &Opt) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(cli::run(opt))
}

fn main() -> ExitCode {
    let opt = Opt::parse();
    init_logging(&opt.cmd);
    let res = match &opt.cmd {
        Command::Server { .. } => server::run(&opt),
        Command::ConvertDb(c) => convert_db::run(c),
        Command::OfflineRepair(o) => offline_repair::run(&opt, o),
        Command::Status
        | Command::Node(_)
        | Command::Layout(_)
        | Command::Bucket(_)
        | Command::Key(_)
        | Command::Stats { .. }
        | Command::Repair(_)
        | Command::Block(_)
        | Command::Meta(_)
        | Command::AdminToken(_)
        | Command::Kms(_)
        | Command::Topic(_)
        | Command::Remote(_)
        | Command::Iam { .. }
        | Command::Upgrade(_)
        | Command::JsonApi { .. }
        | Command::Worker(_) => run_admin(&opt),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
