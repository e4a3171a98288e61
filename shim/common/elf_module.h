/*
 * What a module record says of a loaded object, read from its program headers in memory: the
 * range of its code and the GNU build-id. The record shim (shim/record/stacks.c) and the watch
 * agent's profile (shim/agent/profile.c) write them, so that pprof and alloclens match a frame's
 * module with its file.
 */
#ifndef ALLOCLENS_ELF_MODULE_H
#define ALLOCLENS_ELF_MODULE_H

#include <stdint.h>

#include <elf.h>
#include <link.h>
#include <string.h>

/* The range of its executable segments, [*start, *end) page-aligned at the start, and the file
 * offset of *start: return addresses are in code, and the loader may map another library in a
 * hole between one object's segments. Returns 0 for an object without code. */
static inline int elf_code_range(const struct dl_phdr_info *info, uint64_t *start, uint64_t *end,
                                 uint64_t *file_offset)
{
    uint64_t lo = UINT64_MAX, hi = 0, off = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo) {
            uint64_t pad = a & 4095;
            lo = a - pad;
            off = ph->p_offset - pad;
        }
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    *start = lo;
    *end = hi;
    *file_offset = off;
    return hi != 0;
}

/* The GNU build-id: its length (0: none), `*out` pointing at it. */
static inline size_t elf_build_id(const struct dl_phdr_info *info, const unsigned char **out)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *n;
            const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
            const unsigned char *next = desc + ((n->n_descsz + 3) & ~3u);
            if (next > end)
                break;
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && memcmp(name, "GNU", 4) == 0) {
                *out = desc;
                return n->n_descsz;
            }
            p = next;
        }
    }
    return 0;
}

#endif
