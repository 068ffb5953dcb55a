/* fuzz_status: `loom status`'s reading of a status page (tools/status_page.c), fed
 * hostile page bodies: whatever answers at the address a user gives controls them.
 *
 * Built two ways like fuzz_decode.c: a libFuzzer target (LOOM_FUZZ=ON, clang) and, in
 * every build, a plain replay driver (LOOM_FUZZ_DRIVER; corpus_status/, which holds the
 * pages that crashed `loom status` before: a node that is not an object, metrics that
 * are an array, escape sequences).
 *
 * Input: the body of an HTTP answer to GET /status.json.
 *
 * Checks, for every input (besides the sanitizers'):
 *   - status_page_parse() accepts only an object with a "job" object and a "nodes" array;
 *   - what it accepts prints as a table of printable ASCII and newlines only (no control
 *     character, escape sequence or other byte reaches the terminal), every line at most
 *     MAX_LINE bytes and the whole at most MAX_OUTPUT;
 *   - the body as printed by --json holds printable ASCII, newlines and tabs only, and
 *     exactly as many bytes as the body. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"
#include "status_page.h"

/* A node's line: its fixed columns, three escaped strings and the metrics shown. */
#define MAX_LINE   (8 * (4 * STATUS_PAGE_MAX_TEXT + 4) + STATUS_PAGE_MAX_METRICS * 300 + 256)
#define MAX_OUTPUT ((STATUS_PAGE_MAX_NODES + 16) * (size_t)MAX_LINE)

static struct {
    unsigned long pages, refused;
} stats;

static void check_table(json_object *page)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    FUZZ_CHECK(f != NULL);
    status_page_print(f, page);
    FUZZ_CHECK(fclose(f) == 0);
    FUZZ_CHECK(len <= MAX_OUTPUT);
    size_t line = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)out[i];
        FUZZ_CHECK(c == '\n' || (c >= 0x20 && c < 0x7f));
        line = c == '\n' ? 0 : line + 1;
        FUZZ_CHECK(line <= MAX_LINE);
    }
    free(out);
}

static void check_raw(const char *body, size_t size)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    FUZZ_CHECK(f != NULL);
    status_page_print_raw(f, body, size);
    FUZZ_CHECK(fclose(f) == 0);
    FUZZ_CHECK(len == size);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)out[i];
        FUZZ_CHECK(c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f));
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    json_object *page = status_page_parse(body, size);
    if (!page) {
        stats.refused++;
        return 0;
    }
    stats.pages++;
    json_object *v = NULL;
    FUZZ_CHECK(json_object_object_get_ex(page, "job", &v) &&
               json_object_is_type(v, json_type_object));
    FUZZ_CHECK(json_object_object_get_ex(page, "nodes", &v) &&
               json_object_is_type(v, json_type_array));
    check_table(page);
    check_raw(body, size);
    json_object_put(page);
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
/* ---- the plain driver: pages, truncations, random and mutated ---- */

typedef fuzz_input input;

/* A page as the scheduler writes it (src/core/status.c), and pages that break it. */
static const struct {
    const char *name, *body;
} seeds[] = {
    {"page",
     "{\"job\": {\"state\": \"running\", \"scheduler\": \"127.0.0.1:38011\", \"servers\": 1, "
     "\"workers\": 2, \"registered\": 4, \"workers_done\": 0, \"uptime_ms\": 9400, "
     "\"heartbeat_interval_ms\": 500, \"heartbeat_timeout_ms\": 5000, \"min_clock\": 12},\n"
     "\"nodes\": [\n {\"id\": 0, \"role\": \"scheduler\", \"rank\": 0, \"address\": "
     "\"127.0.0.1:38011\", \"state\": \"running\", \"bytes_sent\": 10, \"bytes_received\": 20, "
     "\"send_bytes_per_s\": 1000, \"recv_bytes_per_s\": 1500, \"heartbeat_age_ms\": 0, "
     "\"dead_in_ms\": 0, \"metrics\": {}},\n {\"id\": 1, \"role\": \"server\", \"rank\": 0, "
     "\"address\": \"127.0.0.1:33519\", \"state\": \"running\", \"bytes_sent\": 5, "
     "\"bytes_received\": 6, \"send_bytes_per_s\": 2200000, \"recv_bytes_per_s\": 6100000, "
     "\"heartbeat_age_ms\": 474, \"dead_in_ms\": 4526, \"metrics\": {}},\n {\"id\": 2, "
     "\"role\": \"worker\", \"rank\": 0, \"address\": \"127.0.0.1:37263\", \"state\": "
     "\"running\", \"bytes_sent\": 1, \"bytes_received\": 2, \"send_bytes_per_s\": 1500000, "
     "\"recv_bytes_per_s\": 600000, \"heartbeat_age_ms\": 11, \"dead_in_ms\": 4989, \"clock\": "
     "12, \"staleness\": 0, \"metrics\": {\"epoch\": 3, \"objective\": 0.3291}},\n {\"id\": 3, "
     "\"role\": \"worker\", \"rank\": 1, \"address\": \"127.0.0.1:37264\", \"state\": \"not "
     "registered\", \"bytes_sent\": 0, \"bytes_received\": 0, \"send_bytes_per_s\": 0, "
     "\"recv_bytes_per_s\": 0, \"heartbeat_age_ms\": 0, \"dead_in_ms\": 0, \"clock\": null, "
     "\"staleness\": null, \"metrics\": {}}],\n\"nodes_not_listed\": 0,\n\"failures\": "
     "{\"failed_node\": 2, \"reason\": \"no heartbeat for 5009 ms\", \"malformed_dropped\": 1, "
     "\"registrations_refused\": 0, \"connections_refused\": 0},\n\"http\": {\"requests\": 3, "
     "\"bad_requests\": 0, \"connections_evicted\": 0}}\n"},
    {"nodes_not_objects", "{\"job\": {}, \"nodes\": [1, \"x\", null, [], true, 2.5, {\"id\": 1}]}"},
    {"metrics_array", "{\"job\": {}, \"nodes\": [{\"id\": 1, \"metrics\": [1, 2]}]}"},
    {"wrong_types", "{\"job\": {\"state\": 1, \"servers\": \"1\", \"uptime_ms\": []}, \"nodes\": "
                    "[{\"id\": \"1\", \"role\": {}, \"clock\": \"5\", \"send_bytes_per_s\": "
                    "\"x\", \"metrics\": {\"a\": \"b\", \"c\": null, \"d\": 1e308}}], "
                    "\"failures\": {\"failed_node\": \"x\", \"reason\": 5}, "
                    "\"nodes_not_listed\": \"many\"}"},
    {"escapes", "{\"job\": {\"state\": \"\\u001b[2J\\u001b]0;owned\\u0007\\u009b31m\\r\"}, "
                "\"nodes\": [{\"role\": \"\\u001b[H\", \"address\": \"a\\u0000b\", "
                "\"metrics\": {\"\\u001b[2J\": 1}}], \"failures\": {\"failed_node\": 1, "
                "\"reason\": \"\\u001b]2;t\\u0007\"}}"},
    {"raw_escape", "{\"job\": {\"state\": \"\x1b[2J\xc2\x9b\"}, \"nodes\": []}"},
    {"not_a_page", "{\"job\": [], \"nodes\": {}}"},
    {"nan", "{\"job\": {\"uptime_ms\": NaN}, \"nodes\": [{\"send_bytes_per_s\": Infinity}]}"},
};
#define NSEEDS ((int)(sizeof seeds / sizeof seeds[0]))

static const char *seed(int i, input *in)
{
    in->len = strlen(seeds[i].body);
    FUZZ_CHECK(in->len <= sizeof in->buf);
    memcpy(in->buf, seeds[i].body, in->len);
    return seeds[i].name;
}

/* One random edit: a character of JSON or of an escape sequence, an insertion, a
 * deletion or a truncation. */
static void mutate(input *in)
{
    static const char chars[] = "{}[]\",:0123456789.e-\\u001bnulltruefalse \x1b\x07\x9b\xc2";
    fuzz_edit(in, 0, chars, sizeof chars - 1);
}

static void check_seeds(void)
{
    /* Every seed but the two that are not pages (not_a_page, nan) is one, whole. */
    FUZZ_CHECK(stats.pages >= (unsigned long)NSEEDS - 2 && stats.refused >= 2);
}

static void report(void)
{
    printf("pages printed %lu, refused %lu\n", stats.pages, stats.refused);
}

int main(int argc, char **argv)
{
    return fuzz_driver_main(argc, argv,
                            &(fuzz_target){.name = "fuzz_status",
                                           .rng_seed = 0x535441545553u,
                                           .nseeds = NSEEDS,
                                           .variant_kind = "unchanged",
                                           .seed = seed,
                                           .check_seeds = check_seeds,
                                           .random = 300,
                                           .random_len = 256,
                                           .mutated = 3000,
                                           .mutate = mutate,
                                           .report = report});
}
#endif
