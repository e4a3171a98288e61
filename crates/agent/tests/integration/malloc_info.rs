//! parse_malloc_info against this test process's own glibc heap: the free bytes and chunks of
//! malloc_info must be mallinfo2's (glibc computes both from the same bins), taken back to back
//! with nothing allocated in between.
use std::io::Read;

fn malloc_info_text() -> String {
    let mut tmp = tempfile::tempfile().unwrap();
    // SAFETY: dup'd descriptor handed to fdopen; the FILE is closed below.
    unsafe {
        use std::os::fd::AsRawFd;
        let fd = libc::dup(tmp.as_raw_fd());
        let f = libc::fdopen(fd, c"w".as_ptr());
        assert!(!f.is_null());
        assert_eq!(libc::malloc_info(0, f), 0);
        libc::fclose(f);
    }
    use std::io::Seek;
    tmp.seek(std::io::SeekFrom::Start(0)).unwrap();
    let mut s = String::new();
    tmp.read_to_string(&mut s).unwrap();
    s
}

/// mallinfo2 and malloc_info read back to back. The FILE is made (and allocates) before they
/// read the bins.
fn mallinfo2_and_malloc_info() -> (libc::mallinfo2, String) {
    let mut tmp = tempfile::tempfile().unwrap();
    // SAFETY: dup'd descriptor handed to fdopen; the FILE is closed below.
    unsafe {
        use std::os::fd::AsRawFd;
        let fd = libc::dup(tmp.as_raw_fd());
        let f = libc::fdopen(fd, c"w".as_ptr());
        assert!(!f.is_null());
        // A buffer big enough for the whole output: malloc_info's writes then allocate nothing.
        let mut buf = vec![0u8; 1 << 20];
        libc::setvbuf(f, buf.as_mut_ptr().cast(), libc::_IOFBF, buf.len());
        let m = libc::mallinfo2();
        assert_eq!(libc::malloc_info(0, f), 0);
        libc::fclose(f);
        drop(buf);
        use std::io::Seek;
        tmp.seek(std::io::SeekFrom::Start(0)).unwrap();
        let mut s = String::new();
        tmp.read_to_string(&mut s).unwrap();
        (m, s)
    }
}

#[test]
fn malloc_info_free_bytes_are_mallinfo2s() {
    // A fragmented heap: every other block freed, in two size ranges, plus a big mmapped block.
    let mut keep: Vec<Vec<u8>> = Vec::new();
    let mut drop_later = Vec::new();
    for i in 0..4000usize {
        let v = vec![i as u8; 24 + (i % 7) * 40 + (i % 3) * 900];
        if i % 2 == 0 {
            keep.push(v);
        } else {
            drop_later.push(v);
        }
    }
    drop(drop_later);
    let big = vec![1u8; 4 << 20];
    // Warm up: the FILE of the first call allocates; the figures come from the second.
    let _ = malloc_info_text();
    // The harness runs the crate's other tests on threads of this process: one that allocates
    // between the two reads moves the bins, so the reads are taken again (a few times at most)
    // until they saw the same bins; a parser that misreads them never agrees.
    let (m, text) = (0..5)
        .map(|_| mallinfo2_and_malloc_info())
        .find(|(m, text)| {
            let heap = agent::parse_malloc_info(text).unwrap();
            heap.fast_bytes + heap.rest_bytes == m.fordblks as u64
                && heap.fast_count + heap.rest_count == (m.ordblks + m.smblks) as u64
                && heap.mmap_bytes == m.hblkhd as u64
                && heap.system_current == m.arena as u64
        })
        .unwrap_or_else(mallinfo2_and_malloc_info);
    let heap = agent::parse_malloc_info(&text).unwrap();
    assert!(!heap.arenas.is_empty());
    assert_eq!(
        heap.fast_bytes + heap.rest_bytes,
        m.fordblks as u64,
        "{text}"
    );
    assert_eq!(
        heap.fast_count + heap.rest_count,
        (m.ordblks + m.smblks) as u64
    );
    assert_eq!(heap.mmap_bytes, m.hblkhd as u64);
    assert_eq!(heap.system_current, m.arena as u64);
    // Per arena sums are the totals.
    let arena_free: u64 = heap.arenas.iter().map(|a| a.free_bytes()).sum();
    assert_eq!(arena_free, heap.fast_bytes + heap.rest_bytes);
    // The size runs of an arena add up to at most its free bytes (the top chunk is in `rest`
    // but in no <size>).
    for a in &heap.arenas {
        let runs: u64 = a.sizes.iter().map(|s| s.total).sum();
        assert!(
            runs <= a.free_bytes(),
            "arena {}: {runs} > {}",
            a.index,
            a.free_bytes()
        );
    }
    // The test thread allocates in its own arena.
    assert!(
        heap.arenas.iter().any(|a| a.sizes.len() > 3),
        "a fragmented arena: {text}"
    );
    let stats = agent::glibc_stats(&heap, None);
    assert_eq!(stats.free_resident, Some(m.fordblks as u64));
    assert_eq!(stats.handed_out, Some((m.uordblks + m.hblkhd) as u64));
    drop((keep, big));
}
