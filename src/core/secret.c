/* secret: the job secret file (loom/secret.h).
 *
 * The file holds a CURVE secret key in Z85 and a newline, nothing else, so
 * that `cat` shows whether it is one and any tool can make one. It is created
 * with O_EXCL and mode 0600 (never opened for writing if it exists, so a
 * symbolic link planted at the path cannot redirect the write; replacing one
 * writes a new file and renames it over a regular file only), and read
 * only if group and others can neither read nor write it: a key others can
 * read protects nothing, and one they can write lets them choose it. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "loom/error.h"
#include "loom/secret.h"

#define SECRET_KEY_BYTES 32

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail(char *err, size_t errlen, const char *fmt, ...);

/* A sentence into err (if not NULL); returns LOOM_ECONFIG. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return LOOM_ECONFIG;
}

/* Writes secret and a newline to fd and closes it; returns 0 or an errno value. */
static int write_secret(int fd, char *secret)
{
    secret[LOOM_SECRET_LEN] = '\n';
    ssize_t w = write(fd, secret, LOOM_SECRET_LEN + 1);
    int saved = w < 0 ? errno : w != LOOM_SECRET_LEN + 1 ? EIO : 0;
    if (!saved && fsync(fd) < 0) saved = errno;
    if (close(fd) < 0 && !saved) saved = errno;
    return saved;
}

/* What kind of file st is, for a refusal that names it. */
static const char *file_kind(const struct stat *st)
{
    if (S_ISLNK(st->st_mode)) return "a symbolic link";
    if (S_ISDIR(st->st_mode)) return "a directory";
    if (S_ISFIFO(st->st_mode)) return "a FIFO";
    if (S_ISSOCK(st->st_mode)) return "a socket";
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) return "a device";
    return "not a regular file";
}

/* Replaces the existing file at path by a new one holding secret. Only a
 * regular file of this user is replaced: a link is neither followed nor
 * replaced, and a device, FIFO, socket or directory at the path was put there
 * for something else. The secret goes into a temporary file of the same
 * directory, made with O_EXCL (so a link planted at its name is never
 * followed), and is synced before rename() puts it in place in one step: the
 * path holds the old key or the whole new one, never a part. */
static int replace_secret(const char *path, char *secret, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return fail(err, errlen, "cannot replace %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return fail(err, errlen,
                    "%s is %s, not a regular file; --force replaces only a "
                    "secret file, so it was left alone",
                    path, file_kind(&st));
    if (st.st_uid != geteuid())
        return fail(err, errlen, "%s belongs to user %u, not to you; it was left alone", path,
                    (unsigned)st.st_uid);
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
        return fail(err, errlen, "cannot replace %s: name too long", path);
    int fd = mkstemp(tmp); /* O_CREAT|O_EXCL, mode 0600 */
    if (fd < 0) return fail(err, errlen, "cannot replace %s: %s", path, strerror(errno));
    int saved = write_secret(fd, secret);
    if (!saved && rename(tmp, path) < 0) saved = errno;
    if (saved) {
        unlink(tmp);
        return fail(err, errlen, "cannot replace %s: %s", path, strerror(saved));
    }
    return 0;
}

int loom_secret_generate(const char *path, int overwrite, char *err, size_t errlen)
{
    if (!path || !*path) return fail(err, errlen, "no file name for the secret");
    if (!zmq_has("curve")) {
        fail(err, errlen, "this libzmq was built without CURVE; cannot make a secret");
        return LOOM_ETRANSPORT;
    }
    char public_key[LOOM_SECRET_LEN + 1], secret[LOOM_SECRET_LEN + 1];
    if (zmq_curve_keypair(public_key, secret))
        return fail(err, errlen, "cannot make a CURVE key: %s", zmq_strerror(zmq_errno()));
    int rc = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && overwrite) {
        rc = replace_secret(path, secret, err, errlen);
    } else if (fd < 0 && errno == EEXIST) {
        rc = fail(err, errlen, "%s already exists; it was left alone", path);
    } else if (fd < 0) {
        rc = fail(err, errlen, "cannot create %s: %s", path, strerror(errno));
    } else {
        int saved = write_secret(fd, secret);
        if (saved) {
            unlink(path);
            rc = fail(err, errlen, "cannot write %s: %s", path, strerror(saved));
        }
    }
    memset(secret, 0, sizeof secret);
    return rc;
}

int loom_secret_load(const char *path, char *secret, char *err, size_t errlen)
{
    if (!path || !*path || !secret) return fail(err, errlen, "no secret file given");
    secret[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return fail(err, errlen, "cannot open secret file %s: %s", path, strerror(errno));
    struct stat st;
    char buf[LOOM_SECRET_LEN + 4];
    ssize_t len = -1;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = fail(err, errlen, "cannot read secret file %s: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = fail(err, errlen, "secret file %s is not a regular file", path);
    } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        rc = fail(err, errlen,
                  "secret file %s has mode %04o: group or others may use it; "
                  "it must be private to its owner (chmod 600 %s)",
                  path, (unsigned)(st.st_mode & 0777), path);
    } else if ((len = read(fd, buf, sizeof buf)) < 0) {
        rc = fail(err, errlen, "cannot read secret file %s: %s", path, strerror(errno));
    }
    close(fd);
    if (rc) return rc;
    /* One key, optionally followed by one newline. */
    size_t n = (size_t)len;
    if (n > 0 && buf[n - 1] == '\n') n--;
    uint8_t key[SECRET_KEY_BYTES];
    if (n != LOOM_SECRET_LEN || memchr(buf, '\n', n))
        rc = fail(err, errlen,
                  "secret file %s does not hold one key of %d characters "
                  "(make one with loom keygen)",
                  path, LOOM_SECRET_LEN);
    if (!rc) {
        memcpy(secret, buf, LOOM_SECRET_LEN);
        secret[LOOM_SECRET_LEN] = '\0';
        /* zmq_z85_decode stops at a NUL byte: a key with one would be cut short
         * (found by fuzz_launchenv). */
        if (strlen(secret) != LOOM_SECRET_LEN || !zmq_z85_decode(key, secret))
            rc = fail(err, errlen,
                      "secret file %s is not a Z85-encoded key (make one with loom keygen)", path);
    }
    memset(buf, 0, sizeof buf);
    memset(key, 0, sizeof key);
    if (rc) memset(secret, 0, LOOM_SECRET_LEN + 1);
    return rc;
}
