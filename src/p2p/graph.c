/* graph: the communication graphs of stochastic reduce and their spectral gap.
 *
 * A graph is a set of directed edges j -> i ("j sends its model to i") on n nodes, kept as
 * an n x n adjacency bitmap plus sorted in- and out-lists. Its averaging matrix is
 * P = diag(d_in + 1)^-1 (A + I): node i averages its own model and its in-neighbours', with
 * equal weights (ASAP, Kadav and Kruus). The spectral gap 1 - sigma_2(P) comes from the
 * eigenvalues of the symmetric P^T P (sigma_k^2), found by cyclic Jacobi rotations: a dense
 * solver is plenty for the few hundred workers a job has, and needs no library.
 *
 * A graph in which some node cannot reach all others is refused: its P has sigma_2 = 1 and
 * replicas on different sides would never agree. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "loom/p2p.h"

#define GRAPH_MAX_NODES 1024

struct loom_graph {
    int n;
    unsigned char *adj;   /* adj[i * n + j]: edge j -> i */
    int *in_start, *in;   /* in[in_start[i] .. in_start[i + 1]): senders to i, ascending */
    int *out_start, *out; /* receivers from i, ascending */
};

static int has_edge(const loom_graph *g, int from, int to)
{
    return g->adj[(size_t)to * (size_t)g->n + (size_t)from];
}

/* Add from -> to; 1 if it was new. */
static int add_edge(loom_graph *g, int from, int to)
{
    unsigned char *e = &g->adj[(size_t)to * (size_t)g->n + (size_t)from];
    int fresh = !*e;
    *e = 1;
    return fresh;
}

/* Build the neighbour lists from the bitmap. */
static int index_edges(loom_graph *g)
{
    int n = g->n;
    size_t edges = 0;
    for (size_t k = 0; k < (size_t)n * (size_t)n; k++) edges += g->adj[k];
    g->in_start = calloc((size_t)n + 1, sizeof(int));
    g->out_start = calloc((size_t)n + 1, sizeof(int));
    g->in = malloc((edges ? edges : 1) * sizeof(int));
    g->out = malloc((edges ? edges : 1) * sizeof(int));
    if (!g->in_start || !g->out_start || !g->in || !g->out) return LOOM_ENOMEM;
    int k = 0;
    for (int i = 0; i < n; i++) {
        g->in_start[i] = k;
        for (int j = 0; j < n; j++)
            if (has_edge(g, j, i)) g->in[k++] = j;
    }
    g->in_start[n] = k;
    k = 0;
    for (int i = 0; i < n; i++) {
        g->out_start[i] = k;
        for (int j = 0; j < n; j++)
            if (has_edge(g, i, j)) g->out[k++] = j;
    }
    g->out_start[n] = k;
    return 0;
}

/* 1 if every node reaches every other along the edges (from node 0 forwards and backwards). */
static int strongly_connected(const loom_graph *g)
{
    int n = g->n, ok = 1;
    int *stack = malloc((size_t)n * sizeof(int));
    unsigned char *seen = malloc((size_t)n);
    if (!stack || !seen) {
        free(stack);
        free(seen);
        return 0;
    }
    for (int dir = 0; dir < 2 && ok; dir++) {
        memset(seen, 0, (size_t)n);
        int top = 0, reached = 1;
        stack[top++] = 0;
        seen[0] = 1;
        while (top) {
            int v = stack[--top];
            const int *nb = dir ? g->in + g->in_start[v] : g->out + g->out_start[v];
            int deg =
                dir ? g->in_start[v + 1] - g->in_start[v] : g->out_start[v + 1] - g->out_start[v];
            for (int k = 0; k < deg; k++)
                if (!seen[nb[k]]) seen[nb[k]] = 1, reached++, stack[top++] = nb[k];
        }
        ok = reached == n;
    }
    free(stack);
    free(seen);
    return ok;
}

/* The base-2 van der Corput number of k >= 1: 1/2, 1/4, 3/4, 1/8, 5/8, ... */
static double halton2(unsigned k)
{
    double h = 0, f = 0.5;
    for (; k; k >>= 1, f /= 2)
        if (k & 1) h += f;
    return h;
}

static void builtin_edges(loom_graph *g, const char *spec)
{
    int n = g->n;
    if (!strcmp(spec, "allreduce")) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                if (i != j) add_edge(g, i, j);
    } else if (!strcmp(spec, "ring")) {
        for (int i = 0; i < n && n > 1; i++) add_edge(g, i, (i + 1) % n);
    } else if (!strcmp(spec, "expander")) {
        int root = (int)ceil(sqrt((double)n));
        for (int i = 0; i < n; i++) {
            if ((i + 1) % n != i) add_edge(g, i, (i + 1) % n);
            if ((i + root) % n != i) add_edge(g, i, (i + root) % n);
        }
    } else if (!strcmp(spec, "halton")) {
        /* The ring edge +1 first: it alone makes every circulant graph connected (the Halton
         * offsets of N = 2^k are all even and would split the workers into two halves). */
        int degree = 0, want = n > 1 ? (int)ceil(log2((double)n)) : 0;
        int *offsets = calloc((size_t)n, sizeof(int));
        if (offsets && want) offsets[degree++] = 1;
        for (unsigned k = 1; offsets && degree < want && k < 4u * (unsigned)n; k++) {
            int off = (int)floor(n * halton2(k));
            int fresh = off > 0;
            for (int d = 0; d < degree && fresh; d++) fresh = offsets[d] != off;
            if (fresh) offsets[degree++] = off;
        }
        for (int i = 0; i < n; i++)
            for (int d = 0; d < degree; d++) add_edge(g, i, (i + offsets[d]) % n);
        free(offsets);
    } else { /* star */
        for (int i = 1; i < n; i++) add_edge(g, 0, i), add_edge(g, i, 0);
    }
}

/* An edge-list file: "FROM TO" per line, '#' to the end of a line is a comment. */
static int file_edges(loom_graph *g, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        log_error("graph %s: cannot open: %s (the graph is allreduce, ring, expander, halton, "
                  "star or a file of edges)",
                  path, strerror(errno));
        return LOOM_ECONFIG;
    }
    char line[256];
    int lineno = 0, rc = 0, edges = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            log_error("%s:%d: line longer than %zu bytes", path, lineno, sizeof line - 2);
            rc = LOOM_ECONFIG;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        long from, to;
        char extra;
        int got = sscanf(line, "%ld %ld %c", &from, &to, &extra);
        if (got == EOF) continue; /* blank or comment */
        if (got != 2) {
            log_error("%s:%d: expected two node numbers \"FROM TO\"", path, lineno);
            rc = LOOM_ECONFIG;
        } else if (from < 0 || to < 0 || from >= g->n || to >= g->n) {
            log_error("%s:%d: node %ld is not one of the job's %d workers (0 to %d)", path, lineno,
                      from < 0 || from >= g->n ? from : to, g->n, g->n - 1);
            rc = LOOM_ECONFIG;
        } else if (from == to) {
            log_error("%s:%d: edge %ld -> %ld is a self-loop (every node averages its own "
                      "model already)",
                      path, lineno, from, to);
            rc = LOOM_ECONFIG;
        } else if (!add_edge(g, (int)from, (int)to)) {
            log_error("%s:%d: edge %ld -> %ld given twice", path, lineno, from, to);
            rc = LOOM_ECONFIG;
        } else {
            edges++;
        }
    }
    if (!rc && ferror(f)) {
        log_error("graph %s: read error", path);
        rc = LOOM_ECONFIG;
    }
    fclose(f);
    if (!rc && edges == 0 && g->n > 1) {
        log_error("graph %s: no edges", path);
        rc = LOOM_ECONFIG;
    }
    return rc;
}

int loom_graph_build(const char *spec, int n, loom_graph **out)
{
    if (!spec || !out || n < 1 || n > GRAPH_MAX_NODES) return LOOM_EINVAL;
    *out = NULL;
    loom_graph *g = calloc(1, sizeof *g);
    if (!g) return LOOM_ENOMEM;
    g->n = n;
    g->adj = calloc((size_t)n * (size_t)n, 1);
    int rc = g->adj ? 0 : LOOM_ENOMEM;
    static const char *const builtin[] = {"allreduce", "ring", "expander", "halton", "star"};
    int is_builtin = 0;
    for (size_t k = 0; k < sizeof builtin / sizeof *builtin; k++)
        is_builtin |= !strcmp(spec, builtin[k]);
    if (!rc && is_builtin) builtin_edges(g, spec);
    if (!rc && !is_builtin) rc = file_edges(g, spec);
    if (!rc) rc = index_edges(g);
    if (!rc && !strongly_connected(g)) {
        log_error("graph %s on %d workers is not connected (some worker's model never reaches "
                  "some other; spectral gap 0): the replicas would never agree",
                  spec, n);
        rc = LOOM_ECONFIG;
    }
    if (rc) {
        loom_graph_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

void loom_graph_free(loom_graph *g)
{
    if (!g) return;
    free(g->adj);
    free(g->in_start);
    free(g->in);
    free(g->out_start);
    free(g->out);
    free(g);
}

int loom_graph_nodes(const loom_graph *g)
{
    return g->n;
}

int loom_graph_in_degree(const loom_graph *g, int i)
{
    return g->in_start[i + 1] - g->in_start[i];
}

int loom_graph_in(const loom_graph *g, int i, int k)
{
    return g->in[g->in_start[i] + k];
}

int loom_graph_out_degree(const loom_graph *g, int i)
{
    return g->out_start[i + 1] - g->out_start[i];
}

int loom_graph_out(const loom_graph *g, int i, int k)
{
    return g->out[g->out_start[i] + k];
}

int loom_graph_regular(const loom_graph *g)
{
    for (int i = 1; i < g->n; i++)
        if (loom_graph_in_degree(g, i) != loom_graph_in_degree(g, 0) ||
            loom_graph_out_degree(g, i) != loom_graph_out_degree(g, 0))
            return 0;
    return 1;
}

double loom_graph_weight(const loom_graph *g, int i, int j)
{
    return i == j || has_edge(g, j, i) ? 1.0 / (loom_graph_in_degree(g, i) + 1) : 0.0;
}

/* The eigenvalues of the symmetric n x n matrix a (destroyed) into ev, by cyclic Jacobi
 * rotations until the off-diagonal part is negligible. */
static void jacobi_eigenvalues(double *a, int n, double *ev)
{
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, diag = 0;
        for (int p = 0; p < n; p++)
            for (int q = 0; q < n; q++)
                if (p != q)
                    off += a[p * n + q] * a[p * n + q];
                else
                    diag += a[p * n + p] * a[p * n + p];
        if (off <= 1e-30 * (diag + 1e-300)) break;
        for (int p = 0; p < n - 1; p++) {
            for (int q = p + 1; q < n; q++) {
                double apq = a[p * n + q];
                if (fabs(apq) < 1e-300) continue;
                double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1 : -1) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) { /* columns p, q */
                    double akp = a[k * n + p], akq = a[k * n + q];
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) { /* rows p, q */
                    double apk = a[p * n + k], aqk = a[q * n + k];
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
            }
        }
    }
    for (int k = 0; k < n; k++) ev[k] = a[k * n + k];
}

static int by_value_desc(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a < b) - (a > b);
}

double loom_graph_spectral_gap(const loom_graph *g)
{
    int n = g->n;
    if (n == 1) return 1.0;
    double *p = malloc((size_t)n * (size_t)n * sizeof(double));
    double *m = calloc((size_t)n * (size_t)n, sizeof(double));
    double *ev = malloc((size_t)n * sizeof(double));
    double gap = NAN;
    if (p && m && ev) {
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) p[i * n + j] = loom_graph_weight(g, i, j);
        for (int i = 0; i < n; i++) /* m = P^T P */
            for (int k = 0; k < n; k++) {
                double pki = p[k * n + i];
                if (pki == 0) continue;
                for (int j = 0; j < n; j++) m[i * n + j] += pki * p[k * n + j];
            }
        jacobi_eigenvalues(m, n, ev);
        qsort(ev, (size_t)n, sizeof *ev, by_value_desc);
        gap = 1 - sqrt(ev[1] > 0 ? ev[1] : 0);
    }
    free(p);
    free(m);
    free(ev);
    return gap;
}
