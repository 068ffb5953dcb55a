/* error: the sentences behind Loom's error codes. */
#include "loom/error.h"

static const char *const messages[LOOM_ERROR_COUNT_] = {
    [LOOM_OK] = "success",
    [LOOM_EINVAL] = "invalid argument",
    [LOOM_ENOMEM] = "out of memory",
    [LOOM_ECONFIG] = "job configuration is missing or malformed",
    [LOOM_ETRANSPORT] = "transport failure (bind, connect or send)",
    [LOOM_ETIMEDOUT] = "timed out",
    [LOOM_EPEERFAIL] = "another process of the job died",
    [LOOM_ESHUTDOWN] = "node is shutting down",
    [LOOM_EMISMATCH] = "table already opened with different options",
    [LOOM_ENOTFOUND] = "no such updater or table",
    [LOOM_EROLE] = "operation not allowed for this node's role",
    [LOOM_EKEYRANGE] = "key outside the table's key range",
    [LOOM_EPROTO] = "protocol violation by a peer",
    [LOOM_ELIMIT] = "built-in limit exceeded",
    [LOOM_ESTATE] = "operation not valid in the current state",
    [LOOM_EIO] = "a file could not be read or written (disk full, permissions)",
};

const char *loom_strerror(int code)
{
    if (code < 0 || code >= LOOM_ERROR_COUNT_) return "unknown error code";
    return messages[code];
}
