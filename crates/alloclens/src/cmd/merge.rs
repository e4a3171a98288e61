//! `alloclens merge PATH... -o DATASET`: glue between the command line and `dataset::merge`
//! (docs/dataset.md).
use std::path::PathBuf;
use std::process::ExitCode;

use dataset::{merge, MergeOptions, Notice};

#[derive(clap::Args)]
pub struct Args {
    /// Results directories of run, run --ksm, replay, tune or watch, and traces of record
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The dataset: created when it does not exist (or is an empty directory), appended to when it
    /// is one; the same file or the same host's run merged again is skipped
    #[arg(short, long, value_name = "DATASET")]
    pub output: PathBuf,
    /// The host name of every PATH, instead of the one each records (a watch directory records
    /// none: required for it)
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = MergeOptions { host: args.host };
    let mut damaged = false;
    let summary = merge(&args.paths, &args.output, &options, &mut |notice| {
        match notice {
        Notice::Skipped {
            path,
            source_id,
            merged_at,
        } => eprintln!(
            "alloclens: skipped {}: already in the dataset (source {source_id}, merged {merged_at})",
            path.display()
        ),
        Notice::Damaged {
            path,
            calls,
            losses,
        } => {
            damaged = true;
            eprintln!(
                "alloclens: error: '{}' is damaged: merged its {calls} calls up to its last whole \
                 chunk ({losses})",
                path.display()
            );
        }
        Notice::Merged { .. } => {}
    }
    })?;
    eprintln!(
        "alloclens: merged {} source{} ({} rows) into {}{}",
        summary.merged,
        if summary.merged == 1 { "" } else { "s" },
        summary.rows,
        args.output.display(),
        match summary.skipped {
            0 => String::new(),
            n => format!(", {n} skipped (already in it)"),
        }
    );
    Ok(if damaged {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
