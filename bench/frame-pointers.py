#!/usr/bin/env python3
# Which modules (x86-64 ELF executables and shared libraries) keep frame pointers: for every
# function listed in the module's .eh_frame_hdr search table, does its code start with the
# frame-pointer prologue ([endbr64] push %rbp, then mov %rsp,%rbp within the next 15 bytes, as
# the compiler schedules it)? Prints the share of functions per module: a module built with
# -fno-omit-frame-pointer shows nearly all of its compiled functions (the C runtime's few
# start-up functions have none), one built without a few percent (hand-written assembly).
# Usage: bench/frame-pointers.py MODULE...   (e.g. the files `ldd PROGRAM` lists)
import struct, sys
def check(path):
    data = open(path, 'rb').read()
    if data[:4] != b'\x7fELF': return None
    phoff, = struct.unpack_from('<Q', data, 0x20); phentsize, phnum = struct.unpack_from('<HH', data, 0x36)
    loads = []; hdr = None
    for i in range(phnum):
        p_type, p_flags, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from('<IIQQQQQQ', data, phoff + i*phentsize)
        if p_type == 1: loads.append((p_vaddr, p_offset, p_filesz))
        if p_type == 0x6474e550: hdr = (p_vaddr, p_offset)
    if hdr is None: return None
    def off(va):
        for v, o, sz in loads:
            if v <= va < v + sz: return o + va - v
    vaddr, o = hdr
    version, ptr_enc, cnt_enc, tab_enc = data[o:o+4]
    assert tab_enc == 0x3b and cnt_enc == 0x03, (path, hex(tab_enc))
    # eh_frame_ptr (encoded per ptr_enc, usually sdata4 pcrel = 4 bytes), then fde_count udata4
    n, = struct.unpack_from('<I', data, o + 8)
    fp = total = 0
    for k in range(n):
        loc, fde = struct.unpack_from('<ii', data, o + 12 + 8*k)
        va = vaddr + loc; fo = off(va)
        if fo is None: continue
        code = data[fo:fo+24]
        if code[:4] == b'\xf3\x0f\x1e\xfa': code = code[4:]
        total += 1
        if code[:1] == b'\x55' and b'\x48\x89\xe5' in code[1:16]: fp += 1
    return fp, total
for path in sys.argv[1:]:
    r = check(path)
    if r is None: print(f'{path}: no .eh_frame_hdr'); continue
    fp, total = r
    print(f'{fp*100/max(total,1):6.1f} % of {total:6d} functions  {path}')
