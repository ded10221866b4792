/*
 * Replays a libFuzzer corpus without libFuzzer: every file in the directories
 * named on the command line is passed once to LLVMFuzzerTestOneInput. Used
 * when the project is built without TG_FUZZ so that the hostile inputs of the
 * corpus run on every build (gcc, sanitizer build included).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path)
{
        FILE *f = fopen(path, "rb");
        if (!f)
                return -1;
        uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        /* A heap copy of exactly n bytes so ASan sees reads past the end. */
        uint8_t *copy = malloc(n ? n : 1);
        if (!copy)
                return -1;
        memcpy(copy, buf, n);
        LLVMFuzzerTestOneInput(copy, n);
        free(copy);
        return 0;
}

int main(int argc, char **argv)
{
        int files = 0;
        for (int i = 1; i < argc; i++) {
                DIR *d = opendir(argv[i]);
                if (!d) {
                        fprintf(stderr, "replay: cannot open %s\n", argv[i]);
                        return 1;
                }
                struct dirent *e;
                while ((e = readdir(d)) != NULL) {
                        if (e->d_name[0] == '.')
                                continue;
                        char path[4096];
                        snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                        if (replay_file(path) == 0)
                                files++;
                }
                closedir(d);
        }
        printf("replayed %d inputs\n", files);
        return files > 0 ? 0 : 1;
}
