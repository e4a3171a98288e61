// A C++ namespace::method and a template for crates/symbols/tests/resolve.rs (see captured_sites.c).
#include <cstdio>

static void *return_addresses[8];
static int captured;

extern "C" __attribute__((noinline)) void capture() {
    return_addresses[captured++] = __builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
}

namespace ns {
struct Widget {
    int value = 0;
    __attribute__((noinline)) void build(int k);
};

void Widget::build(int k) {
    capture();
    __asm__ volatile("" ::: "memory");
    value += k;
}

template <typename T> __attribute__((noinline)) void fill(T) {
    capture();
    __asm__ volatile("" ::: "memory");
}
} // namespace ns

int main() {
    ns::Widget w;
    w.build(3);
    ns::fill<long>(7L);
    for (int i = 0; i < captured; i++)
        std::printf("ra %p\n", return_addresses[i]);
    std::FILE *maps = std::fopen("/proc/self/maps", "r");
    char line[4096];
    while (maps && std::fgets(line, sizeof line, maps))
        std::printf("map %s", line);
    return w.value == 3 ? 0 : 1;
}
