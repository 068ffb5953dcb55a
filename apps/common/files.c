/* files: checks of the files a user names, and a bounded getline (see files.h). */
#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/app.h"

int app_check_input(const char *path, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO without a writer must not stop the check. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return app_error(err, errlen, "cannot read %s: %s", path, strerror(errno));
    struct stat st;
    int is_dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    close(fd);
    if (is_dir) return app_error(err, errlen, "cannot read %s: %s", path, strerror(EISDIR));
    return 0;
}

int app_check_output(const char *path, char *err, size_t errlen)
{
    /* Opening is the only exact test (permissions, a read-only file system,
     * root's privileges, a missing directory): create the file if it is new,
     * and remove it again, since the run has not written anything yet. */
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
        close(fd);
        unlink(path);
        return 0;
    }
    if (errno == EEXIST) {
        /* Not truncated: the old file stays until the run replaces it. A FIFO
         * without a reader yet (ENXIO) is writable once the reader comes. */
        fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) close(fd);
        if (fd >= 0 || errno == ENXIO) return 0;
    }
    return app_error(err, errlen, "cannot write %s: %s", path, strerror(errno));
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
