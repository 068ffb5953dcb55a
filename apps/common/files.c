/* files: checks of the files a user names, a bounded getline and the output
 * file of gen and predict (see files.h). */
#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/app.h"

/* "cannot VERB PATH: <strerror(why)>" into err; -1. */
static int refuse(const char *verb, const char *path, int why, char *err, size_t errlen)
{
    return app_error(err, errlen, "cannot %s %s: %s", verb, path, strerror(why));
}

/* Opening is the only exact test (permissions, a read-only file system,
 * root's privileges), except for a FIFO: opening and closing one would let
 * its writer run into a closed pipe, or end its reader's input, so there only
 * the permissions are looked at. O_NONBLOCK: no device or FIFO stops the
 * check. */

int app_check_input(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st)) return refuse("read", path, errno, err, errlen);
    if (S_ISDIR(st.st_mode)) return refuse("read", path, EISDIR, err, errlen);
    if (S_ISFIFO(st.st_mode))
        return access(path, R_OK) ? refuse("read", path, errno, err, errlen) : 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return refuse("read", path, errno, err, errlen);
    close(fd);
    return 0;
}

int app_check_output(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        /* Not truncated: the old file stays until the run replaces it. */
        if (S_ISDIR(st.st_mode)) return refuse("write", path, EISDIR, err, errlen);
        if (S_ISFIFO(st.st_mode))
            return access(path, W_OK) ? refuse("write", path, errno, err, errlen) : 0;
        int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) return refuse("write", path, errno, err, errlen);
        close(fd);
        return 0;
    }
    if (errno != ENOENT) return refuse("write", path, errno, err, errlen);
    /* A new file: created, and removed again since the run has written
     * nothing yet. EEXIST is a dangling link (whose target the run would
     * create) or a file made meanwhile: left to the run to write. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return errno == EEXIST ? 0 : refuse("write", path, errno, err, errlen);
    close(fd);
    unlink(path);
    return 0;
}

int app_check_job_files(const app_job *j, char *err, size_t errlen)
{
    const char *in[] = {j->train_path, j->test_path}, *out[] = {j->model_path, j->metrics_path};
    for (int i = 0; i < 2; i++)
        if ((in[i] && app_check_input(in[i], err, errlen)) ||
            (out[i] && app_check_output(out[i], err, errlen)))
            return -1;
    return 0;
}

ssize_t app_getline(char **line, size_t *cap, size_t max, FILE *f)
{
    size_t n = 0;
    int c;
    while ((c = getc_unlocked(f)) != EOF) {
        if (n + 2 > *cap) { /* room for c and the NUL */
            size_t want = *cap ? 2 * *cap : 256;
            if (want > max + 2) want = max + 2;
            char *grown = realloc(*line, want);
            if (!grown) return APP_LINE_NO_MEMORY;
            *line = grown;
            *cap = want;
        }
        (*line)[n++] = (char)c;
        if (c == '\n') break;
        if (n > max) return APP_LINE_TOO_LONG;
    }
    if (n == 0) return -1;
    (*line)[n] = '\0';
    return (ssize_t)n;
}

int app_out_open(app_out *o, const char *cmd, const char *path)
{
    *o = (app_out){.f = stdout, .path = path};
    if (strcmp(path, "-") == 0) return 0;
    if (!(o->f = fopen(path, "w"))) {
        fprintf(stderr, "%s: %s: cannot create: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    struct stat st;
    o->regular = fstat(fileno(o->f), &st) == 0 && S_ISREG(st.st_mode);
    return 0;
}

const char *app_out_name(const app_out *o)
{
    return o->f == stdout ? "standard output" : o->path;
}

int app_out_close(app_out *o, const char *cmd, int failed)
{
    int bad = ferror(o->f);
    if ((o->f == stdout ? fflush(o->f) : fclose(o->f)) != 0) bad = 1;
    if (bad && !failed)
        fprintf(stderr, "%s: %s: write failed: %s\n", cmd, app_out_name(o), strerror(errno));
    if ((bad || failed) && o->regular) remove(o->path);
    return bad || failed;
}
