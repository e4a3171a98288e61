/*
 * The heap profile table: the file the agent's sampler keeps (ALLOCLENS_PROFILE_BYTES set), mapped
 * shared, so that alloclens reads it from outside while the program runs and after it died
 * (SIGKILL, an OOM kill: the pages are the file's). Its reader is crates/profiles/src/table.rs;
 * docs/profile.md describes it. Everything is little-endian, at fixed offsets; the file's size is
 * fixed when it is made (AG_PROF_FILE_BYTES, sparse): the table never grows, whatever the program.
 *
 *   offset 0            header (struct ag_prof_header, AG_PROF_HEADER_BYTES)
 *   buckets_off         the live blocks' keys: bucket_count buckets of AG_PROF_BUCKET_KEYS
 *                       addresses (one cache line each; 0 = empty). Writers' index only.
 *   entries_off         bucket_count * AG_PROF_BUCKET_KEYS entries (struct ag_prof_live), entry i
 *                       for key i: the live sampled blocks
 *   index_off           index_slots 8-byte slots: (stack hash >> 32) << 32 | stack offset / 8;
 *                       0 = empty. Every stored stack but the one at offset 0 is in it.
 *   stacks_off          stacks_bytes of stack records (struct ag_prof_stack + frames), each at an
 *                       8-byte aligned offset from stacks_off; the record at offset 0 is the empty
 *                       stack of samples whose stack could not be taken or stored
 *   modules_off         modules_bytes of module records (struct ag_prof_module), one after the
 *                       other, written by the agent thread only; a record whose `bytes` is 0 ends
 *                       the list
 *
 * Readers never lock: a live entry is read under its sequence number (odd while written: read
 * seq, the fields, seq again, keep the entry if both are even, equal, and addr is not 0); a stack
 * record's `depth_commit` is 0 until its frames are written (release store), then depth + 1.
 */
#ifndef ALLOCLENS_PROFILE_TABLE_H
#define ALLOCLENS_PROFILE_TABLE_H

#include <stdint.h>

#define AG_PROF_MAGIC "ALPROF01" /* 8 bytes, no NUL */
#define AG_PROF_VERSION 1u

#define AG_PROF_HEADER_BYTES 4096u
#define AG_PROF_BUCKET_KEYS 8u
#define AG_PROF_BUCKETS 8192u                                       /* 65536 live entries */
#define AG_PROF_ENTRIES (AG_PROF_BUCKETS * AG_PROF_BUCKET_KEYS)
#define AG_PROF_INDEX_SLOTS 32768u /* linear probing, 64 probes at most */
#define AG_PROF_STACKS_BYTES (3u << 20)
#define AG_PROF_MODULES_BYTES (512u << 10)
#define AG_PROF_MAX_DEPTH 64u

#define AG_PROF_BUCKETS_OFF AG_PROF_HEADER_BYTES
#define AG_PROF_ENTRIES_OFF (AG_PROF_BUCKETS_OFF + AG_PROF_BUCKETS * AG_PROF_BUCKET_KEYS * 8u)
#define AG_PROF_INDEX_OFF (AG_PROF_ENTRIES_OFF + AG_PROF_ENTRIES * 32u)
#define AG_PROF_STACKS_OFF (AG_PROF_INDEX_OFF + AG_PROF_INDEX_SLOTS * 8u)
#define AG_PROF_MODULES_OFF (AG_PROF_STACKS_OFF + AG_PROF_STACKS_BYTES)
#define AG_PROF_FILE_BYTES (AG_PROF_MODULES_OFF + AG_PROF_MODULES_BYTES) /* 6.25 MiB */

/* state */
#define AG_PROF_RUNNING 1u
#define AG_PROF_EXITED 2u /* the image ended by exit (or exec'd another program): the final state */

struct ag_prof_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t file_bytes;
    /* Mean requested bytes between two sample points of a thread (the Poisson process of
     * `record --stacks`): an allocation of n bytes is sampled with p = 1 - exp(-n / sample_bytes). */
    uint64_t sample_bytes;
    uint32_t pid;
    uint32_t ppid;
    uint64_t start_unix_ns; /* CLOCK_REALTIME when the image's table was made */
    uint32_t max_depth;     /* frames kept per stack, innermost first */
    uint32_t state;         /* AG_PROF_RUNNING until the final update at exit */
    /* Layout (the AG_PROF_ constants, written out so a reader needs none). */
    uint64_t buckets_off;
    uint32_t bucket_count;
    uint32_t bucket_keys;
    uint64_t entries_off;
    uint32_t entry_count;
    uint32_t entry_bytes;
    uint64_t index_off;
    uint64_t index_slots;
    uint64_t stacks_off;
    uint64_t stacks_bytes;
    uint64_t modules_off;
    uint64_t modules_bytes;
    /* Changing figures (atomic; the agent thread's are renewed every agent interval). */
    uint64_t stacks_used;     /* bytes of the stack area reserved so far */
    uint64_t modules_used;    /* bytes of the module area written */
    uint64_t samples;         /* sampled allocations since the start */
    uint64_t live_entries;    /* entries holding a live block now */
    uint64_t dropped_live;    /* sampled blocks not tabled (both buckets full): in alloc_* only */
    uint64_t dropped_stacks;  /* sampled allocations filed under the empty stack: no room */
    uint64_t updated_unix_ns; /* the agent thread's last renewal of the figures below */
    /* Exact counts of the program's heap calls (the watch agent's counters), at updated_unix_ns:
     * every call, not sampled. Usable sizes for the live bytes, requested for `requested`. */
    uint64_t allocs;
    uint64_t frees;
    uint64_t live_blocks;
    uint64_t live_bytes;
    uint64_t requested;
    uint64_t rss;             /* the process's RSS at updated_unix_ns */
    char exe[1024];           /* /proc/self/exe when the table was made, NUL-terminated */
};

/* A live sampled block (32 bytes). */
struct ag_prof_live {
    uint32_t seq;   /* odd while its writer changes it */
    uint32_t stack; /* its stack record: offset in the stack area / 8 */
    uint64_t addr;  /* the block; 0 = the entry is free */
    uint64_t size;  /* requested bytes */
    uint64_t unix_ns; /* when it was allocated (CLOCK_REALTIME) */
};

/* A stack record; `depth` return addresses (uint64_t, innermost first) follow it. The sums are
 * doubles stored as their bits, added with compare-and-swap: the Horvitz-Thompson estimates of
 * what this stack allocated since the start (each sampled allocation of n bytes stands for 1/p
 * allocations), with their variance estimates. */
struct ag_prof_stack {
    uint32_t depth_commit; /* 0 while written, then depth + 1 */
    uint32_t reserved;
    uint64_t hash;
    uint64_t samples;          /* sampled allocations from this stack */
    uint64_t alloc_objects;    /* double: sum of 1/p */
    uint64_t alloc_space;      /* double: sum of n/p */
    uint64_t alloc_objects_var; /* double: sum of (1-p)/p^2 */
    uint64_t alloc_space_var;  /* double: sum of (1-p) n^2/p^2 */
};

/* A loaded object (one per dl_iterate_phdr entry with a file name, and the executable). */
struct ag_prof_module {
    uint32_t bytes;        /* the whole record, a multiple of 8; written last (release) */
    uint32_t build_id_len; /* bytes of GNU build-id after the record, padded to 8 */
    uint64_t start;        /* lowest address of its executable segments */
    uint64_t end;          /* highest, exclusive */
    uint64_t file_offset;  /* file offset of `start` */
    uint64_t bias;         /* load bias (dlpi_addr) */
    /* then the build-id, padded to 8; then the path, NUL-terminated, padded to 8 */
};

#endif
