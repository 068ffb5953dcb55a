/* The checkpoint manifest reader (src/ft/files.c) on valid, damaged and
 * hostile input: a formatted manifest reads back field for field; every
 * truncation and every flipped bit of it is refused; records that would
 * leave the checkpoint directory, name a rank outside the job or leave a
 * node without its part are refused even with a correct checksum; and
 * seeded random mutations (bytes replaced, inserted, deleted) never crash
 * the reader and are refused unless they give back the original text. A
 * server named moved (replicas: it died, its ranges are in the others' parts)
 * reads back, and needs no part but must have none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ft/ft.h"

static ft_part parts[] = {
    {FT_SERVER, 0, 1, "ckpt-000000000010/server-0.part", 1234, 0x01020304u},
    {FT_SERVER, 0, 0, "ckpt-000000000020/server-0.part", 56, 0xdeadbeefu},
    {FT_SERVER, 1, 1, "ckpt-000000000020/server-1.part", 999, 0u},
    {FT_WORKER, 0, 1, "ckpt-000000000020/worker-0.part", 48, 0xffffffffu},
};

static char *valid(size_t *len)
{
    ft_manifest m = {.clock = 20, .servers = 2, .workers = 1, .nparts = 4, .parts = parts};
    strcpy(m.model, "lr");
    char *t = ft_manifest_format(&m, len);
    assert_non_null(t);
    return t;
}

static int parse(const char *text, size_t len)
{
    ft_manifest m;
    char why[256];
    int rc = ft_manifest_parse(text, len, &m, why, sizeof why);
    if (rc == 0)
        ft_manifest_free(&m);
    else
        assert_true(why[0] != '\0'); /* a refusal always says why */
    return rc;
}

/* The text with its end line recomputed: a record that only the checks of
 * fields, not the checksum, can refuse. */
static int parse_signed(const char *body)
{
    size_t n = strlen(body);
    char *t = malloc(n + 32);
    assert_non_null(t);
    memcpy(t, body, n);
    n += (size_t)sprintf(t + n, "end %08x\n", ft_crc32c(0, body, n));
    int rc = parse(t, n);
    free(t);
    return rc;
}

static void roundtrip(void **state)
{
    (void)state;
    size_t len;
    char *t = valid(&len);
    ft_manifest m;
    char why[256];
    assert_int_equal(ft_manifest_parse(t, len, &m, why, sizeof why), 0);
    assert_int_equal(m.clock, 20);
    assert_string_equal(m.model, "lr");
    assert_int_equal(m.servers, 2);
    assert_int_equal(m.workers, 1);
    assert_int_equal(m.nparts, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(m.parts[i].kind, parts[i].kind);
        assert_int_equal(m.parts[i].rank, parts[i].rank);
        assert_int_equal(m.parts[i].full, parts[i].full);
        assert_string_equal(m.parts[i].path, parts[i].path);
        assert_int_equal(m.parts[i].size, parts[i].size);
        assert_int_equal(m.parts[i].crc, parts[i].crc);
    }
    ft_manifest_free(&m);
    free(t);
}

static void truncations_and_flips(void **state)
{
    (void)state;
    size_t len;
    char *t = valid(&len);
    for (size_t n = 0; n < len; n++) assert_int_not_equal(parse(t, n), 0);
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            t[i] ^= (char)(1 << bit);
            assert_int_not_equal(parse(t, len), 0);
            t[i] ^= (char)(1 << bit);
        }
    assert_int_equal(parse(t, len), 0);
    free(t);
}

static void hostile_records(void **state)
{
    (void)state;
    const char *head = "loom-checkpoint 1\nclock 20\nmodel lr\nservers 1\nworkers 1\n";
    const char *worker = "part worker 0 full ckpt-000000000020/worker-0.part 48 00000000\n";
    char body[1024];
    /* The well-formed base, to show the refusals below are the records' own. */
    snprintf(body, sizeof body,
             "%spart server 0 full ckpt-000000000020/server-0.part 1 00000000\n%s", head, worker);
    assert_int_equal(parse_signed(body), 0);
    const char *bad[] = {
        "part server 0 full ../../../etc/passwd 1 00000000\n",
        "part server 0 full /etc/passwd 1 00000000\n",
        "part server 0 full ckpt-000000000020/server-1.part 1 00000000\n", /* another rank's */
        "part server 1 full ckpt-000000000020/server-1.part 1 00000000\n", /* no server 1 */
        "part server 0 half ckpt-000000000020/server-0.part 1 00000000\n",
        "part server 0 full ckpt-000000000020/server-0.part -1 00000000\n",
        "part server 0 full ckpt-000000000020/server-0.part 1 0000000g\n",
        "part server 0 full ckpt-00000000002x/server-0.part 1 00000000\n",
        "", /* server 0 without a part */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "%s%s%s", head, bad[i], worker);
        assert_int_not_equal(parse_signed(body), 0);
    }
    /* Two parts for one worker; a field given twice; an unknown line. */
    snprintf(body, sizeof body,
             "%spart server 0 full ckpt-000000000020/server-0.part 1 00000000\n%s%s", head, worker,
             worker);
    assert_int_not_equal(parse_signed(body), 0);
    snprintf(body, sizeof body,
             "%sclock 30\npart server 0 full ckpt-000000000020/server-0.part 1 00000000\n%s", head,
             worker);
    assert_int_not_equal(parse_signed(body), 0);
    snprintf(body, sizeof body, "%shello\n", head);
    assert_int_not_equal(parse_signed(body), 0);
}

static void moved_servers(void **state)
{
    (void)state;
    static uint8_t moved[] = {0, 1, 0};
    ft_part p[] = {parts[0], parts[3]};
    ft_manifest m = {.clock = 20, .servers = 3, .workers = 1, .nparts = 2, .parts = p};
    m.moved = moved;
    strcpy(m.model, "lr");
    size_t len;
    char *t = ft_manifest_format(&m, &len);
    assert_non_null(t);
    assert_non_null(strstr(t, "\nmoved 1\n"));
    ft_manifest back;
    char why[256];
    /* Server 2 has neither a part nor a moved line: refused. */
    assert_int_not_equal(ft_manifest_parse(t, len, &back, why, sizeof why), 0);
    free(t);
    moved[2] = 1;
    t = ft_manifest_format(&m, &len);
    assert_int_equal(ft_manifest_parse(t, len, &back, why, sizeof why), 0);
    assert_non_null(back.moved);
    assert_int_equal(back.moved[0], 0);
    assert_int_equal(back.moved[1], 1);
    assert_int_equal(back.moved[2], 1);
    assert_int_equal(back.nparts, 2);
    ft_manifest_free(&back);
    free(t);

    const char *head = "loom-checkpoint 1\nclock 20\nmodel lr\nservers 2\nworkers 1\n";
    const char *server0 = "part server 0 full ckpt-000000000020/server-0.part 1 00000000\n";
    const char *worker = "part worker 0 full ckpt-000000000020/worker-0.part 48 00000000\n";
    char body[1024];
    snprintf(body, sizeof body, "%s%s%smoved 1\n", head, server0, worker);
    assert_int_equal(parse_signed(body), 0);
    const char *bad[] = {
        "moved 0\n",          /* server 0 has a part */
        "moved 1\nmoved 1\n", /* twice */
        "moved 2\n",          /* no server 2 */
        "moved x\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "%s%s%s%s", head, server0, worker, bad[i]);
        assert_int_not_equal(parse_signed(body), 0);
    }
    snprintf(body, sizeof body, "%s%smoved 0\nmoved 1\n", head, worker); /* every server */
    assert_int_not_equal(parse_signed(body), 0);
}

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void random_mutations(void **state)
{
    (void)state;
    size_t len;
    char *t = valid(&len);
    char *m = malloc(len + 64);
    assert_non_null(m);
    uint64_t seed = 12345;
    for (int round = 0; round < 20000; round++) {
        memcpy(m, t, len);
        size_t n = len;
        int edits = 1 + (int)(next(&seed) % 4);
        for (int e = 0; e < edits; e++) {
            size_t at = (size_t)(next(&seed) % n);
            switch (next(&seed) % 3) {
            case 0:
                m[at] = (char)next(&seed);
                break;
            case 1:
                if (n < len + 60) {
                    memmove(m + at + 1, m + at, n - at);
                    m[at] = (char)next(&seed);
                    n++;
                }
                break;
            default:
                if (n > 1) {
                    memmove(m + at, m + at + 1, n - at - 1);
                    n--;
                }
            }
        }
        int same = n == len && !memcmp(m, t, len);
        if (same)
            assert_int_equal(parse(m, n), 0);
        else
            assert_int_not_equal(parse(m, n), 0);
    }
    free(m);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(roundtrip),        cmocka_unit_test(truncations_and_flips),
        cmocka_unit_test(hostile_records),  cmocka_unit_test(moved_servers),
        cmocka_unit_test(random_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
