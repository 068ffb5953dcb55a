/* The job secret: one CURVE key that encrypts and authenticates a job.
 *
 * Every process of a job reads the same secret file (LOOM_SECRET_FILE, or
 * --secret FILE of `loom run` and `loom train`) and derives the job's CURVE
 * key pair from it. Every connection of the job is then encrypted, and a
 * process that does not hold the secret is refused during the ZeroMQ
 * handshake, before any Loom message is read (docs/SECURITY.md).
 *
 * A secret file holds the 40 Z85 characters of a CURVE secret key and a
 * newline, and must not be readable or writable by group or others. */
#ifndef LOOM_SECRET_H
#define LOOM_SECRET_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Characters of a secret in Z85 (loom_config.secret holds one more, for the '\0'). */
#define LOOM_SECRET_LEN 40

/* Write a new random secret into a new file `path`, mode 0600. An existing
 * file is an error unless overwrite is set and it is a regular file of this
 * user (not a link, device, FIFO, socket or directory): it is then replaced in
 * one step by a new file, so the mode is 0600 whatever it was and the path
 * never holds part of a key. On failure, writes a sentence into err
 * (if not NULL) and returns LOOM_ECONFIG (LOOM_ETRANSPORT if this libzmq has no
 * CURVE). */
int loom_secret_generate(const char *path, int overwrite, char *err, size_t errlen);

/* Read and check secret file `path` into secret (LOOM_SECRET_LEN + 1 bytes,
 * '\0'-terminated). Refuses, with a sentence in err and LOOM_ECONFIG, a file
 * that is missing, not a regular file, readable or writable by group or
 * others, or not one Z85 key of LOOM_SECRET_LEN characters. */
int loom_secret_load(const char *path, char *secret, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
