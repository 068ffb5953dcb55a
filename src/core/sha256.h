/* sha256: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for keyed values
 * derived from the job secret: the status page's token (status.c). Not for
 * bulk data: the code favours being short and obviously right over speed. */
#ifndef LOOM_CORE_SHA256_H
#define LOOM_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

void sha256(const void *data, size_t len, uint8_t out[SHA256_LEN]);
void hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                 uint8_t out[SHA256_LEN]);

#endif
