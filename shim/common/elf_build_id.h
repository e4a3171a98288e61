/*
 * The GNU build-id of a loaded object, read from its PT_NOTE segments in memory: what the record
 * shim (shim/record/stacks.c) and the watch agent's profile (shim/agent/profile.c) put in their
 * module records, so that pprof and alloclens match a frame's module with its file.
 */
#ifndef ALLOCLENS_ELF_BUILD_ID_H
#define ALLOCLENS_ELF_BUILD_ID_H

#include <elf.h>
#include <link.h>
#include <string.h>

/* Its length (0: none), `*out` pointing at it. */
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
