/* secret: the job secret file (loom/secret.h).
 *
 * The file holds a CURVE secret key in Z85 and a newline, nothing else, so
 * that `cat` shows whether it is one and any tool can make one. It is created
 * with O_EXCL and mode 0600 (never opened for writing if it exists, so a
 * symbolic link planted at the path cannot redirect the write), and read
 * only if group and others can neither read nor write it: a key others can
 * read protects nothing, and one they can write lets them choose it. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
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
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && overwrite) {
        /* Replace, not rewrite: the new file gets mode 0600 whatever the old one had. */
        if (unlink(path) < 0)
            return fail(err, errlen, "cannot replace %s: %s", path, strerror(errno));
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    }
    if (fd < 0 && errno == EEXIST)
        return fail(err, errlen, "%s already exists; it was left alone", path);
    if (fd < 0) return fail(err, errlen, "cannot create %s: %s", path, strerror(errno));
    secret[LOOM_SECRET_LEN] = '\n';
    ssize_t w = write(fd, secret, LOOM_SECRET_LEN + 1);
    int saved = errno;
    memset(secret, 0, sizeof secret);
    if (close(fd) < 0 && w == LOOM_SECRET_LEN + 1) {
        saved = errno;
        w = -1;
    }
    if (w != LOOM_SECRET_LEN + 1) {
        unlink(path);
        return fail(err, errlen, "cannot write %s: %s", path,
                    w < 0 ? strerror(saved) : "short write");
    }
    return 0;
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
