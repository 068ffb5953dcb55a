/* The communication graphs of stochastic reduce (src/p2p/graph.c):
 *
 *  - the edges of each built-in graph, as the definitions say;
 *  - the spectral gap 1 - sigma_2(P) of every built-in graph on several sizes, against the
 *    test's own computation by another method: power iteration on P^T P, deflated by its top
 *    eigenvector, from P built here from the edges; and against the closed form of the ring,
 *    1 - cos(pi / n) (its P is circulant, with singular values |cos(pi k / n)|);
 *  - regularity (star is not), and the refusals with a sentence: a missing file, lines that
 *    are not two node numbers, nodes out of range, self-loops, repeated edges, a graph that
 *    is not connected;
 *  - halton on every size from 2 to 64: connected (its plain Halton offsets of a multiple of 4
 *    are all even: the ring edge it always includes joins the halves), regular, out-degree
 *    ceil(log2 n), gap as power iteration says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loom/loom.h>

/* sigma_2(P)^2 by power iteration on M = P^T P: first the top eigenpair, then the top of
 * M - l1 v1 v1^T. */
static double second_eigenvalue(const loom_graph *g)
{
    int n = loom_graph_nodes(g);
    double *p = calloc((size_t)n * n, sizeof *p), *m = calloc((size_t)n * n, sizeof *m);
    double *v = malloc(n * sizeof *v), *w = malloc(n * sizeof *w), *v1 = malloc(n * sizeof *v1);
    for (int i = 0; i < n; i++) {
        int d = loom_graph_in_degree(g, i);
        p[i * n + i] = 1.0 / (d + 1);
        for (int k = 0; k < d; k++) p[i * n + loom_graph_in(g, i, k)] = 1.0 / (d + 1);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++) m[i * n + j] += p[k * n + i] * p[k * n + j];
    double lambda[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) v[i] = 1.0 + 0.37 * i + 0.01 * (i * i % 7);
        for (int it = 0; it < 200000; it++) {
            double norm = 0;
            for (int i = 0; i < n; i++) norm += v[i] * v[i];
            norm = sqrt(norm);
            for (int i = 0; i < n; i++) v[i] /= norm;
            if (pass == 1) { /* keep v orthogonal to v1 */
                double dot = 0;
                for (int i = 0; i < n; i++) dot += v[i] * v1[i];
                for (int i = 0; i < n; i++) v[i] -= dot * v1[i];
                norm = 0;
                for (int i = 0; i < n; i++) norm += v[i] * v[i];
                norm = sqrt(norm);
                if (norm < 1e-9) { /* M took v to its top direction alone: nothing else is left */
                    lambda[1] = 0;
                    break;
                }
                for (int i = 0; i < n; i++) v[i] /= norm;
            }
            for (int i = 0; i < n; i++) {
                w[i] = 0;
                for (int j = 0; j < n; j++) w[i] += m[i * n + j] * v[j];
            }
            double rq = 0;
            for (int i = 0; i < n; i++) rq += v[i] * w[i];
            int settled = it > 100 && fabs(rq - lambda[pass]) < 1e-15;
            lambda[pass] = rq;
            memcpy(v, w, n * sizeof *v);
            if (settled) break;
        }
        double norm = 0;
        for (int i = 0; i < n; i++) norm += v[i] * v[i];
        for (int i = 0; i < n; i++) v1[i] = v[i] / sqrt(norm);
    }
    free(p), free(m), free(v), free(w), free(v1);
    return lambda[1] > 0 ? lambda[1] : 0;
}

static loom_graph *build(const char *spec, int n)
{
    loom_graph *g = NULL;
    assert_int_equal(loom_graph_build(spec, n, &g), 0);
    return g;
}

static int has_out(const loom_graph *g, int i, int j)
{
    for (int k = 0; k < loom_graph_out_degree(g, i); k++)
        if (loom_graph_out(g, i, k) == j) return 1;
    return 0;
}

static void test_edges(void **state)
{
    (void)state;
    loom_graph *g = build("expander", 25); /* i -> i+1, i -> i+5 */
    for (int i = 0; i < 25; i++) {
        assert_int_equal(loom_graph_out_degree(g, i), 2);
        assert_int_equal(loom_graph_in_degree(g, i), 2);
        assert_true(has_out(g, i, (i + 1) % 25) && has_out(g, i, (i + 5) % 25));
    }
    loom_graph_free(g);
    g = build("expander", 8); /* ceil(sqrt 8) = 3 */
    assert_true(has_out(g, 6, 7) && has_out(g, 6, 1) && loom_graph_regular(g));
    loom_graph_free(g);
    g = build("ring", 5);
    for (int i = 0; i < 5; i++)
        assert_true(loom_graph_out_degree(g, i) == 1 && has_out(g, i, (i + 1) % 5));
    loom_graph_free(g);
    g = build("allreduce", 6);
    for (int i = 0; i < 6; i++) assert_int_equal(loom_graph_in_degree(g, i), 5);
    loom_graph_free(g);
    g = build("halton", 9); /* ceil(log2 9) = 4 offsets: 1, then floor(9 h), h = 1/2, 1/4, 3/4 */
    assert_int_equal(loom_graph_out_degree(g, 0), 4);
    assert_true(has_out(g, 0, 1) && has_out(g, 0, 4) && has_out(g, 0, 2) && has_out(g, 0, 6));
    loom_graph_free(g);
    g = build("halton", 8); /* 1, then 4 and 2 (h = 1/2, 1/4): all even without the ring edge */
    assert_int_equal(loom_graph_out_degree(g, 5), 3);
    assert_true(has_out(g, 5, 6) && has_out(g, 5, 1) && has_out(g, 5, 7));
    loom_graph_free(g);
    g = build("star", 6);
    assert_int_equal(loom_graph_in_degree(g, 0), 5);
    assert_int_equal(loom_graph_in_degree(g, 3), 1);
    assert_false(loom_graph_regular(g));
    assert_true(fabs(loom_graph_weight(g, 3, 0) - 0.5) < 1e-15);
    loom_graph_free(g);
}

static void test_spectral_gap(void **state)
{
    (void)state;
    const char *graphs[] = {"allreduce", "ring", "expander", "halton", "star"};
    const int sizes[] = {2, 3, 6, 9, 16, 25};
    int checked = 0;
    for (size_t a = 0; a < 5; a++) {
        for (size_t b = 0; b < 6; b++) {
            loom_graph *g = NULL;
            assert_int_equal(loom_graph_build(graphs[a], sizes[b], &g), 0);
            double want = 1 - sqrt(second_eigenvalue(g));
            double got = loom_graph_spectral_gap(g);
            if (fabs(got - want) > 1e-6)
                fail_msg("%s on %d: gap %.9f, power iteration says %.9f", graphs[a], sizes[b], got,
                         want);
            if (!strcmp(graphs[a], "ring"))
                assert_true(fabs(got - (1 - cos(3.14159265358979323846 / sizes[b]))) < 1e-9);
            if (!strcmp(graphs[a], "allreduce"))
                assert_true(fabs(got - 1) < 1e-7); /* sqrt of a rounding error */
            assert_true(got > 0 && got <= 1 + 1e-12);
            loom_graph_free(g);
            checked++;
        }
    }
    assert_int_equal(checked, 30);
}

static void test_halton_every_size(void **state)
{
    (void)state;
    for (int n = 2; n <= 64; n++) {
        loom_graph *g = NULL;
        if (loom_graph_build("halton", n, &g)) fail_msg("halton on %d refused", n);
        assert_true(loom_graph_regular(g));
        int degree = (int)ceil(log2((double)n));
        for (int i = 0; i < n; i++) {
            assert_int_equal(loom_graph_out_degree(g, i), degree);
            assert_int_equal(loom_graph_in_degree(g, i), degree);
        }
        double want = 1 - sqrt(second_eigenvalue(g));
        double got = loom_graph_spectral_gap(g);
        if (fabs(got - want) > 1e-6 || got <= 1e-9)
            fail_msg("halton on %d: gap %.9f, power iteration says %.9f", n, got, want);
        loom_graph_free(g);
    }
}

static char dir[] = "/tmp/loom-graph-XXXXXX";

/* Writes text to a file and builds the graph of n nodes from it; returns the error code. */
static int from_file(const char *text, int n, loom_graph **g)
{
    char path[64];
    snprintf(path, sizeof path, "%s/g.txt", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    loom_clear_last_error();
    return loom_graph_build(path, n, g);
}

static void refused(const char *text, int n, const char *why)
{
    loom_graph *g = NULL;
    assert_int_equal(from_file(text, n, &g), LOOM_ECONFIG);
    assert_null(g);
    if (!strstr(loom_last_error(), why))
        fail_msg("\"%s\" does not say \"%s\"", loom_last_error(), why);
}

static void test_file(void **state)
{
    (void)state;
    assert_non_null(mkdtemp(dir));
    loom_graph *g = NULL;
    /* A directed 4-cycle plus a chord, with comments and blank lines. */
    assert_int_equal(from_file("# a test graph\n0 1\n1 2\n\n2 3  # chord next\n3 0\n0 2\n", 4, &g),
                     0);
    assert_int_equal(loom_graph_in_degree(g, 2), 2);
    assert_false(loom_graph_regular(g));
    assert_true(fabs(loom_graph_spectral_gap(g) - (1 - sqrt(second_eigenvalue(g)))) < 1e-6);
    loom_graph_free(g);
    refused("0 1\n1 x\n", 2, "g.txt:2: expected two node numbers");
    refused("0 1\n1 0 2\n", 2, "g.txt:2: expected two node numbers");
    refused("0 1\n1 4\n", 4, "g.txt:2: node 4 is not one of the job's 4 workers");
    refused("0 -1\n", 4, "node -1 is not one of");
    refused("0 1\n1 1\n", 4, "g.txt:2: edge 1 -> 1 is a self-loop");
    refused("0 1\n1 0\n0 1\n", 2, "g.txt:3: edge 0 -> 1 given twice");
    refused("# nothing\n", 3, "no edges");
    refused("0 1\n1 0\n2 3\n3 2\n", 4, "not connected");
    refused("0 1\n1 2\n", 3, "not connected"); /* 2 reaches nobody */
    loom_clear_last_error();
    assert_int_equal(loom_graph_build("/nonexistent/graph", 4, &g), LOOM_ECONFIG);
    assert_non_null(strstr(loom_last_error(), "cannot open"));
    assert_int_equal(loom_graph_build("ring", 0, &g), LOOM_EINVAL);
    char path[64];
    snprintf(path, sizeof path, "%s/g.txt", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_spectral_gap),
        cmocka_unit_test(test_halton_every_size),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
