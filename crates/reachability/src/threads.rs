//! A stopped thread's registers, read with ptrace by its tracer.
use std::io;

/// What the scan needs of a thread: its general registers (each a possible pointer), its stack
/// pointer, and its thread pointer (where its static TLS is), when known.
#[derive(Debug, Clone)]
pub struct Thread {
    pub tid: u32,
    pub registers: Vec<u64>,
    pub stack_pointer: u64,
    pub thread_pointer: Option<u64>,
}

/// `NT_PRSTATUS`: the general registers' regset.
const NT_PRSTATUS: libc::c_int = 1;

/// Index of the stack pointer and the thread pointer in the regset (`user_regs_struct`).
#[cfg(target_arch = "x86_64")]
const SP_AND_TP: (usize, Option<usize>) = (19, Some(21)); // rsp, fs_base
#[cfg(target_arch = "aarch64")]
const SP_AND_TP: (usize, Option<usize>) = (31, None); // sp; tpidr_el0 is another regset

/// The registers of `tid`, which the calling thread traces and holds in a ptrace stop.
pub fn read_thread(tid: u32) -> io::Result<Thread> {
    let mut regs = [0u64; 64];
    let mut iov = libc::iovec {
        iov_base: regs.as_mut_ptr().cast(),
        iov_len: std::mem::size_of_val(&regs),
    };
    // SAFETY: the kernel writes at most `iov_len` bytes into `regs` and shrinks `iov_len`.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            tid as libc::pid_t,
            NT_PRSTATUS as usize as *mut libc::c_void,
            &mut iov as *mut libc::iovec,
        )
    };
    if r == -1 {
        return Err(io::Error::last_os_error());
    }
    let registers = regs[..iov.iov_len / 8].to_vec();
    let (sp, tp) = SP_AND_TP;
    Ok(Thread {
        tid,
        stack_pointer: registers.get(sp).copied().unwrap_or(0),
        thread_pointer: tp.and_then(|tp| registers.get(tp).copied()),
        registers,
    })
}
