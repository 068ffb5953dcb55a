/* filter: user-defined filters on the (key, value) messages of a table
 * (Parameter Server, Li's thesis sections 3.2.6 and 3.3.2, chapter 6).
 *
 * A filter chain is the state of one direction (push of deltas, or pull reply
 * of values) of one table on one link (one sender, one receiver): the sender
 * encodes a message of sorted keys and rows of `width` values with
 * filter_chain_encode(), the receiver's chain of the same spec decodes it with
 * filter_chain_decode(). Filters come in two groups, always applied in this
 * order whatever the order of the spec:
 *
 *   what is sent (sender only; the receiver sees an ordinary smaller message)
 *     kkt:T      push: drop row i while its weights are 0 and every |g| <= T (T = lambda - delta)
 *     sigmod:T   send a row only when its accumulated change exceeds T in some coordinate;
 *                the rest stays accumulated (push) or stays the receiver's copy (pull)
 *     skip:Q     keep each row with probability Q and scale it by 1/Q (unbiased)
 *   how it is encoded (both sides)
 *     quant:B    values as B = 8 or 16 bit fixed point with stochastic rounding
 *     keycache   a key list sent before goes as its 64-bit digest
 *     lz4, zstd[:LEVEL]  the encoded message compressed (at most one of them)
 *
 * The encoding is self-describing (the receiver reads which encodings were
 * used from the message) and is checked whole before anything is trusted: a
 * malformed, truncated or oversized message is refused with LOOM_EPROTO or
 * LOOM_ELIMIT, and a digest the receiver does not hold with LOOM_ENOTFOUND, which
 * the sender answers with filter_chain_forget_keys() and a resend of the full
 * list. Each filter counts the bytes of the messages it saw before and after
 * itself. docs/FILTERS.md says which filters are exact and the bound of the others. */
#ifndef LOOM_PS_FILTER_H
#define LOOM_PS_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "loom/table.h"

typedef enum { FILTER_PUSH, FILTER_PULL } filter_dir;

/* In the order a chain applies them. */
typedef enum {
    FILTER_KKT,
    FILTER_SIGMOD,
    FILTER_SKIP,
    FILTER_QUANT,
    FILTER_KEYCACHE,
    FILTER_LZ4,
    FILTER_ZSTD,
    FILTER_KIND_COUNT
} filter_kind;

/* How rows' values travel: sparse (a row's non-zero entries with their
 * column) when that is smaller than dense, or always one of the two. Sparse
 * is exact: a value is "zero" when every bit of it is 0, so -0.0 travels. */
typedef enum { FILTER_ROWS_AUTO = 0, FILTER_ROWS_SPARSE, FILTER_ROWS_DENSE } filter_rows_form;

/* A parsed chain spec: which filters are on and their argument, and the rows'
 * form ("sparse" or "dense" in the text forces one; neither is a filter). */
typedef struct filter_spec {
    int on[FILTER_KIND_COUNT];
    double arg[FILTER_KIND_COUNT];
    filter_rows_form rows;
} filter_spec;

/* The largest message a chain encodes or decodes (decoded size), 256 MiB:
 * a claimed size above it is refused with LOOM_ELIMIT before any allocation. */
#define FILTER_MAX_BYTES ((size_t)256 << 20)
/* A compressed message decompresses to at most this many times its size (lz4's
 * own limit): a small frame cannot make the receiver allocate much more. The
 * sender sends a message that would compress further as it is. */
#define FILTER_MAX_RATIO 255
/* Key lists a key cache remembers per link (the oldest is forgotten first). */
#define FILTER_KEYCACHE_ENTRIES 64
/* Values sharing one scale in a quantised message. */
#define FILTER_QUANT_BLOCK 256

/* "NAME[:ARG],..." into spec (an empty text or "none" is no filter; the names
 * "sparse" and "dense" set spec->rows). 0, or LOOM_EINVAL
 * with a sentence naming the culprit in err: unknown filter, a missing,
 * malformed or out-of-range argument, a filter given twice, lz4 with zstd. */
int filter_spec_parse(const char *text, filter_spec *spec, char *err, size_t errlen);
/* filter_spec_parse, and what the table layer allows in direction dir: a pull
 * reply must carry every changed row the reader asked for, so the filters that
 * leave rows out (kkt, sigmod, skip) apply to pushes only. */
int filter_spec_parse_dir(const char *text, filter_dir dir, filter_spec *spec, char *err,
                          size_t errlen);
/* The filters of a pull spec that also encode its requests' key lists
 * (keycache, lz4, zstd: the pull replies' encoders) into *keys; whether there
 * is any, in which case the requests go through a chain of key lists. */
int filter_spec_keys(const filter_spec *pull, filter_spec *keys);
/* The name of a filter kind ("sigmod"). */
const char *filter_name(filter_kind k);

typedef struct filter_chain filter_chain;

/* A chain for one direction of a table whose rows are `width` values of `type`;
 * seed drives skip and quant's random numbers. Width 0 makes a chain of key
 * lists without values (pull requests, filter_spec_keys). LOOM_EINVAL with a
 * sentence in err when the spec does not fit (kkt on a pull, a lossy filter on
 * an integer table or a chain of key lists), LOOM_ENOMEM. */
int filter_chain_create(const filter_spec *spec, filter_dir dir, loom_type type, size_t width,
                        uint64_t seed, filter_chain **out, char *err, size_t errlen);
void filter_chain_destroy(filter_chain *c);
/* Whether the spec has any filter (not counting the rows' form): a table
 * without one sends a message through a chain only when its rows are
 * sparse enough to be worth it (filter_sparse_pays). */
int filter_spec_any(const filter_spec *spec);
/* Whether n rows of width values of type t (bytes as stored) would be smaller
 * as sparse rows than `dense_bytes`, the size of sending them as they are. */
int filter_sparse_pays(loom_type t, size_t width, const void *vals, size_t n, size_t dense_bytes);

/* Rows given sparse: row i's values are entries [off[i], off[i + 1]) of cols
 * (their columns: strictly ascending within a row, below the width) and of
 * vals (values of the chain's type); off[0] need not be 0. */
typedef struct filter_sparse {
    const uint64_t *off; /* n + 1 */
    const uint32_t *cols;
    const void *vals;
} filter_sparse;

/* Whether the chain encodes rows given sparse as they are: it has no filter
 * that works on values (kkt, sigmod, skip, quant). */
int filter_chain_takes_sparse(const filter_chain *c);
/* filter_chain_encode of n rows given sparse, keys strictly ascending, never
 * made dense (unless the spec or the size says dense rows): the same message
 * filter_chain_encode makes of the equivalent dense rows (values whose bits
 * are all 0 are left out, as there). The columns are the caller's to check.
 * LOOM_EINVAL for a chain that does not take sparse rows or unsorted keys,
 * LOOM_ELIMIT, LOOM_ENOMEM. */
int filter_chain_encode_sparse(filter_chain *c, const uint64_t *keys, size_t n,
                               const filter_sparse *rows, uint8_t **out, size_t *outlen);
/* filter_sparse_pays for n rows whose values number nnz not counting those
 * whose bits are all 0 (filter_sparse_nonzero counts them in count values). */
int filter_sparse_pays_nnz(loom_type t, size_t width, size_t n, size_t nnz, size_t dense_bytes);
size_t filter_sparse_nonzero(loom_type t, const void *vals, size_t count);

/* A message: n rows with strictly ascending keys, rows of width values. */
typedef struct filter_msg {
    const uint64_t *keys;
    const void *vals;
    size_t n;
    /* kkt: the sender's current weights of these rows (n * width values of
     * the table's type); NULL: kkt lets every row through. */
    const void *weights;
    /* sigmod: send everything held back too (end of a clock that needs every
     * update, end of training). */
    int flush;
} filter_msg;

/* Encode m into a new buffer *out of *outlen bytes (free() it). The message
 * may be empty after filtering; it is still sent (the receiver learns the
 * push or reply happened). LOOM_EINVAL for unsorted keys, LOOM_ELIMIT for a
 * message above FILTER_MAX_BYTES, LOOM_ENOMEM. */
int filter_chain_encode(filter_chain *c, const filter_msg *m, uint8_t **out, size_t *outlen);

/* Decode len bytes into new arrays *keys (n) and *vals (n * width values of
 * the chain's type; free() both). LOOM_EPROTO: malformed or truncated, or of
 * another type or width; LOOM_ELIMIT: claims more than FILTER_MAX_BYTES, or a compressed
 * frame claims more than FILTER_MAX_RATIO times its size;
 * LOOM_ENOTFOUND: a key digest this receiver does not hold (*digest set: send
 * it back to the sender). Nothing is returned and nothing changes on error
 * except the dropped counter. max_rows is the most rows the receiver takes
 * (a pull reply: the rows it asked for; a push: the rows of the server's
 * slice): a message claiming more is LOOM_EPROTO before anything is
 * allocated, so a small sparse frame cannot make the receiver fill a large
 * buffer of zeros. */
int filter_chain_decode(filter_chain *c, const uint8_t *in, size_t len, size_t max_rows,
                        uint64_t **keys, void **vals, size_t *n, uint64_t *digest);

/* filter_chain_decode, except that sparse rows stay sparse: a message of
 * sparse rows sets *rows (its off, cols and vals in one new buffer *owned;
 * free() it and *keys) and leaves *vals NULL, so that a receiver adding
 * them to its rows touches only their values, never n x width zeros. Any
 * other message decodes as filter_chain_decode's, *owned NULL. */
int filter_chain_decode_sparse(filter_chain *c, const uint8_t *in, size_t len, size_t max_rows,
                               uint64_t **keys, void **vals, filter_sparse *rows, void **owned,
                               size_t *n, uint64_t *digest);
/* The n dense rows (n x width values; free() them) of rows given sparse; NULL
 * when out of memory. */
void *filter_sparse_dense(const filter_chain *c, const filter_sparse *rows, size_t n);

/* The receiver did not hold the key list of `digest`: the next message with
 * that list sends it whole. */
void filter_chain_forget_keys(filter_chain *c, uint64_t digest);
/* The digest keycache sends for a list of n keys. */
uint64_t filter_keys_digest(const uint64_t *keys, size_t n);

/* Bytes a filter saw, summed over the messages it handled: in = before it,
 * out = after it. A sender's kkt, sigmod and skip count the message as raw
 * keys and values; quant counts values, keycache keys, lz4/zstd the whole
 * encoding. */
typedef struct filter_stats {
    uint64_t msgs, bytes_in, bytes_out;
} filter_stats;

/* The counts of filter k (zeros for a filter not in the chain). */
filter_stats filter_chain_stats(const filter_chain *c, filter_kind k);
/* Raw bytes of the messages given to encode (keys and values as rows), the
 * bytes it produced, and the messages decode refused. */
void filter_chain_totals(const filter_chain *c, uint64_t *raw_bytes, uint64_t *wire_bytes,
                         uint64_t *dropped);

#endif
