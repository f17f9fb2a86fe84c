/* tmpdir.h — a temporary folder for a cmocka group: created in the group setup, emptied
 * and removed in the teardown. Header-only: each test binary is one .c file. Define
 * TMPDIR_PREFIX (e.g. "dfl_prompts") before including. */
#ifndef DFL_TEST_TMPDIR_H
#define DFL_TEST_TMPDIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[256];

static int group_setup(void **state)
{
    (void)state;
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/" TMPDIR_PREFIX "_XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
            remove(p);
        }
        closedir(d);
    }
    rmdir(g_dir);
    return 0;
}

/* Path of `name` inside the folder; static buffers rotated so four can coexist. */
static const char *path_of(const char *name)
{
    static char bufs[4][512];
    static int i;
    char *b = bufs[i++ & 3];
    snprintf(b, 512, "%s/%s", g_dir, name);
    return b;
}

#endif
