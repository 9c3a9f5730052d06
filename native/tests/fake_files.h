/* fake_files.h -- write files and directories of a fake /sys or /proc tree in a temporary directory for
 * C unit tests (fake_sysfs.h, test_jobenv.c). */
#ifndef TS_FAKE_FILES_H
#define TS_FAKE_FILES_H

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static void fake_write(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s\n", text) < 0 || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

static void fake_mkdir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(2);
    }
}

static int fake_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Remove the tree made by fake_sysfs(). */

#endif
