/* Every byte value, several times over, then a last line without a newline. */
#include <unistd.h>
int main(void) {
    unsigned char b[256 * 8];
    for (int i = 0; i < (int)sizeof b; i++) b[i] = (unsigned char)i;
    for (int r = 0; r < 4; r++) write(1, b, sizeof b);
    write(1, "last line", 9);
    return 0;
}
