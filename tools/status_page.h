/* status_page: what `loom status` makes of a status page's body (tools/status.c).
 *
 * The body comes from whatever answers at the address the user gave, so it is
 * untrusted input: every member is type-checked before use (a member of
 * another type is shown as "?"), and nothing from the page reaches the
 * terminal as a control character, an escape sequence or a byte outside
 * printable ASCII: such bytes are printed as \xNN (the table) or '?' (the
 * JSON). Every string, the nodes and each node's metrics are printed up to a
 * bound, so one line and the whole output stay bounded whatever the page
 * holds. Fuzzed by tests/fuzz/fuzz_status.c. */
#ifndef LOOM_TOOLS_STATUS_PAGE_H
#define LOOM_TOOLS_STATUS_PAGE_H

#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

/* Far more than the page ever sends (at most 2048 nodes, a few MB); more is refused. */
#define STATUS_PAGE_MAX_BODY (16u << 20)
/* What is printed of a page at most: nodes, metrics per node, characters of a string. */
#define STATUS_PAGE_MAX_NODES   2048
#define STATUS_PAGE_MAX_METRICS 16
#define STATUS_PAGE_MAX_TEXT    64

/* The page in body[0..len): its parsed JSON if it is a Loom status page (an
 * object with a "job" object and a "nodes" array), else NULL. The caller
 * releases it with json_object_put. */
json_object *status_page_parse(const char *body, size_t len);

/* The page as a table: the job, one line per node, the failures. */
void status_page_print(FILE *out, json_object *page);

/* The body as it came, every byte that is not printable ASCII, a newline or a
 * tab replaced by '?' (a carriage return by a space). */
void status_page_print_raw(FILE *out, const char *body, size_t len);

#endif
