/* elastic_sum: the program of the elastic workers' exactness test
 * (test_elastic.sh, case sum; docs/ELASTIC.md).
 *
 *   elastic_sum bsp|ssp|asp PARTS EPOCHS CLOCKS [PACE_US]
 *
 * Every worker, whether it started the job or joined it (loom join), asks
 * for data parts (loom/parts.h: PARTS parts, EPOCHS epochs) and "trains" on
 * part p with CLOCKS clocks, each pushing +1 to key 0 and to key 1 + p of an
 * int64 sum table (dense, keys 0 .. PARTS), then loom_clock(); at each
 * epoch's end it meets the others at a barrier. SIGTERM asks it to leave
 * (loom_leave): it finishes the part it is on, reports it and ends
 * ("worker W left after N parts"). At the end, after the last barrier,
 * worker 0 pulls the table: with every part finished exactly once per epoch
 * and every acknowledged increment counted once, key 0 holds PARTS * EPOCHS
 * * CLOCKS and each key 1 + p EPOCHS * CLOCKS. It prints "exact: N
 * increments" and exits 0, or names the first key that differs and exits 1.
 * PACE_US (0): a pause after each clock, pacing only (ASP's clocks wait for
 * nobody, and its job would end before a test's workers joined and left);
 * nothing waits on it. ELASTIC_SUM_LOST=N (0): N workers may die
 * (--on-worker-failure continue; what each pushed for a part it did not
 * finish stays, and the part is trained again): worker 0 then says "exact
 * but for N lost worker(s)" when the only excess is such part keys' (N at
 * most, each at most CLOCKS: a worker killed after its part's last clock but
 * before it reported the part finished pushed all of it) and key 0's, their
 * sum give or take N: a clock's push to key 0 and to a part key on another
 * server are two messages, and a kill may fall between them.
 *
 * With ELASTIC_SUM_READS=1 (BSP), before each push a worker pulls key 0
 * and prints "read C V": at clock C it holds V, which BSP makes exactly
 * the pushes of every clock before C; the test counts them (one per "read"
 * line) and checks every V, the reads in the clock of a server's leave
 * among them. Every worker prints its loom_stats' pushes_resent and
 * pushes_redirected at its end ("worker W: resent R, redirected D pushes"). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loom/loom.h>

static loom_node *node;

static void on_term(int sig)
{
    (void)sig;
    loom_leave(node); /* an atomic store: async-signal-safe */
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "elastic_sum: %s: %s\n", what, loom_strerror(rc));
    return 1;
}

/* Worker 0, after the last barrier: every key as the exact count says. With
 * `lost` workers lost (--on-worker-failure continue), each may have pushed
 * for a part it did not report finished, which another worker trained again:
 * then up to `lost` part keys may hold up to `clocks` more (all of it when the
 * kill fell between the part's last clock and its report), and key 0 as many
 * more as they do together, give or take one per lost worker: a push to keys
 * held by two servers is a message to each, and the kill may fall between
 * them (key 0 counted, the part key not, or the reverse). */
static int check(loom_table *t, uint32_t parts, long epochs, long clocks, long lost)
{
    int64_t *got = calloc(parts + 1, sizeof *got);
    uint64_t *keys = calloc(parts + 1, sizeof *keys);
    if (!got || !keys) return fail("check", LOOM_ENOMEM);
    for (uint32_t k = 0; k <= parts; k++) keys[k] = k;
    int rc = loom_pull(t, keys, parts + 1, got);
    int bad = rc ? fail("pull", rc) : 0;
    int64_t extra = 0, want0 = (int64_t)parts * epochs * clocks;
    long over = 0;
    for (uint32_t k = 1; k <= parts && !bad; k++) {
        int64_t more = got[k] - epochs * clocks;
        if (more > 0 && more <= clocks && over < lost) {
            over++, extra += more;
        } else if (more) {
            fprintf(stderr, "elastic_sum: key %u holds %lld, not %lld\n", k, (long long)got[k],
                    (long long)(epochs * clocks));
            bad = 1;
        }
    }
    int64_t off = got[0] - (want0 + extra);
    if (!bad && (off > lost || off < -lost)) {
        fprintf(stderr, "elastic_sum: key 0 holds %lld, not %lld (give or take %ld)\n",
                (long long)got[0], (long long)(want0 + extra), lost);
        bad = 1;
    }
    if (!bad && lost)
        printf("exact but for %ld lost worker(s): %lld increments, %lld of parts they did not "
               "finish\n",
               lost, (long long)got[0], (long long)extra);
    else if (!bad)
        printf("exact: %lld increments\n", (long long)got[0]);
    free(got);
    free(keys);
    return bad;
}

/* Worker W's pushes sent again and redirected (loom_stats). */
static void print_resent(loom_node *n)
{
    loom_stats st;
    loom_node_stats(n, &st);
    printf("worker %d: resent %llu, redirected %llu pushes\n", loom_rank(n),
           (unsigned long long)st.pushes_resent, (unsigned long long)st.pushes_redirected);
}

static int work(loom_node *n, loom_consistency cons, uint32_t parts, long epochs, long clocks,
                long pace_us, long lost)
{
    const char *env = getenv("ELASTIC_SUM_READS");
    int reads = cons == LOOM_BSP && env && !strcmp(env, "1");
    struct timespec pace = {pace_us / 1000000, (pace_us % 1000000) * 1000};
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.storage = LOOM_DENSE;
    o.key_end = parts + 1;
    o.consistency = cons;
    o.staleness = cons == LOOM_SSP ? 1 : 0;
    o.cache = 0;
    loom_table *t;
    int rc = loom_table_open(n, "sum", &o, &t);
    if (rc) return fail("open the table", rc);
    loom_parts_opts po = LOOM_PARTS_OPTS_DEFAULT;
    po.parts = parts;
    po.epochs = (int)epochs;
    loom_parts *p;
    if ((rc = loom_parts_open(n, &po, &p))) return fail("open the parts", rc);
    struct sigaction sa = {0};
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    int bad = 0;
    for (;;) {
        loom_parts_event ev;
        uint32_t part;
        int epoch;
        if ((rc = loom_parts_next(p, &ev, &part, &epoch))) {
            bad = fail("ask for a part", rc);
            break;
        }
        if (ev == LOOM_PARTS_PART) {
            uint64_t keys[2] = {0, 1 + (uint64_t)part};
            int64_t ones[2] = {1, 1};
            for (long c = 0; c < clocks && !rc; c++) {
                int64_t v;
                if (reads && !(rc = loom_pull(t, keys, 1, &v)))
                    printf("read %lld %lld\n", (long long)loom_current_clock(n), (long long)v);
                if (!rc) rc = loom_push(t, keys, 2, ones);
                if (!rc) rc = loom_clock(n);
                if (pace_us) nanosleep(&pace, NULL);
            }
            if (!rc) rc = loom_parts_done(p, part);
            if (rc) {
                bad = fail("train a part", rc);
                break;
            }
        } else if (ev == LOOM_PARTS_EPOCH_END) {
            if ((rc = loom_barrier(n))) {
                bad = fail("barrier", rc);
                break;
            }
            if (epoch == epochs - 1) {
                if (loom_rank(n) == 0) bad = check(t, parts, epochs, clocks, lost);
                break;
            }
        } else {
            if (ev == LOOM_PARTS_LEFT)
                printf("worker %d left after %llu parts\n", loom_rank(n),
                       (unsigned long long)loom_parts_finished(p));
            break;
        }
    }
    loom_parts_close(p);
    print_resent(n);
    return bad;
}

int main(int argc, char **argv)
{
    if ((argc != 5 && argc != 6) ||
        (strcmp(argv[1], "bsp") && strcmp(argv[1], "ssp") && strcmp(argv[1], "asp"))) {
        fprintf(stderr, "usage: elastic_sum bsp|ssp|asp PARTS EPOCHS CLOCKS [PACE_US]\n");
        return 2;
    }
    long pace_us = argc == 6 ? strtol(argv[5], NULL, 10) : 0;
    loom_consistency cons = argv[1][0] == 'b' ? LOOM_BSP : argv[1][0] == 's' ? LOOM_SSP : LOOM_ASP;
    long parts = strtol(argv[2], NULL, 10), epochs = strtol(argv[3], NULL, 10),
         clocks = strtol(argv[4], NULL, 10);
    if (parts < 1 || parts > 4096 || epochs < 1 || epochs > 1000 || clocks < 1 || clocks > 100000 ||
        pace_us < 0 || pace_us > 1000000) {
        fprintf(stderr, "elastic_sum: PARTS 1-4096, EPOCHS 1-1000, CLOCKS 1-100000, PACE_US "
                        "0-1000000\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    int rc = loom_init(&node, NULL, NULL);
    if (rc) return fail("join the job", rc);
    if (!loom_is_worker(node)) {
        if (loom_joined(node)) { /* a server that joined: SIGTERM makes it leave */
            struct sigaction sa = {0};
            sa.sa_handler = on_term;
            sigemptyset(&sa.sa_mask);
            sigaction(SIGTERM, &sa, NULL);
            printf("server %d joined\n", loom_rank(node));
        }
        return loom_serve(node) ? 1 : 0;
    }
    const char *l = getenv("ELASTIC_SUM_LOST");
    int bad =
        work(node, cons, (uint32_t)parts, epochs, clocks, pace_us, l ? strtol(l, NULL, 10) : 0);
    rc = loom_finalize(node);
    return bad || rc ? 1 : 0;
}
