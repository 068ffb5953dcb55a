/* Error codes returned by every Loom function.
 *
 * Every function that can fail returns an int: 0 on success, one of the
 * positive LOOM_E* codes below on failure. loom_strerror() turns a code into a
 * short English sentence suitable for an error message. */
#ifndef LOOM_ERROR_H
#define LOOM_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum {
    LOOM_OK = 0,
    LOOM_EINVAL,      /* an argument is invalid (NULL, out of range, inconsistent) */
    LOOM_ENOMEM,      /* out of memory */
    LOOM_ECONFIG,     /* the job configuration (environment, flags) is missing or malformed */
    LOOM_ETRANSPORT,  /* the transport (ZeroMQ) failed: bind, connect or send */
    LOOM_ETIMEDOUT,   /* a bounded wait ran out (rendezvous, shutdown) */
    LOOM_EPEERFAIL,   /* another process of the job died or was declared dead */
    LOOM_ESHUTDOWN,   /* the node is shutting down; no further operations */
    LOOM_EMISMATCH,   /* a table was opened twice with different options */
    LOOM_ENOTFOUND,   /* a named thing (updater, table) does not exist */
    LOOM_EROLE,       /* the operation is not allowed for this node's role */
    LOOM_EKEYRANGE,   /* a key lies outside the table's key range */
    LOOM_EPROTO,      /* a peer sent a message that violates the protocol */
    LOOM_ELIMIT,      /* a built-in limit was exceeded (tables, message size) */
    LOOM_ESTATE,      /* the call is not valid in the object's current state */
    LOOM_EIO,         /* a file could not be read or written (disk full, I/O error) */
    LOOM_ERROR_COUNT_ /* not an error: one past the last code */
};

/* A short description of the error code; never NULL, also for unknown codes. */
const char *loom_strerror(int code);

/* The sentence of the last error Loom reported on the calling thread (what it
 * printed after "error: " on stderr, e.g. `table "w" was already opened with
 * different options`), or "" if none since loom_clear_last_error(). Only some
 * failures come with one; the code's loom_strerror() is always there. Bindings
 * (python/) clear it before a call and attach it to the failure. */
const char *loom_last_error(void);
void loom_clear_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
