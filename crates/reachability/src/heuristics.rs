//! memcheck's leak-check heuristics (`heuristic_reachedness` in `mc_leakcheck.c`, all four on
//! by default): interior pointers that C++ runtimes and a few libraries keep on purpose, counted
//! as pointers to the block's start.
use crate::classify::Marker;

const WORD: u64 = 8;
const PAGE: u64 = 4096;
/// Words of a candidate vtable looked at for two pointers to code (memcheck's
/// `VTABLE_MAX_CHECK`).
const VTABLE_MAX_CHECK: u64 = 20;

impl Marker<'_> {
    fn word(&mut self, at: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        (self.mem.read(at, &mut b) == 8).then(|| u64::from_ne_bytes(b))
    }

    /// Whether interior pointer `ptr` into block `(data, size)` is one a heuristic explains.
    pub(crate) fn heuristic_explains(&mut self, (data, size): (u64, u64), ptr: u64) -> bool {
        self.std_string(data, size, ptr)
            || self.length64(data, size, ptr)
            || self.new_array(data, size, ptr)
            || self.multiple_inheritance(data, ptr)
    }

    /// A copy-on-write `std::string` (the pre-C++11 libstdc++ ABI): `length, capacity,
    /// refcount, chars[capacity + 1]`, pointed to at its characters.
    fn std_string(&mut self, data: u64, size: u64, ptr: u64) -> bool {
        ptr == data + 3 * WORD
            && self.word(data + WORD).is_some_and(|capacity| {
                3 * WORD + capacity.wrapping_add(1) == size
                    && self.word(data).is_some_and(|length| length <= capacity)
            })
    }

    /// A block that starts with the length of the rest (sqlite's allocations).
    fn length64(&mut self, data: u64, size: u64, ptr: u64) -> bool {
        ptr == data + WORD && self.word(data).is_some_and(|n| n > 0 && size - WORD == n)
    }

    /// `new T[n]` of a `T` with a destructor: the count first, the pointer after it.
    fn new_array(&mut self, data: u64, size: u64, ptr: u64) -> bool {
        ptr == data + WORD
            && self
                .word(data)
                .is_some_and(|n| n > 0 && (size - WORD).is_multiple_of(n))
    }

    /// A pointer to a secondary base of an object: both it and the object's start hold a
    /// vtable pointer.
    fn multiple_inheritance(&mut self, data: u64, ptr: u64) -> bool {
        if !ptr.is_multiple_of(WORD) {
            return false;
        }
        let Some(inner) = self.word(ptr) else {
            return false;
        };
        if !inner.is_multiple_of(WORD) || inner < PAGE {
            return false;
        }
        let Some(first) = self.word(data) else {
            return false;
        };
        first.is_multiple_of(WORD)
            && first >= PAGE
            && self.is_vtable(inner)
            && self.is_vtable(first)
    }

    /// Whether `ptr`, inside block `(data, size)`, is glibc malloc's pointer to the next chunk's
    /// header (the arena's `top`, a bin), not a pointer of the program. A chunk's size field is
    /// the word before its data; the next chunk starts 16 bytes before the data plus that size,
    /// within the block's requested bytes when the block uses the next chunk's `prev_size` word.
    /// memcheck and LSan never see these: their own allocators replace the program's.
    pub(crate) fn is_chunk_header(&mut self, (data, size): (u64, u64), ptr: u64) -> bool {
        if !ptr.is_multiple_of(16) || data < 2 * WORD {
            return false;
        }
        let Some(field) = self.word(data - WORD) else {
            return false;
        };
        let chunk = field & !7;
        // A heap chunk holds the request and its size field, rounded up to 16 bytes.
        let plausible = chunk >= size + WORD && chunk <= size + WORD + 16;
        plausible && ptr == data - 2 * WORD + chunk
    }

    fn file_mapping(&self, addr: u64) -> Option<(u64, u64, bool)> {
        let i = self
            .file_mappings
            .partition_point(|&(s, _, _)| s <= addr)
            .checked_sub(1)?;
        let m = self.file_mappings[i];
        (addr < m.1).then_some(m)
    }

    /// memcheck's `aligned_ptr_above_page0_is_vtable_addr`: in a file's readable mapping, and
    /// among its first words, null or pointers to a file's code, at least two of the latter.
    fn is_vtable(&mut self, ptr: u64) -> bool {
        let Some((_, end, _)) = self.file_mapping(ptr) else {
            return false;
        };
        let last = (ptr + VTABLE_MAX_CHECK * WORD).min(end - WORD);
        let mut functions = 0;
        let mut at = ptr;
        while at <= last {
            let Some(f) = self.word(at) else { return false };
            at += WORD;
            if f == 0 {
                continue;
            }
            if !self.file_mapping(f).is_some_and(|m| m.2) {
                return false;
            }
            functions += 1;
            if functions == 2 {
                return true;
            }
        }
        false
    }
}
