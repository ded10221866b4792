/*
 * tollgate-stub — placeholder.
 */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
        if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
                puts("usage: tollgate-stub [flags]");
                return 0;
        }
        fputs("tollgate-stub: no flags given (try --help)\n", stderr);
        return 2;
}
