/* dir: the checkpoint directory, treated as a place other people can reach.
 *
 * A checkpoint directory is often on shared storage, or under a
 * world-writable parent such as /tmp, where another local user may have
 * prepared it: made the directory first, or planted a link where Loom is
 * about to write or remove. So:
 *   - the directory is opened once (O_NOFOLLOW: the last component is no
 *     link) and checked: a directory, owned by this user, writable by
 *     nobody outside its owner and group; every file below it is reached
 *     relative to that descriptor, never by a path walked again;
 *   - each ckpt-<clock> directory is checked the same way when opened;
 *   - files are created O_EXCL|O_NOFOLLOW (a planted temporary name is
 *     removed first: unlinkat removes the name, never what a link points to);
 *   - cleanup removes only what Loom writes there (MANIFEST, server-R.part,
 *     worker-R.part, their .tmp names), only regular files, and a
 *     ckpt-<clock> directory only once that leaves it empty: anything else
 *     in it, a link included, stays, and the directory with it; a
 *     directory is renamed out of sight before its files go, so a kill
 *     mid-way never leaves a committed checkpoint missing parts;
 *   - a job holds a lock on the directory (flock on DIR/LOCK) for its whole
 *     run, so that a second job using it is refused, naming the holder. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "ft/ft.h"
#include "loom/error.h"

/* A checkpoint directory being removed is renamed to this prefix and its name. */
#define GONE_PREFIX ".gone-"

/* A directory this job may trust: not a link (the caller opened it
 * O_NOFOLLOW), this user's, and not writable by others. */
static int trusted(int fd, const char *path)
{
    struct stat st;
    if (fstat(fd, &st)) {
        log_error("checkpoint directory %s: %s", path, strerror(errno));
        return LOOM_ECONFIG;
    }
    if (!S_ISDIR(st.st_mode)) {
        log_error("checkpoint directory %s: not a directory", path);
        return LOOM_ECONFIG;
    }
    if (st.st_uid != geteuid()) {
        log_error("checkpoint directory %s belongs to user %u, not to this job's user %u: "
                  "refused (someone else may have prepared it; use a directory of your own)",
                  path, (unsigned)st.st_uid, (unsigned)geteuid());
        return LOOM_ECONFIG;
    }
    if (st.st_mode & S_IWOTH) {
        log_error("checkpoint directory %s is writable by every user (mode %04o): refused "
                  "(chmod o-w it, or use a directory of your own)",
                  path, (unsigned)(st.st_mode & 07777));
        return LOOM_ECONFIG;
    }
    return 0;
}

/* Open dirfd/name (dirfd AT_FDCWD: a path) as a directory, never through a
 * link in its last component, and check it. */
static int open_trusted(int dirfd, const char *name, const char *path, int *out)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        log_error("checkpoint directory %s: %s", path,
                  e == ELOOP || e == ENOTDIR ? "not a directory (a link or a file): refused"
                                             : strerror(e));
        return LOOM_ECONFIG;
    }
    int rc = trusted(fd, path);
    if (rc) {
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

int ft_dir_open(const char *path, int create, int *out)
{
    char p[4096];
    size_t len = strlen(path);
    if (!len || len >= sizeof p) {
        log_error("checkpoint directory \"%s\": empty or too long", path);
        return LOOM_ECONFIG;
    }
    memcpy(p, path, len + 1);
    while (len > 1 && p[len - 1] == '/') p[--len] = '\0'; /* O_NOFOLLOW must see the last name */
    if (create) {
        /* Missing parents are made as mkdir -p would; the last component
         * with no access for others (the job's model is in it). */
        for (char *s = p + 1;; s++) {
            if (*s != '/' && *s != '\0') continue;
            char c = *s;
            *s = '\0';
            if (mkdir(p, c ? 0777 : 0750) && errno != EEXIST) {
                log_error("cannot create checkpoint directory %s: %s", p, strerror(errno));
                return LOOM_ECONFIG;
            }
            *s = c;
            if (!c) break;
        }
    }
    return open_trusted(AT_FDCWD, p, p, out);
}

int ft_dir_lock(int dirfd, const char *path, int *out)
{
    int fd = openat(dirfd, "LOCK", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        log_error("checkpoint directory %s: cannot use its lock file LOCK (%s)", path,
                  fd < 0 ? strerror(errno) : "not a regular file of this user");
        if (fd >= 0) close(fd);
        return LOOM_ECONFIG;
    }
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        char holder[160] = "";
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        for (char *c = holder; *c; c++) /* the file is text we wrote, but show it safely */
            if (*c < ' ' || *c > '~') *c = '?';
        close(fd);
        if (e == EWOULDBLOCK) {
            log_error("checkpoint directory %s is in use by another job (%s): refused; two jobs "
                      "in one directory would remove each other's checkpoints",
                      path, holder[0] ? holder : "its holder did not say who it is");
            return LOOM_ECONFIG;
        }
        log_error("checkpoint directory %s: cannot lock it: %s", path, strerror(e));
        return LOOM_ECONFIG;
    }
    char host[64] = "?", line[200];
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    int len = snprintf(line, sizeof line, "pid %ld on %s since %lld\n", (long)getpid(), host,
                       (long long)time(NULL));
    if (ftruncate(fd, 0) || pwrite(fd, line, (size_t)len, 0) != len)
        log_warn("checkpoint directory %s: cannot note this job in LOCK: %s", path,
                 strerror(errno));
    *out = fd;
    return 0;
}

int ft_ckpt_name(const char *name, int64_t *clock)
{
    if (strncmp(name, "ckpt-", 5) || strlen(name) != 17) return 0;
    int64_t c = 0;
    for (int i = 5; i < 17; i++) {
        if (name[i] < '0' || name[i] > '9') return 0;
        c = c * 10 + (name[i] - '0');
    }
    *clock = c;
    return 1;
}

int ft_dir_ckpt(int dirfd, const char *path, int64_t clock, int create, int *out)
{
    char name[32], shown[4200];
    snprintf(name, sizeof name, "ckpt-%012" PRId64, clock);
    snprintf(shown, sizeof shown, "%s/%s", path, name);
    if (create && mkdirat(dirfd, name, 0750) && errno != EEXIST) {
        log_error("cannot create checkpoint directory %s: %s", shown, strerror(errno));
        return LOOM_EIO;
    }
    /* Made, and gone already: the scheduler gave this checkpoint up (plan.c). */
    if (create && faccessat(dirfd, name, F_OK, AT_SYMLINK_NOFOLLOW) && errno == ENOENT)
        return LOOM_ENOTFOUND;
    return open_trusted(dirfd, name, shown, out);
}

/* A name Loom writes in a ckpt-<clock> directory. */
static int loom_file(const char *name)
{
    size_t n = strlen(name);
    if (n > 4 && !strcmp(name + n - 4, ".tmp")) n -= 4;
    if (n == 8 && !strncmp(name, "MANIFEST", 8)) return 1;
    const char *rank = !strncmp(name, "server-", 7)   ? name + 7
                       : !strncmp(name, "worker-", 7) ? name + 7
                                                      : NULL;
    if (!rank || rank >= name + n || (size_t)(name + n - rank) < 6) return 0;
    const char *dot = name + n - 5; /* ".part" */
    if (strncmp(dot, ".part", 5) || dot == rank) return 0;
    for (const char *c = rank; c < dot; c++)
        if (*c < '0' || *c > '9') return 0;
    return 1;
}

/* Remove DIR/<name>, a checkpoint directory under its own name or put out
 * of sight (GONE_PREFIX): Loom's regular files in it, then the directory. */
static int remove_named(int dirfd, const char *path, const char *name, const char *ckpt)
{
    char shown[4200];
    snprintf(shown, sizeof shown, "%s/%s", path, name);
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        log_warn("%s left alone: it is not a directory Loom made (%s)", shown, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) || st.st_uid != geteuid()) {
        log_warn("%s left alone: it belongs to another user", shown);
        close(fd);
        return -1;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    /* Out of sight first: renamed, the checkpoint is either whole under its
     * name or not there at all, so a process killed while removing it never
     * leaves a committed checkpoint without some of its parts, nor a later
     * one that names them (plan.c removes the newest first). What a killed
     * run left out of sight goes with ft_dir_remove_gone. */
    char gone[48];
    snprintf(gone, sizeof gone, GONE_PREFIX "%s", ckpt);
    const char *now = name;
    if (strcmp(name, gone) && !renameat(dirfd, name, dirfd, gone)) now = gone;
    /* A writer that had not heard the checkpoint was given up may add a
     * part while this runs: look again while that is what keeps it. */
    for (int pass = 0; pass < 3; pass++) {
        int removed = 0;
        rewinddir(d);
        for (struct dirent *e; (e = readdir(d));) {
            struct stat fs;
            if (loom_file(e->d_name) && !fstatat(fd, e->d_name, &fs, AT_SYMLINK_NOFOLLOW) &&
                S_ISREG(fs.st_mode) && !unlinkat(fd, e->d_name, 0))
                removed++;
        }
        if (!unlinkat(dirfd, now, AT_REMOVEDIR) || errno == ENOENT) {
            closedir(d);
            return 0;
        }
        if (!removed && pass) break;
    }
    int e = errno;
    closedir(d); /* closes fd */
    /* Files Loom did not write stay where their owner put them. */
    const char *left = now;
    if (now != name && !renameat(dirfd, now, dirfd, name)) left = name;
    log_warn("%s/%s left in place: it holds files Loom did not write (%s)", path, left,
             strerror(e));
    return -1;
}

int ft_dir_remove_ckpt(int dirfd, const char *path, int64_t clock)
{
    char name[32];
    snprintf(name, sizeof name, "ckpt-%012" PRId64, clock);
    return remove_named(dirfd, path, name, name);
}

void ft_dir_remove_gone(int dirfd, const char *path)
{
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return;
    }
    int64_t clock;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, GONE_PREFIX, strlen(GONE_PREFIX)) &&
            ft_ckpt_name(e->d_name + strlen(GONE_PREFIX), &clock))
            remove_named(dirfd, path, e->d_name, e->d_name + strlen(GONE_PREFIX));
    closedir(d);
}
