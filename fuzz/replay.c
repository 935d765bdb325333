/*
 * replay.c - run a fuzz target over saved inputs, without libFuzzer (any compiler).
 *
 *   fuzz_ops_replay PATH...
 *
 * Each PATH is a file (one input) or a directory (every regular file in it, in name
 * order, not recursing). Each input is copied into a buffer of exactly its size, so that
 * a sanitizer catches a read past its end, and given to LLVMFuzzerTestOneInput. A broken
 * contract aborts inside the target. With -v, each input's name is printed before it
 * runs, so the last name printed is the input that failed (ctest runs it with -v).
 *
 * Exit status: 0 when every input ran; 1 when a path could not be read or there were
 * no inputs at all (an empty corpus directory is a mistake, not a pass); 2 for usage.
 */
#define _POSIX_C_SOURCE 200809L

#include "fuzz_target.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *prog = "fuzz_replay";
static bool verbose = false;
static unsigned long inputs = 0;
static unsigned long long input_bytes = 0;

/* The whole file in a malloc'd buffer of exactly its size (1 byte for an empty file, so
 * that the pointer is never NULL); NULL on error, with a message. */
static uint8_t *read_file(const char *path, size_t *size)
{
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    while (buf != NULL) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap)
            break;
        uint8_t *bigger = realloc(buf, cap * 2);
        if (bigger == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    bool failed = buf == NULL || ferror(fp);
    fclose(fp);
    if (failed) {
        fprintf(stderr, "%s: %s: read failed\n", prog, path);
        free(buf);
        return NULL;
    }
    uint8_t *exact = malloc(n > 0 ? n : 1);
    if (exact == NULL) {
        fprintf(stderr, "%s: %s: out of memory\n", prog, path);
        free(buf);
        return NULL;
    }
    if (n > 0)
        memcpy(exact, buf, n);
    free(buf);
    *size = n;
    return exact;
}

static bool run_file(const char *path)
{
    size_t size = 0;
    uint8_t *data = read_file(path, &size);
    if (data == NULL)
        return false;
    if (verbose) {
        printf("%s: %s (%zu bytes)\n", prog, path, size);
        fflush(stdout);
    }
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    inputs++;
    input_bytes += size;
    return true;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool run_dir(const char *path)
{
    DIR *dir = opendir(path);
    if (dir == NULL) {
        fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
        return false;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    const struct dirent *d;
    while ((d = readdir(dir)) != NULL) {
        if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
            continue;
        if (n == cap) {
            size_t bigger = cap ? cap * 2 : 64;
            char **grown = realloc(names, bigger * sizeof *names);
            if (grown == NULL) {
                ok = false;
                break;
            }
            names = grown;
            cap = bigger;
        }
        size_t len = strlen(path) + 1 + strlen(d->d_name) + 1;
        names[n] = malloc(len);
        if (names[n] == NULL) {
            ok = false;
            break;
        }
        snprintf(names[n], len, "%s/%s", path, d->d_name);
        n++;
    }
    closedir(dir);
    if (!ok)
        fprintf(stderr, "%s: %s: out of memory\n", prog, path);
    if (n > 0)
        qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n && ok; i++) {
        struct stat st;
        if (stat(names[i], &st) != 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, names[i], strerror(errno));
            ok = false;
        } else if (S_ISREG(st.st_mode)) {
            ok = run_file(names[i]);
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc > 0 && argv[0] != NULL && argv[0][0] != '\0') {
        const char *slash = strrchr(argv[0], '/');
        prog = slash ? slash + 1 : argv[0];
    }
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        verbose = true;
        first = 2;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: %s [-v] FILE_OR_DIRECTORY...\n", prog);
        return 2;
    }
    bool ok = true;
    for (int i = first; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, argv[i], strerror(errno));
            ok = false;
        } else if (S_ISDIR(st.st_mode)) {
            ok = run_dir(argv[i]) && ok;
        } else {
            ok = run_file(argv[i]) && ok;
        }
    }
    printf("%s: ran %lu inputs (%llu bytes)\n", prog, inputs, input_bytes);
    if (inputs == 0) {
        fprintf(stderr, "%s: no inputs found\n", prog);
        return 1;
    }
    return ok ? 0 : 1;
}
