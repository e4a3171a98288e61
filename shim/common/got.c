/*
 * GOT patching, shared by the attach shim and the watch agent: got.h says what it does and why.
 * Compiled into each library (shim/common is on its include path); its state is that library's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "got.h"

/* Every slot patched since the library was loaded (a later attach patches the same slots again
 * and finds them here). Static: the table is written inside dlopen and after fork. */
#define MAX_SLOTS 16384
static struct {
    void **slot;
    void *original;
    int relro; /* its page is read-only but for the write */
} patched[MAX_SLOTS];
static uint32_t patched_count;
static uint32_t patched_live; /* slots holding a hook now */
static _Atomic int got_lock;
static unsigned long long loaded_adds; /* dlpi_adds at the last patch */
/* First letters of the hooks' names: most symbols are passed over on their first letter. */
static unsigned char first_letter[256];

static void lock(void)
{
    while (atomic_exchange_explicit(&got_lock, 1, memory_order_acquire))
        sched_yield();
}

static void unlock(void)
{
    atomic_store_explicit(&got_lock, 0, memory_order_release);
}

/* Whether a hook releases memory (free, delete): those slots go in first and come out last, so
 * that a block whose allocation a hook saw has its release seen too while attached (between two
 * slot writes a thread may see one hooked and not the other). */
static int releases(const char *name)
{
    return strncmp(name, "free", 4) == 0 || strncmp(name, "_Zd", 3) == 0;
}

static void *hook_for(const char *name, int want_releases)
{
    if (!first_letter[(unsigned char)name[0]])
        return NULL;
    for (unsigned i = 0; i < got_hook_count; i++)
        if (strcmp(name, got_hooks[i].name) == 0)
            return releases(name) == want_releases ? got_hooks[i].hook : NULL;
    return NULL;
}

/* 1 for a hook that releases memory, 0 for another hook, -1 for no hook. */
static int hook_kind(void *value)
{
    for (unsigned i = 0; i < got_hook_count; i++)
        if (got_hooks[i].hook == value)
            return releases(got_hooks[i].name);
    return -1;
}

/* Writes one slot, making its page writable meanwhile when it is a RELRO page. */
static int write_slot(void **slot, void *value, int relro)
{
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t page = (uintptr_t)slot & ~(page_size - 1);
    if (relro && mprotect((void *)page, page_size, PROT_READ | PROT_WRITE) != 0)
        return -1;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    if (relro)
        mprotect((void *)page, page_size, PROT_READ);
    return 0;
}

struct scan {
    uintptr_t self; /* an address in this library */
    uintptr_t loader_base;
    const char *why;
    int failed;
    unsigned long long adds; /* dlpi_adds: modules loaded so far */
    int releases;            /* this pass patches the releasing hooks (1) or the others (0) */
};

static int contains(const struct dl_phdr_info *info, uintptr_t addr)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && addr >= start && addr < start + ph->p_memsz)
            return 1;
    }
    return 0;
}

static int ours(const char *name)
{
    return strstr(name, "liballoclens_") != NULL || strstr(name, "/alloclens-attach-") != NULL ||
           strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0;
}

/* A pointer of the dynamic section: glibc has relocated most of them in place, other loaders and
 * read-only dynamic sections have not. */
static uintptr_t dyn_ptr(uintptr_t base, uintptr_t value)
{
    return value < base ? value + base : value;
}

static void patch_table(const ElfW(Rela) *rela, size_t bytes, uintptr_t base, const ElfW(Sym) *symtab,
                        const char *strtab, uintptr_t relro_start, uintptr_t relro_end,
                        struct scan *scan)
{
    for (size_t i = 0; i < bytes / sizeof *rela; i++) {
        unsigned type = ELF64_R_TYPE(rela[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
            continue;
        size_t sym = ELF64_R_SYM(rela[i].r_info);
        if (sym == 0)
            continue;
        void *hook = hook_for(strtab + symtab[sym].st_name, scan->releases);
        if (hook == NULL)
            continue;
        void **slot = (void **)(base + rela[i].r_offset);
        void *now = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (now == hook)
            continue; /* patched by an earlier call */
        if (patched_count == MAX_SLOTS) {
            scan->why = "too many GOT slots to patch";
            scan->failed = 1;
            return;
        }
        int relro = (uintptr_t)slot >= relro_start && (uintptr_t)slot < relro_end;
        if (write_slot(slot, hook, relro) != 0) {
            scan->why = "a GOT page could not be made writable (mprotect refused)";
            scan->failed = 1;
            continue;
        }
        patched[patched_count].slot = slot;
        patched[patched_count].original = now;
        patched[patched_count].relro = relro;
        patched_count++;
        patched_live++;
    }
}

static int patch_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct scan *scan = data;
    scan->adds = info->dlpi_adds;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (info->dlpi_addr == scan->loader_base || contains(info, scan->self) || ours(name))
        return 0;
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t relro_start = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
        else if (ph->p_type == PT_GNU_RELRO) {
            relro_start = info->dlpi_addr + ph->p_vaddr;
            relro_end = relro_start + ph->p_memsz;
        }
    }
    if (dyn == NULL)
        return 0;
    uintptr_t base = info->dlpi_addr;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmprel_bytes = 0, rela_bytes = 0;
    int plt_is_rela = 1;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(base, dyn->d_un.d_ptr); break;
        case DT_STRTAB: strtab = (const char *)dyn_ptr(base, dyn->d_un.d_ptr); break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_ptr(base, dyn->d_un.d_ptr); break;
        case DT_PLTRELSZ: jmprel_bytes = dyn->d_un.d_val; break;
        case DT_PLTREL: plt_is_rela = dyn->d_un.d_val == DT_RELA; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_ptr(base, dyn->d_un.d_ptr); break;
        case DT_RELASZ: rela_bytes = dyn->d_un.d_val; break;
        }
    }
    if (symtab == NULL || strtab == NULL)
        return 0;
    if (jmprel && plt_is_rela)
        patch_table(jmprel, jmprel_bytes, base, symtab, strtab, relro_start, relro_end, scan);
    if (rela)
        patch_table(rela, rela_bytes, base, symtab, strtab, relro_start, relro_end, scan);
    return 0;
}

GOT_HIDDEN int got_patch(const char **why)
{
    struct scan scan = {
        .self = (uintptr_t)&got_patch,
        .loader_base = (uintptr_t)getauxval(AT_BASE),
    };
    lock();
    scan.releases = 1;
    dl_iterate_phdr(patch_module, &scan);
    scan.releases = 0;
    dl_iterate_phdr(patch_module, &scan);
    loaded_adds = scan.adds;
    unlock();
    if (why)
        *why = scan.why;
    return scan.failed ? -1 : 0;
}

/* Whether the page holding `p` is mapped (a module unloaded since the patch is not). */
static int mapped(const void *p)
{
    uintptr_t page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    unsigned char vec;
    return mincore((void *)((uintptr_t)p & ~(page_size - 1)), 1, &vec) == 0 || errno != ENOMEM;
}

GOT_HIDDEN void got_restore(void)
{
    lock();
    for (int releasing = 0; releasing <= 1; releasing++) {
        for (uint32_t i = 0; i < patched_count; i++) {
            void **slot = patched[i].slot;
            if (mapped(slot) && hook_kind(__atomic_load_n(slot, __ATOMIC_ACQUIRE)) == releasing)
                write_slot(slot, patched[i].original, patched[i].relro);
        }
    }
    patched_count = 0;
    patched_live = 0;
    unlock();
}

GOT_HIDDEN void got_after_fork(void)
{
    atomic_store(&got_lock, 0); /* the only thread now: a lock another one held is void */
}

GOT_HIDDEN uint32_t got_slots(void)
{
    return patched_live;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

GOT_HIDDEN void got_patch_new_modules(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(count_adds, &adds);
    if (adds != loaded_adds)
        got_patch(NULL);
}

static void *(*real_dlopen)(const char *, int);

/* dlopen finds a bare name through its caller's RUNPATH, and knows its caller by its return
 * address: a bare name is passed on with a tail call (the caller stays the program's module), and
 * its module is patched by the library's thread at its next look (got_patch_new_modules). A path
 * (with a slash) is opened here and patched before the program's next call. */
GOT_HIDDEN void *got_dlopen_hook(const char *file, int mode)
{
    if (file == NULL || strchr(file, '/') == NULL)
        return real_dlopen(file, mode); /* -O2 makes it a jump: the caller stays the program's */
    void *handle = real_dlopen(file, mode);
    if (handle != NULL && got_patching_allowed())
        got_patch_new_modules();
    return handle;
}

GOT_HIDDEN int got_init(void)
{
    for (unsigned i = 0; i < got_hook_count; i++)
        first_letter[(unsigned char)got_hooks[i].name[0]] = 1;
    if (real_dlopen == NULL)
        real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_DEFAULT, "dlopen");
    return real_dlopen != NULL ? 0 : -1;
}
