//! What a reader of a replay's figures must not miss, one sentence each (printed on stderr as
//! `alloclens: warning:` and kept in results.json).
use crate::{ImageReplay, VariantReplay};

/// A replay's peak above this many times the original's is warned about...
const FAR_ABOVE: f64 = 4.0;
/// ...when it is also this much above it: a small heap's ratio says little (the driver's own
/// start is about 1.3 MiB).
const FAR_ABOVE_BYTES: u64 = 8 << 20;

/// Replays that did not end well, and replays whose peak is far above the original's (once per
/// variant).
pub fn replay_warnings(runs: &[VariantReplay], serial: bool) -> Vec<String> {
    let mut out = Vec::new();
    for r in runs.iter().filter(|r| !r.ok) {
        let why = r.images.iter().find_map(|i| i.error.clone());
        out.push(format!(
            "variant `{}` (repeat {}): the replay ended with {}{}",
            r.variant,
            r.repeat + 1,
            r.ending,
            why.map(|w| format!(": {w}")).unwrap_or_default()
        ));
    }
    let mut warned: Vec<&str> = Vec::new();
    for r in runs.iter().filter(|r| r.ok) {
        if warned.contains(&r.variant.as_str()) {
            continue;
        }
        if let Some(w) = r.images.iter().find_map(|i| far_above(r, i, serial)) {
            warned.push(&r.variant);
            out.push(w);
        }
    }
    out
}

/// The original's peak this image is held against: its heap (or anonymous memory) as the
/// recorder read it, else the most the program held live; and what it is.
fn reference(image: &ImageReplay) -> (u64, &'static str) {
    match &image.original_summary {
        Some(o) => match o.heap {
            Some(h) => (
                h.peak.max(image.figures.ideal_peak),
                "the original's heap peak",
            ),
            None => (o.anon.peak, "the original's anonymous peak"),
        },
        None => (image.figures.ideal_peak, "the most the program held live"),
    }
}

fn far_above(r: &VariantReplay, image: &ImageReplay, serial: bool) -> Option<String> {
    let peak = image.figures.peak_rss;
    let (reference, what) = reference(image);
    if (peak as f64) < FAR_ABOVE * reference as f64 || peak - reference < FAR_ABOVE_BYTES {
        return None;
    }
    let why = if image.threads > 1 && !serial {
        format!(
            "its {} threads ran at their own pace, not interleaved as in the original (each keeps its recorded order, so a thread that allocates can run ahead of the one that frees and blocks live longer): replay with --serial for the recorded order",
            image.threads
        )
    } else {
        "the allocator held far more than the program asked for, or --touch wrote pages the program never did (--touch none is the other bound)".to_string()
    };
    Some(format!(
        "variant `{}`: the replay's RSS peaked at {}, {:.0}x {what} ({}): {why}",
        r.variant,
        mib(peak),
        peak as f64 / reference.max(1) as f64,
        mib(reference),
    ))
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan_images;
    use crate::ReplayOptions;
    use testkit::{process_info, Calls, TraceFile};

    /// A replay of two threads whose RSS peak is `peak` where the program held 64 KiB live.
    fn replay_peaking_at(peak: u64) -> VariantReplay {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.alt");
        let mut calls = Calls::new();
        calls.malloc(0x10_000, 64 << 10);
        calls.on_thread(200).free(0x10_000);
        TraceFile::new()
            .process(process_info(1, "t"), calls.records)
            .write(&path);
        let mut reader = trace::TraceReader::open(&path).unwrap();
        let plan = plan_images(&mut reader, &ReplayOptions::default(), &mut Vec::new())
            .unwrap()
            .pop()
            .unwrap();
        let mut image = ImageReplay::of_plan(&plan);
        image.figures.peak_rss = peak;
        image.figures.ideal_peak = plan.ideal_peak;
        VariantReplay {
            variant: "glibc".into(),
            allocator: "glibc".into(),
            repeat: 0,
            ending: "ok".into(),
            ok: true,
            calls: 2,
            seconds: 0.0,
            calls_per_s: 0.0,
            user_s: 0.0,
            sys_s: 0.0,
            figures: image.figures.clone(),
            images: vec![image],
        }
    }

    /// xthread's replay peaked at 25.6 MiB for a 0.3 MiB heap without a word: a peak far above
    /// what the program held is explained (threads interleaved differently); a close one is not.
    #[test]
    fn a_peak_far_above_the_originals_is_explained() {
        let far = replay_warnings(&[replay_peaking_at(26 << 20)], false);
        assert_eq!(far.len(), 1, "{far:?}");
        assert!(far[0].contains("peaked at 26.0 MiB"), "{far:?}");
        assert!(
            far[0].contains("2 threads ran at their own pace"),
            "{far:?}"
        );
        let serial = replay_warnings(&[replay_peaking_at(26 << 20)], true);
        assert!(serial[0].contains("--touch none"), "{serial:?}");
        assert!(replay_warnings(&[replay_peaking_at(2 << 20)], false).is_empty());
    }
}
