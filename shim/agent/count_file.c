/*
 * The count file, <dir>/<pid>.count: one page of the program's memory that alloclens reads too
 * (MAP_SHARED), holding the shared slot and the slot of the program's first thread. While the
 * program runs on that one thread the agent has no thread of its own: snapshots are taken on the
 * program's thread at its heap calls (snapshot.c, ag_inline_tick), so a program that stops calling
 * the allocator stops renewing its snapshot; alloclens then reads this page to know whether the
 * last snapshot still holds every count (crates/agent, `count_file`).
 *
 * Layout (native byte order, little-endian on the machines alloclens runs on): bytes 0-7 the magic
 * "ALCOUNT1", 8-15 the image's id (the snapshot's `inline_image`), the shared slot at 128 and the
 * thread's slot at 256, each AG_SLOT_COUNTERS uint64_t counters (struct ag_slot's order: allocs,
 * frees, reallocs, blocks_in, blocks_out, bytes_in, bytes_out, requested, moved). The page is
 * written in full before it is mapped, so that a full disk cannot make a store fault (SIGBUS).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"

#define PAGE_BYTES 4096
#define SLOTS_OFF 128

static unsigned char *page; /* this image's (or this fork child's) mapping, or NULL */

AG_HIDDEN int ag_count_file_make(const char *path, uint64_t image)
{
    if (!path[0])
        return -1;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    static _Alignas(64) unsigned char first[PAGE_BYTES];
    memset(first, 0, sizeof first);
    memcpy(first, "ALCOUNT1", 8);
    memcpy(first + 8, &image, sizeof image);
    size_t done = 0;
    while (done < PAGE_BYTES) {
        ssize_t n = write(fd, first + done, PAGE_BYTES - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    void *m = done == PAGE_BYTES
                  ? mmap(NULL, PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    close(fd);
    if (m == MAP_FAILED) {
        unlink(path);
        return -1;
    }
    page = m;
    ag_slots_use_page((struct ag_slot *)(page + SLOTS_OFF));
    return 0;
}

/* In a fork child, first of all: the page is still the parent's file. It becomes private memory
 * at the same address (the slot list goes through it), with the counts it held. */
AG_HIDDEN void ag_count_file_leave_parent(void)
{
    if (page == NULL)
        return;
    static _Alignas(64) unsigned char copy[PAGE_BYTES];
    memcpy(copy, page, PAGE_BYTES);
    void *m = mmap(page, PAGE_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (m != MAP_FAILED)
        memcpy(page, copy, PAGE_BYTES);
    page = NULL;
}
