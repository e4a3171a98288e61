// The interior pointers C++ keeps on purpose, which memcheck's heuristics (all on by default)
// take for start pointers, beside a lost and a possibly lost block:
//   array_root  -> 8 bytes into new Widget[3] (the count first)    still reachable (new[])
//   second_root -> the B part of a C : A, B, 16 bytes in            still reachable (multiple inheritance)
//   string_root -> a copy-on-write std::string (old ABI: build with
//                  -D_GLIBCXX_USE_CXX11_ABI=0), whose object points
//                  24 bytes into its representation                 both still reachable (std::string)
//   middle_root -> 40 bytes into new char[100]                      possibly lost
//   nothing     -> new Widget[2]                                    definitely lost
// No iostream: nothing else of the C++ runtime is allocated but its exception pool.
#include <string>

struct Widget {
    long value = 7;
    ~Widget() { value = 0; }
};

struct A {
    virtual ~A() {}
    long a = 1;
};
struct B {
    virtual ~B() {}
    long b = 2;
};
struct C : A, B {};

Widget *array_root;
B *second_root;
std::string *string_root;
char *middle_root;

__attribute__((noinline)) static void make_cases()
{
    array_root = new Widget[3];
    second_root = new C;
    string_root = new std::string(100, 'x');
    middle_root = new char[100]() + 40;
    Widget *lost = new Widget[2];
    (void)lost;
}

__attribute__((noinline)) static void clear_stack()
{
    volatile char zeros[16384];
    for (unsigned i = 0; i < sizeof zeros; i++)
        zeros[i] = 0;
}

int main()
{
    make_cases();
    clear_stack();
    return 0;
}
