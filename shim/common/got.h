/*
 * GOT patching: how a library of alloclens loaded into a process that is already running puts its
 * hooks in front of the allocator, where LD_PRELOAD is too late. Two users: the attach shim
 * (record --pid, shim/record/got.c) and the watch agent (watch --pid --profile,
 * shim/agent/got_hooks.c). Each gives its own hook table and says when a module dlopened by path
 * is patched at once; got.c does the rest, the same way for both.
 *
 * A module calls malloc through a slot of its global offset table: a JUMP_SLOT relocation (a call
 * through the PLT) or a GLOB_DAT one (the function's address taken, or -fno-plt code; glibc calls
 * its own malloc this way). Pointing those slots at the hooks routes every later call there; the
 * hooks call the allocator itself (resolved with RTLD_DEFAULT: the library is RTLD_LOCAL, so that
 * is never itself). The loader (it allocates TLS and its own data with the real malloc, and takes
 * its lock around what calls it) and alloclens's own libraries are left alone. A restore writes
 * back each slot that still holds a hook; the library itself stays loaded (a call may still be
 * inside a hook, and unloading injected libraries is what has crashed other tools' targets).
 *
 * Slots in RELRO pages (read-only once relocated) are made writable for the write and read-only
 * again. A slot is one aligned 8-byte store: a thread calling through it meanwhile takes the old
 * or the new function, never half of each. What is not seen: calls made directly (an allocator
 * linked into the executable), and a lazily bound slot that another thread was resolving at that
 * very moment (the loader writes the real function into it after the patch).
 */
#ifndef ALLOCLENS_GOT_H
#define ALLOCLENS_GOT_H

#include <stdint.h>

#define GOT_HIDDEN __attribute__((visibility("hidden")))

/* A symbol whose GOT slots get `hook`. Names starting with "free" or "_Zd" release memory. */
struct got_hook {
    const char *name;
    void *hook;
};

/* ------------------------------------------------ given by the library that links got.c */

/* Its hooks, with {"dlopen", got_dlopen_hook} among them to follow modules dlopened later. The
 * addresses must be the library's own definitions: take them through hidden names (a global
 * symbol of a library dlopened RTLD_LOCAL resolves to the program's definition first). */
GOT_HIDDEN extern const struct got_hook got_hooks[];
GOT_HIDDEN extern const unsigned got_hook_count;
/* Whether a module dlopened by path now is patched before the call returns (the library is
 * attached and its hooks are wanted). */
GOT_HIDDEN int got_patching_allowed(void);

/* ------------------------------------------------ got.c */

/* Resolves the real dlopen before any slot points at the hook. 0, or -1 when there is none. */
GOT_HIDDEN int got_init(void);
/* Points the slots of every loaded module but the loader and alloclens's own libraries at the
 * hooks: 0, or -1 when some module could not be patched (the reason is in `why`). Slots already
 * patched are left as they are, so it is called again after each dlopen. */
GOT_HIDDEN int got_patch(const char **why);
/* Puts back every slot still holding a hook, in the modules still loaded. */
GOT_HIDDEN void got_restore(void);
/* In a fork child: the lock is reset (its holder is not in the child). */
GOT_HIDDEN void got_after_fork(void);
/* Patches the modules loaded since the last look (dlpi_adds moved). */
GOT_HIDDEN void got_patch_new_modules(void);
/* Slots holding a hook now. */
GOT_HIDDEN uint32_t got_slots(void);
/* The dlopen hook: the real dlopen, then the new modules when got_patching_allowed(). */
GOT_HIDDEN void *got_dlopen_hook(const char *file, int mode);

#endif
