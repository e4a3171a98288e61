//! One source of truth for what C and Rust share: parses shim/record/include/alloclens_shim.h and checks
//! each constant against the Rust side (trace::Op tags, recorder::protocol).
use std::collections::HashMap;

use recorder::protocol as p;
use trace::Op;

fn header_constants() -> HashMap<String, u64> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shim/record/include/alloclens_shim.h"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        if parts.next() != Some("#define") {
            continue;
        }
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let digits = value.trim_end_matches('u');
        if let Ok(v) = digits.parse::<u64>() {
            out.insert(name.to_string(), v);
        }
    }
    out
}

#[test]
fn op_tags_match_the_trace_format() {
    let c = header_constants();
    let expected = [
        ("AL_OP_MALLOC", Op::Malloc),
        ("AL_OP_CALLOC", Op::Calloc),
        ("AL_OP_REALLOC", Op::Realloc),
        ("AL_OP_FREE", Op::Free),
        ("AL_OP_POSIX_MEMALIGN", Op::PosixMemalign),
        ("AL_OP_ALIGNED_ALLOC", Op::AlignedAlloc),
        ("AL_OP_MEMALIGN", Op::Memalign),
        ("AL_OP_VALLOC", Op::Valloc),
        ("AL_OP_PVALLOC", Op::Pvalloc),
        ("AL_OP_REALLOCARRAY", Op::Reallocarray),
        ("AL_OP_FREE_SIZED", Op::FreeSized),
        ("AL_OP_FREE_ALIGNED_SIZED", Op::FreeAlignedSized),
    ];
    assert_eq!(expected.len(), Op::ALL.len(), "every Op has a C tag");
    for (name, op) in expected {
        assert_eq!(c.get(name).copied(), Some(op as u64), "{name}");
    }
    let c_ops = c
        .keys()
        .filter(|k| {
            k.starts_with("AL_OP_")
                && !["AL_OP_SHIFT", "AL_OP_RING_OWNER", "AL_OP_HAS_STACK"].contains(&k.as_str())
        })
        .count();
    assert_eq!(c_ops, Op::ALL.len(), "no C op tag without a Rust Op");
    assert!(
        Op::from_tag(p::OP_RING_OWNER).is_none(),
        "the control tag is not an op"
    );
    // The stack flag sits above every op tag and is no op itself.
    assert!(Op::ALL.iter().all(|&op| (op as u8) & p::OP_HAS_STACK == 0));
    assert!(Op::from_tag(p::OP_HAS_STACK).is_none());
}

#[test]
fn layout_and_messages_match_the_protocol_module() {
    let c = header_constants();
    let pairs: [(&str, u64); 36] = [
        ("AL_PROTOCOL_VERSION", p::PROTOCOL_VERSION.into()),
        ("AL_OP_RING_OWNER", p::OP_RING_OWNER.into()),
        ("AL_OP_SHIFT", p::OP_SHIFT.into()),
        ("AL_RECORD_SIZE", p::RECORD_SIZE as u64),
        ("AL_RING_HEADER_BYTES", p::RING_HEADER_BYTES as u64),
        ("AL_RING_RECORDS", p::RING_RECORDS as u64),
        ("AL_RING_HEAD_OFFSET", p::RING_HEAD_OFFSET as u64),
        ("AL_RING_TAIL_OFFSET", p::RING_TAIL_OFFSET as u64),
        ("AL_PAGE_BYTES", p::PAGE_BYTES as u64),
        ("AL_PAGE_COUNTER_OFFSET", p::PAGE_COUNTER_OFFSET as u64),
        ("AL_PAGE_LOST_OFFSET", p::PAGE_LOST_OFFSET as u64),
        ("AL_MSG_HELLO", p::MSG_HELLO.into()),
        ("AL_MSG_RING", p::MSG_RING.into()),
        ("AL_MSG_MARK", p::MSG_MARK.into()),
        ("AL_MSG_END", p::MSG_END.into()),
        ("AL_MSG_STOPPED", p::MSG_STOPPED.into()),
        ("AL_MSG_EXEC", p::MSG_EXEC.into()),
        ("AL_MSG_STACKS", p::MSG_STACKS.into()),
        ("AL_STACKS_FREES", p::STACKS_FREES.into()),
        ("AL_OP_HAS_STACK", p::OP_HAS_STACK.into()),
        ("AL_ARENA_BYTES", p::ARENA_BYTES as u64),
        ("AL_ARENA_HEADER_BYTES", p::ARENA_HEADER_BYTES as u64),
        ("AL_ARENA_STACK", p::ARENA_STACK),
        ("AL_ARENA_MODULE", p::ARENA_MODULE),
        ("AL_MAX_STACK_DEPTH", p::MAX_STACK_DEPTH as u64),
        ("AL_EXEC_BEFORE", p::EXEC_BEFORE.into()),
        ("AL_EXEC_SPAWNED", p::EXEC_SPAWNED.into()),
        ("AL_EXEC_FAILED", p::EXEC_FAILED.into()),
        ("AL_EXEC_ENV_PRELOAD", p::EXEC_ENV_PRELOAD.into()),
        ("AL_EXEC_ENV_SOCKET", p::EXEC_ENV_SOCKET.into()),
        ("AL_END_EXIT", p::END_EXIT.into()),
        ("AL_END__EXIT", p::END_QUICK_EXIT.into()),
        ("AL_MAX_MESSAGE", p::MAX_MESSAGE as u64),
        ("AL_MAX_LABEL", p::MAX_LABEL as u64),
        ("AL_RING_RECORDS", p::RING_RECORDS as u64),
        ("AL_RECORD_SIZE", 32),
    ];
    for (name, v) in pairs {
        assert_eq!(c.get(name).copied(), Some(v), "{name}");
    }
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shim/record/include/alloclens_shim.h"
    ))
    .unwrap();
    assert!(text.contains(&format!("#define AL_ENV_SOCKET \"{}\"", p::ENV_SOCKET)));
    assert!(text.contains(&format!("#define AL_ENV_STACKS \"{}\"", p::ENV_STACKS)));
    assert!(text.contains(&format!(
        "#define AL_ENV_FREE_STACKS \"{}\"",
        p::ENV_FREE_STACKS
    )));
    assert!(text.contains(&format!(
        "#define AL_ENV_STACK_SAMPLE \"{}\"",
        p::ENV_STACK_SAMPLE
    )));
}

/// The struct sizes the Rust parser assumes, measured by compiling the header.
#[test]
fn struct_sizes_match_when_compiled() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("sizes.c");
    std::fs::write(
        &src,
        r#"#include <stdio.h>
#include <stddef.h>
#include "alloclens_shim.h"
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(struct al_record), sizeof(struct al_msg_hdr),
           sizeof(struct al_hello), sizeof(struct al_ring_msg), sizeof(struct al_mark),
           sizeof(struct al_end), offsetof(struct al_hello, proc_start_ticks),
           sizeof(struct al_exec));
    return 0;
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("sizes");
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shim/record/include");
    let ok = std::process::Command::new("cc")
        .arg("-I")
        .arg(include)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    let out = std::process::Command::new(&exe).output().unwrap();
    let sizes: Vec<usize> = String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(
        sizes,
        [
            p::RECORD_SIZE,
            p::MSG_HDR_BYTES,
            p::HELLO_BYTES,
            p::RING_MSG_BYTES,
            p::MARK_BYTES,
            p::END_BYTES,
            16,
            p::EXEC_BYTES
        ]
    );
}
