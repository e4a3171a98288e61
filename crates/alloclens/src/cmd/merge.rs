//! `alloclens merge PATH... -o DATASET`: glue between the command line and `dataset::merge`
//! (docs/dataset.md).
use std::path::PathBuf;
use std::process::ExitCode;

use dataset::{merge, MergeOptions, Notice, SkipReason};

#[derive(clap::Args)]
pub struct Args {
    /// Results directories of run, run --ksm, replay, tune or watch, and traces of record
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The dataset: created when it does not exist (or is an empty directory), appended to when it
    /// is one; the same file or the same host's run merged again is skipped, unless the dataset
    /// holds a partial copy of it and this one is more complete: then it replaces that copy
    #[arg(short, long, value_name = "DATASET")]
    pub output: PathBuf,
    /// The host name of every PATH, instead of the one each records (a watch directory records
    /// none: required for it)
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let options = MergeOptions { host: args.host };
    let summary = merge(&args.paths, &args.output, &options, &mut print_notice)?;
    let mut after = Vec::new();
    if summary.replaced > 0 {
        after.push(format!("{} replacing a partial copy", summary.replaced));
    }
    if summary.skipped > 0 {
        after.push(format!("{} skipped", summary.skipped));
    }
    eprintln!(
        "alloclens: merged {} source{} ({} rows) into {}{}",
        summary.merged,
        if summary.merged == 1 { "" } else { "s" },
        summary.rows,
        args.output.display(),
        if after.is_empty() {
            String::new()
        } else {
            format!(", {}", after.join(", "))
        }
    );
    // A damaged source merged up to its damage is a warning, as in every command that reads one
    // (docs/cli.md#exit-status): the dataset holds what was readable and `losses` says the rest.
    Ok(ExitCode::SUCCESS)
}

fn print_notice(notice: Notice) {
    match notice {
        Notice::Skipped {
            path,
            source_id,
            merged_at,
            reason,
        } => eprintln!(
            "alloclens: skipped {}: {} (source {source_id}, merged {merged_at})",
            path.display(),
            match reason {
                SkipReason::AlreadyIn => "already in the dataset",
                SkipReason::LessComplete =>
                    "a partial copy of a run or recording the dataset holds more of",
            }
        ),
        Notice::Replaced {
            path,
            rows,
            replaced_id,
            replaced_rows,
            replaced_losses,
        } => eprintln!(
            "alloclens: replaced source {replaced_id} ({replaced_rows} rows; {replaced_losses}) \
             by {}, a more complete copy of the same run or recording ({rows} rows)",
            path.display()
        ),
        Notice::Damaged {
            path,
            calls,
            losses,
        } => eprintln!(
            "alloclens: warning: '{}' is damaged: merged its {calls} calls up to its last whole \
             chunk ({losses})",
            path.display()
        ),
        Notice::LinesLeftOut { path, losses } => {
            for loss in losses {
                eprintln!("alloclens: warning: '{}': {loss}", path.display());
            }
        }
        Notice::Cleaned { files } => eprintln!(
            "alloclens: removed {files} file{} an interrupted merge left in the dataset",
            if files == 1 { "" } else { "s" }
        ),
        Notice::Merged { .. } => {}
    }
}
