// C++ new and delete in each form. Under glibc they reach malloc and free; allocators such as
// tcmalloc define the operators themselves, and the shim interposes those too.
// Usage: newdelete ROUNDS [throw]. Prints the number of rounds it made.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

struct Blob {
    char bytes[2101];
};

struct alignas(64) Aligned {
    char bytes[2103]; // sizeof rounds up to 2112
};

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::atol(argv[1]) : 100;
    // A new that throws first (with "throw"; mimalloc aborts instead): the shim's guard must be
    // released on unwinding, or nothing after this would be recorded.
    if (argc > 2 && std::strcmp(argv[2], "throw") == 0) try {
        char *huge = new char[static_cast<std::size_t>(n) << 50];
        huge[0] = 1;
        std::printf("unexpected: %p\n", static_cast<void *>(huge));
    } catch (const std::bad_alloc &) {
    }
    for (long i = 0; i < n; i++) {
        Blob *b = new Blob();
        delete b; // sized delete in C++14 and later
        char *a = new char[2102];
        delete[] a;
        Aligned *x = new Aligned();
        delete x;
        char *q = new (std::nothrow) char[2104];
        ::operator delete[](q, std::nothrow);
    }
    std::printf("newdelete done %ld\n", n);
    return 0;
}
