//! The replay's speed without the whole CLI (bench/replay-speed.sh builds this in release; it is
//! lighter to build than alloclens): its own driver, and the churn workload run natively.
//!
//! - `replay_speed TRACE SPEC,... [--touch pages|none] [--repeat N]`: each variant replayed
//!   `--serial` without the agent, one line `variant calls WALL_RATE/CPU_RATE...` per variant;
//! - `replay_speed churn OPS`: the churn workload, one line `calls seconds`;
//! - `replay_speed replay-driver --plan-fd N`: the driver (what the replays start).
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("replay-driver") => std::process::exit(replay::driver_main(&args[1..])),
        Some("churn") => {
            let opts = workloads::churn::ChurnOptions {
                ops: args
                    .get(1)
                    .and_then(|a| a.parse().ok())
                    .unwrap_or(3_000_000),
                ..Default::default()
            };
            let s = workloads::churn::run(&opts, &mut std::io::sink()).expect("churn runs");
            println!("{} {}", s.allocator_calls, s.elapsed.as_secs_f64());
        }
        Some(trace) => {
            let specs = args.get(1).expect("usage: replay_speed TRACE SPEC,...");
            let mut touch = replay::Touch::Pages;
            let mut repeats = 1;
            let mut rest = args[2..].iter();
            while let Some(a) = rest.next() {
                match (a.as_str(), rest.next().map(String::as_str)) {
                    ("--touch", Some("none")) => touch = replay::Touch::None,
                    ("--touch", Some("all")) => touch = replay::Touch::All,
                    ("--repeat", Some(n)) => repeats = n.parse().expect("a number"),
                    _ => {}
                }
            }
            let options = replay::ReplayOptions {
                serial: true,
                touch,
                allocator_stats: false,
                ..Default::default()
            };
            let r = replay::Replay::open(Path::new(trace), &options).expect("the trace opens");
            for spec in allocators::split_variant_list(specs) {
                let v = allocators::parse_variant(&spec).expect("a valid variant");
                let rates: Vec<String> = (0..repeats)
                    .map(|i| {
                        let out = r.run(&v, i, &mut |_, _| {}).expect("the driver starts");
                        if out.ok {
                            // Wall rate (the driver's clock) and CPU rate (calls over the replay
                            // process's user + system time: steadier on a loaded machine).
                            let cpu = (out.user_s + out.sys_s).max(1e-9);
                            format!("{:.0}/{:.0}", out.calls_per_s, out.calls as f64 / cpu)
                        } else {
                            out.ending
                        }
                    })
                    .collect();
                println!("{} {} {}", v.label, r.calls(), rates.join(" "));
            }
        }
        None => eprintln!("usage: replay_speed TRACE SPEC,... | churn OPS | replay-driver ..."),
    }
}
