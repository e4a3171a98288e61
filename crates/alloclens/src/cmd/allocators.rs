//! `alloclens allocators`: the known allocators, whether each is installed, where and which version.
use std::io::Write;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let all = allocators::discover();
    let mut out = super::stdout();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &all)?;
        writeln!(out)?;
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 4]> = all
        .iter()
        .map(|a| {
            let status = if a.installed {
                "installed".to_string()
            } else {
                "missing".to_string()
            };
            let library = match (&a.library, &a.package) {
                (Some(lib), _) => lib.display().to_string(),
                (None, Some(pkg)) if !a.installed => format!("apt-get install {pkg}"),
                (None, _) => "(built into libc)".to_string(),
            };
            [
                a.name.clone(),
                status,
                a.version.clone().unwrap_or_else(|| "?".into()),
                library,
            ]
        })
        .collect();
    let headers = [
        "allocator",
        "status",
        "version",
        "library (or how to install)",
    ];
    let mut widths = headers.map(str::len);
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cells: [&str; 4]| {
        format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        )
    };
    writeln!(out, "{}", line(headers))?;
    for r in &rows {
        writeln!(out, "{}", line([&r[0], &r[1], &r[2], &r[3]]))?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
