/*
 * tollgate — entry point placeholder; the commands arrive with the exit.
 */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
        if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
                puts("usage: tollgate <command> [--config FILE]");
                return 0;
        }
        fputs("tollgate: no command given (try --help)\n", stderr);
        return 2;
}
