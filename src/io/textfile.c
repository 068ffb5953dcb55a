/* textfile: loading, shares on line boundaries, the newline sentinel and the
 * messages of the text readers; see textfile.h. */
#include "io/textfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom/error.h"

void textfile_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int textfile_fail(textfile_fault *why, const char *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->msg, sizeof why->msg, fmt, ap);
    va_end(ap);
    why->at = at;
    return LOOM_EINVAL;
}

int textfile_report(const textfile *f, size_t line, int rc, const textfile_fault *why, char *err,
                    size_t errlen)
{
    if (rc == LOOM_ENOMEM)
        textfile_set_err(err, errlen, "%s:%zu: out of memory", f->path, line);
    else
        textfile_set_err(err, errlen, "%s:%zu: %s", f->path, line, why->msg);
    return rc;
}

static int ends_quote(const char *p, char stop)
{
    return textfile_blank(*p) || textfile_eol(p) || *p == stop;
}

const char *textfile_quote(const char *p, char stop, char out[TEXTFILE_QUOTED])
{
    size_t n = 0;
    for (; n < TEXTFILE_TOKEN_SHOWN && !ends_quote(p + n, stop); n++) {
        unsigned char c = (unsigned char)p[n];
        out[n] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (n == TEXTFILE_TOKEN_SHOWN && !ends_quote(p + n, stop)) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
    return out;
}

size_t textfile_edge(size_t size, int i, int n)
{
    /* without overflowing 64 bits */
    size_t q = size / (size_t)n, rem = size % (size_t)n;
    return q * (size_t)i + rem * (size_t)i / (size_t)n;
}

size_t textfile_next_line(const textfile *f, size_t pos)
{
    if (pos >= f->size) return f->size;
    const char *nl = memchr(f->s + pos, '\n', f->size - pos);
    return nl ? (size_t)(nl - f->s) + 1 : f->size;
}

size_t textfile_line_start(const textfile *f, size_t pos)
{
    if (pos == 0 || pos >= f->size || f->s[pos - 1] == '\n') return pos < f->size ? pos : f->size;
    return textfile_next_line(f, pos);
}

/* glibc's memchr runs at 10-20 GB/s here, with any compiler; a counting loop
 * needs the auto-vectoriser (gcc -O3) to match it. */
size_t textfile_count_newlines(const char *p, size_t n)
{
    size_t count = 0;
    for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++) count++;
    return count;
}

int textfile_parse(const textfile *f, size_t from, size_t to, textfile_lines_fn fn, void *ctx)
{
    size_t mid = to < f->tail ? to : f->tail;
    if (from < mid) {
        int rc = fn(ctx, f->s + from, f->s + mid, f->s + f->tail);
        if (rc) return rc;
    }
    if (f->last && from <= f->tail && f->tail < to) {
        const char *end = f->last + (f->size - f->tail) + 1;
        return fn(ctx, f->last, end, end);
    }
    return 0;
}

/* Whole contents of a non-regular file (pipe, device), newline-terminated.
 * Returns 0, LOOM_ENOMEM, or -1 with errno set. */
static int slurp(int fd, char **buf, size_t *size)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return LOOM_ENOMEM;
    for (;;) {
        if (n + 1 >= cap) { /* keep a byte for the final newline */
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                return LOOM_ENOMEM;
            }
            b = nb;
        }
        ssize_t k = read(fd, b + n, cap - n - 1);
        if (k == 0) break;
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            free(b);
            errno = e;
            return -1;
        }
        n += (size_t)k;
    }
    if (n && b[n - 1] != '\n') b[n++] = '\n';
    *buf = b;
    *size = n;
    return 0;
}

/* Maps a regular file, or reads anything else whole but a device. */
static int load(textfile *f, int nshards, char *err, size_t errlen)
{
    const char *path = f->path;
    char why[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        strerror_r(e, why, sizeof why);
        textfile_set_err(err, errlen, "%s: cannot open: %s", path, why);
        return e == ENOENT || e == ENOTDIR ? LOOM_ENOTFOUND : LOOM_EINVAL;
    }
    struct stat st;
    int rc = 0, e = fstat(fd, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (e) {
        strerror_r(e, why, sizeof why);
        textfile_set_err(err, errlen, "%s: cannot read: %s", path, why);
        rc = LOOM_EINVAL;
    } else if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > SIZE_MAX / 2) {
        textfile_set_err(err, errlen, "%s: file too large to map", path);
        rc = LOOM_EINVAL;
    } else if (S_ISREG(st.st_mode) && st.st_size > 0) { /* mmap of 0 bytes fails */
        f->size = (size_t)st.st_size;
        f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (f->map == MAP_FAILED) {
            e = errno;
            f->map = NULL;
            f->size = 0;
            strerror_r(e, why, sizeof why);
            textfile_set_err(err, errlen, "%s: cannot map: %s", path, why);
            rc = e == ENOMEM ? LOOM_ENOMEM : LOOM_EINVAL;
        } else {
            posix_madvise(f->map, f->size, POSIX_MADV_SEQUENTIAL);
            f->s = f->map;
        }
    } else if (S_ISCHR(st.st_mode) && !isatty(fd)) {
        /* /dev/zero or /dev/urandom never end, and reading one whole would
         * fill memory; a terminal (/dev/stdin typed into) ends at ^D. */
        textfile_set_err(err, errlen, "%s: a device, not a file of data", path);
        rc = LOOM_EINVAL;
    } else if (!S_ISREG(st.st_mode) && nshards > 1) {
        textfile_set_err(err, errlen, "%s: not a regular file, cannot read a share of it", path);
        rc = LOOM_EINVAL;
    } else if (!S_ISREG(st.st_mode)) {
        rc = slurp(fd, &f->loaded, &f->size);
        if (rc < 0) strerror_r(errno, why, sizeof why);
        if (rc)
            textfile_set_err(err, errlen, "%s: cannot read: %s", path,
                             rc < 0 ? why : "out of memory");
        if (rc < 0) rc = LOOM_EINVAL;
        if (!rc) f->s = f->loaded;
    }
    close(fd); /* a mapping stays valid */
    return rc;
}

int textfile_open(textfile *f, const char *path, int nshards, char *err, size_t errlen)
{
    *f = (textfile){.path = path, .s = ""};
    int rc = load(f, nshards, err, errlen);
    if (rc) {
        textfile_close(f);
        return rc;
    }
    f->tail = f->size;
    if (f->size > 0 && f->s[f->size - 1] != '\n') {
        /* The last line lacks its newline: serve it from a copy that has one. */
        while (f->tail > 0 && f->s[f->tail - 1] != '\n') f->tail--;
        size_t len = f->size - f->tail;
        if (!(f->last = malloc(len + 1))) {
            textfile_set_err(err, errlen, "%s: out of memory", path);
            textfile_close(f);
            return LOOM_ENOMEM;
        }
        memcpy(f->last, f->s + f->tail, len);
        f->last[len] = '\n';
    }
    return 0;
}

int textfile_c_locale(textfile *f)
{
    if (f->c_locale) return 0;
    if (!(f->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0))) return LOOM_ENOMEM;
    f->old_locale = uselocale(f->c_locale);
    return 0;
}

void textfile_close(textfile *f)
{
    if (f->c_locale) {
        uselocale(f->old_locale);
        freelocale(f->c_locale);
    }
    if (f->map) munmap(f->map, f->size);
    free(f->loaded);
    free(f->last);
    *f = (textfile){.path = f->path, .s = ""};
}

int textfile_read(const char *path, int shard, int nshards, int has_out, const char *bad_opts,
                  int c_locale, textfile_share_fn read_share, void *ctx, char *err, size_t errlen)
{
    if (!path || !has_out || nshards < 1 || shard < 0 || shard >= nshards) {
        textfile_set_err(err, errlen, "%s: invalid arguments (share %d of %d)",
                         path ? path : "(null)", shard, nshards);
        return LOOM_EINVAL;
    }
    if (bad_opts) {
        textfile_set_err(err, errlen, "%s: %s", path, bad_opts);
        return LOOM_EINVAL;
    }
    textfile f;
    int rc = textfile_open(&f, path, nshards, err, errlen);
    if (rc) return rc;
    if (c_locale && textfile_c_locale(&f)) {
        textfile_set_err(err, errlen, "%s: out of memory", path);
        rc = LOOM_ENOMEM;
    }
    if (!rc) rc = read_share(ctx, &f, shard, nshards);
    textfile_close(&f);
    return rc;
}
