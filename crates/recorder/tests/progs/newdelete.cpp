// C++ new/delete reach malloc/free. Prints the number of objects it allocated.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

struct Blob {
    char bytes[2101];
};

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::atol(argv[1]) : 100;
    for (long i = 0; i < n; i++) {
        Blob *b = new Blob();
        delete b;
        char *a = new char[2102];
        delete[] a;
    }
    std::printf("newdelete done %ld\n", n);
    return 0;
}
