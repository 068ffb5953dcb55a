/* Filters: what a table's messages cost on the wire (docs/FILTERS.md).
 *
 * A table's pushes and pull replies go through its filter chains (the
 * loom_table_opts fields filter_push and filter_pull) and travel as sparse rows
 * when that is smaller. These counters say what that saved: for each direction,
 * the bytes the messages would have taken as plain keys and dense rows, the
 * bytes they took, and per filter the bytes before and after it. Counted on
 * the worker, for the messages it sent (pushes, keyed pull requests) and
 * received (pull replies). */
#ifndef LOOM_FILTER_H
#define LOOM_FILTER_H

#include <stddef.h>
#include <stdint.h>

#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { LOOM_DIR_PUSH = 0, LOOM_DIR_PULL = 1 } loom_direction;

/* The filters, in the order a chain applies them. */
typedef enum {
    LOOM_FILTER_KKT,
    LOOM_FILTER_SIGMOD,
    LOOM_FILTER_SKIP,
    LOOM_FILTER_QUANT,
    LOOM_FILTER_KEYCACHE,
    LOOM_FILTER_LZ4,
    LOOM_FILTER_ZSTD,
    LOOM_FILTER_COUNT
} loom_filter_kind;

typedef struct loom_filter_stats {
    uint64_t messages;   /* push messages sent, or pull requests sent and replies received */
    uint64_t bytes_raw;  /* their keys and rows as plain u64 keys and dense rows */
    uint64_t bytes_wire; /* their payload as sent (headers of 48 bytes not counted) */
    uint64_t unchanged;  /* pull: rows the server said had not changed since cached */
    uint64_t dropped;    /* pull: replies refused as malformed */
    struct {
        uint64_t messages, bytes_in, bytes_out;
    } filter[LOOM_FILTER_COUNT]; /* zeros for a filter not in the spec */
} loom_filter_stats;

/* Check a spec for direction dir before opening a table with it: 0, or
 * LOOM_EINVAL with a sentence naming the culprit in err (if not NULL). Whether
 * it fits a table's value type is checked when the table is opened. */
int loom_filter_check(const char *spec, loom_direction dir, char *err, size_t errlen);

/* The counts of table t's direction dir since it was opened. 0, LOOM_EINVAL. */
int loom_table_filter_stats(loom_table *t, loom_direction dir, loom_filter_stats *out);
/* The name of a filter ("kkt", ...), "?" for another value. */
const char *loom_filter_name(loom_filter_kind k);

#ifdef __cplusplus
}
#endif
#endif
