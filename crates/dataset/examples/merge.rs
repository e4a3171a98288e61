//! `merge PATH... -o DATASET [--host NAME]`: the library's merge without the CLI, for
//! bench/merge-scale.sh (a release build of this is far lighter than of the whole alloclens). The
//! same code `alloclens merge` runs; prints the same summary line.
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut paths, mut out, mut host) = (Vec::new(), None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-o" => out = args.next().map(PathBuf::from),
            "--host" => host = args.next(),
            _ => paths.push(PathBuf::from(a)),
        }
    }
    let out = out.expect("usage: merge PATH... -o DATASET [--host NAME]");
    let options = dataset::MergeOptions { host };
    match dataset::merge(&paths, &out, &options, &mut |n| {
        if let dataset::Notice::Skipped { path, .. } = n {
            eprintln!("merge: skipped {}", path.display());
        }
    }) {
        Ok(s) => eprintln!(
            "alloclens: merged {} source{} ({} rows) into {}",
            s.merged,
            if s.merged == 1 { "" } else { "s" },
            s.rows,
            out.display()
        ),
        Err(e) => {
            eprintln!("merge: error: {e}");
            std::process::exit(1);
        }
    }
}
