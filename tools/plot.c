/* loom plot: overlay the metrics of several runs in one PNG.
 *
 * `loom plot METRICS.jsonl... --x epoch|time_s|bytes [--y KEY] --out FILE.png`
 * reads the JSON-lines files that `loom train --metrics` writes (one flat JSON
 * object per epoch or iteration), takes one point per line, and hands the
 * points to gnuplot (a Debian package, scripts/install-deps.sh) as inline data,
 * one line per file, named after the file (its path where two files share a name). The x axis is
 * the epoch (LDA's "iteration" where a line has no "epoch"), the run's time, or the bytes its
 * workers sent and received; the y axis any numeric key, by default the model's
 * main metric (the first of main_metrics in the first line of the first file). Lines whose y is
 * null (a test metric without --test) are left out; a line without the key, a line that is not a
 * flat JSON object, or a file with no point stops the command with the file and line named. */
#include "commands.h"

#include "common/app.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINE_MAX_BYTES 65536
#define KEY_MAX        64

static const app_flag plot_flags[] = {
    {.name = "--x",
     .kind = APP_CHOICE,
     .arg = "epoch|time_s|bytes",
     .def = "epoch",
     .help = "the x axis: epoch (LDA: iteration), seconds since the start, or\n"
             "bytes_sent + bytes_received"},
    {.name = "--y",
     .kind = APP_TEXT,
     .arg = "KEY",
     .help = "the metric to plot (objective, test_rmse, log_likelihood, ...); default:\n"
             "the first of test_logloss, test_rmse, test_perplexity, test_accuracy,\n"
             "log_likelihood, objective, train_logloss, train_rmse the first line has"},
    {.name = "--out", .kind = APP_TEXT, .arg = "FILE", .help = "the PNG to write; required"},
    {.name = "--title", .kind = APP_TEXT, .arg = "TEXT", .help = "a title above the plot"},
};
#define NFLAGS (sizeof plot_flags / sizeof plot_flags[0])

enum { X_EPOCH, X_TIME, X_BYTES };

static void print_help(FILE *out)
{
    fputs("Usage: loom plot METRICS.jsonl... --out FILE.png [--y KEY] [--x epoch|time_s|bytes]\n"
          "\n"
          "Overlay the metrics files of several runs (loom train --metrics) in one PNG,\n"
          "one line per file, named after the file. Needs gnuplot (gnuplot-nox).\n"
          "\n",
          out);
    app_flags_help(out, plot_flags, NFLAGS);
}

static int usage(const char *fmt, const char *arg)
{
    fputs("loom plot: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\nRun 'loom help plot' for the options.\n", stderr);
    return 2;
}

/* ---- a flat JSON object ---- */

/* The value of `key` in the flat JSON object `line`: 1 and *x for a number,
 * 0 for null, -1 if the key is absent, -2 if the line is not a flat JSON
 * object (strings may hold anything but their quote; values are numbers,
 * strings, true, false or null). A key with a string or boolean value is 0. */
static int json_number(const char *line, const char *key, double *x)
{
    const char *p = line;
    int found = -1;
#define SKIP_BLANKS()                                                                              \
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++
    SKIP_BLANKS();
    if (*p++ != '{') return -2;
    SKIP_BLANKS();
    if (*p == '}') goto end;
    for (;;) {
        SKIP_BLANKS();
        if (*p++ != '"') return -2;
        const char *name = p;
        while (*p && *p != '"') p += *p == '\\' && p[1] ? 2 : 1;
        if (*p != '"') return -2;
        int match = (size_t)(p - name) == strlen(key) && !strncmp(name, key, strlen(key));
        p++;
        SKIP_BLANKS();
        if (*p++ != ':') return -2;
        SKIP_BLANKS();
        if (*p == '"') {
            for (p++; *p && *p != '"';) p += *p == '\\' && p[1] ? 2 : 1;
            if (*p++ != '"') return -2;
            if (match) found = 0;
        } else if (!strncmp(p, "null", 4) || !strncmp(p, "true", 4)) {
            p += 4;
            if (match) found = 0;
        } else if (!strncmp(p, "false", 5)) {
            p += 5;
            if (match) found = 0;
        } else {
            char *end;
            errno = 0;
            double v = strtod(p, &end);
            if (end == p || errno == ERANGE || !isfinite(v)) return -2;
            p = end;
            if (match) {
                found = 1;
                *x = v;
            }
        }
        SKIP_BLANKS();
        if (*p == '}') break;
        if (*p++ != ',') return -2;
    }
end:
    p++;
    SKIP_BLANKS();
#undef SKIP_BLANKS
    return *p ? -2 : found;
}

/* ---- the runs ---- */

typedef struct run {
    const char *path;
    double *x, *y;
    size_t n, cap;
} run;

static int add_point(run *r, double x, double y)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        double *nx = realloc(r->x, cap * sizeof *nx);
        if (!nx) return -1;
        r->x = nx;
        double *ny = realloc(r->y, cap * sizeof *ny);
        if (!ny) return -1;
        r->y = ny;
        r->cap = cap;
    }
    r->x[r->n] = x;
    r->y[r->n] = y;
    r->n++;
    return 0;
}

/* The x of a line; 0 with a message on stderr if it has none. */
static int line_x(const char *path, size_t lineno, const char *line, int axis, double *x)
{
    double sent, received;
    switch (axis) {
    case X_EPOCH:
        if (json_number(line, "epoch", x) == 1 || json_number(line, "iteration", x) == 1) return 1;
        fprintf(stderr, "loom plot: %s:%zu: no numeric \"epoch\" or \"iteration\"\n", path, lineno);
        return 0;
    case X_TIME:
        if (json_number(line, "time_s", x) == 1) return 1;
        fprintf(stderr, "loom plot: %s:%zu: no numeric \"time_s\"\n", path, lineno);
        return 0;
    default:
        if (json_number(line, "bytes_sent", &sent) == 1 &&
            json_number(line, "bytes_received", &received) == 1) {
            *x = sent + received;
            return 1;
        }
        fprintf(stderr, "loom plot: %s:%zu: no numeric \"bytes_sent\" and \"bytes_received\"\n",
                path, lineno);
        return 0;
    }
}

/* Read one file's points; 0, or 1 with a message on stderr. */
static int read_run(run *r, int axis, const char *ykey)
{
    FILE *f = fopen(r->path, "r");
    if (!f) {
        fprintf(stderr, "loom plot: cannot read %s: %s\n", r->path, strerror(errno));
        return 1;
    }
    static char line[LINE_MAX_BYTES];
    size_t lineno = 0, nulls = 0;
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len == sizeof line - 1 && line[len - 1] != '\n') {
            fprintf(stderr, "loom plot: %s:%zu: line longer than %d bytes\n", r->path, lineno,
                    LINE_MAX_BYTES - 2);
            rc = 1;
            break;
        }
        if (strspn(line, " \t\r\n") == len) continue; /* a blank line */
        double x, y;
        int got = json_number(line, ykey, &y);
        if (got == -2) {
            fprintf(stderr, "loom plot: %s:%zu: not a flat JSON object (loom train --metrics)\n",
                    r->path, lineno);
            rc = 1;
            break;
        }
        if (got == -1) {
            fprintf(stderr, "loom plot: %s:%zu: no key \"%s\"\n", r->path, lineno, ykey);
            rc = 1;
            break;
        }
        if (got == 0) {
            nulls++;
            continue;
        }
        if (!line_x(r->path, lineno, line, axis, &x)) {
            rc = 1;
            break;
        }
        if (add_point(r, x, y)) {
            fprintf(stderr, "loom plot: out of memory reading %s\n", r->path);
            rc = 1;
            break;
        }
    }
    if (!rc && ferror(f)) {
        fprintf(stderr, "loom plot: cannot read %s: %s\n", r->path, strerror(errno));
        rc = 1;
    }
    fclose(f);
    if (!rc && r->n == 0) {
        if (nulls)
            fprintf(stderr, "loom plot: %s: \"%s\" is never a number (null or text)\n", r->path,
                    ykey);
        else
            fprintf(stderr, "loom plot: %s: no metrics lines\n", r->path);
        rc = 1;
    }
    return rc;
}

/* A model's main metric, in the order a user judges a run by: held-out
 * quality first (null without --test, so skipped), then the training
 * objective. Every model's metrics line has one of them. */
static const char *const main_metrics[] = {
    "test_logloss",   "test_rmse", "test_perplexity", "test_accuracy",
    "log_likelihood", "objective", "train_logloss",   "train_rmse",
};

/* The first of main_metrics that is a number in the first metrics line of
 * path; NULL (said on stderr) if none is. */
static const char *default_y(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "loom plot: cannot read %s: %s\n", path, strerror(errno));
        return NULL;
    }
    static char line[LINE_MAX_BYTES];
    const char *key = NULL;
    while (!key && fgets(line, sizeof line, f)) {
        if (strspn(line, " \t\r\n") == strlen(line)) continue; /* a blank line */
        for (size_t k = 0; !key && k < sizeof main_metrics / sizeof *main_metrics; k++) {
            double v;
            if (json_number(line, main_metrics[k], &v) == 1) key = main_metrics[k];
        }
        break;
    }
    fclose(f);
    if (!key)
        fprintf(stderr,
                "loom plot: %s: its first line has none of the usual metrics (test_logloss, "
                "objective, ...): name one with --y KEY\n",
                path);
    return key;
}

/* ---- gnuplot ---- */

/* Whether an executable `name` is on PATH. */
static int on_path(const char *name)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char dir[4096];
    while (*path) {
        size_t len = strcspn(path, ":");
        if (len > 0 && len < sizeof dir - strlen(name) - 2) {
            snprintf(dir, sizeof dir, "%.*s/%s", (int)len, path, name);
            if (access(dir, X_OK) == 0) return 1;
        }
        path += len;
        if (*path == ':') path++;
    }
    return 0;
}

/* s as a gnuplot single-quoted string (where '' is a quote). */
static void put_quoted(FILE *g, const char *s)
{
    fputc('\'', g);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', g);
        if (*s != '\n') fputc(*s, g);
    }
    fputc('\'', g);
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* The legend of run i: its file name without ".jsonl", or its path as given
 * when another run has the same file name. */
static void put_title(FILE *g, const run *runs, int nruns, int i)
{
    const char *base = base_name(runs[i].path);
    for (int k = 0; k < nruns; k++)
        if (k != i && !strcmp(base_name(runs[k].path), base)) base = runs[i].path;
    char name[256];
    snprintf(name, sizeof name, "%s", base);
    size_t len = strlen(name);
    if (len > 6 && !strcmp(name + len - 6, ".jsonl")) name[len - 6] = '\0';
    put_quoted(g, name);
}

static int plot(const run *runs, int nruns, int axis, const char *ykey, const char *out,
                const char *title)
{
    static const char *const xlabels[] = {"epoch", "time (s)", "bytes sent + received"};
    /* Whether OUT can be written, asked here: gnuplot, told to write where it
     * cannot, goes on and writes the image to its standard output instead
     * (which goes to /dev/null for that reason). */
    FILE *probe = fopen(out, "wb");
    if (!probe) {
        fprintf(stderr, "loom plot: cannot write %s: %s\n", out, strerror(errno));
        return 1;
    }
    fclose(probe);
    FILE *g = popen("exec gnuplot >/dev/null", "w");
    if (!g) {
        fprintf(stderr, "loom plot: cannot start gnuplot: %s\n", strerror(errno));
        remove(out);
        return 1;
    }
    fputs("set terminal pngcairo size 900,560 noenhanced\nset output ", g);
    put_quoted(g, out);
    fputs("\nset grid\nset key outside right top\nset xlabel ", g);
    put_quoted(g, xlabels[axis]);
    fputs("\nset ylabel ", g);
    put_quoted(g, ykey);
    if (title) {
        fputs("\nset title ", g);
        put_quoted(g, title);
    }
    if (axis == X_BYTES) fputs("\nset format x '%.1s%cB'", g);
    fputs("\nplot ", g);
    for (int i = 0; i < nruns; i++) {
        fputs(i ? ", '-' using 1:2 with linespoints title "
                : "'-' using 1:2 with linespoints title ",
              g);
        put_title(g, runs, nruns, i);
    }
    fputc('\n', g);
    for (int i = 0; i < nruns; i++) {
        for (size_t k = 0; k < runs[i].n; k++)
            fprintf(g, "%.17g %.17g\n", runs[i].x[k], runs[i].y[k]);
        fputs("e\n", g);
    }
    int status = pclose(g);
    struct stat st;
    if (status != 0 || stat(out, &st) != 0 || st.st_size == 0) {
        fprintf(stderr, "loom plot: gnuplot failed to write %s (its message is above)\n", out);
        remove(out);
        return 1;
    }
    return 0;
}

int cmd_plot(int argc, char **argv)
{
    /* The files are the arguments that are neither flags nor a flag's value;
     * the flags go to the table parser. */
    char **flag_args = calloc((size_t)argc + 1, sizeof *flag_args);
    run *runs = calloc((size_t)argc + 1, sizeof *runs);
    if (!flag_args || !runs) {
        free(flag_args);
        free(runs);
        fputs("loom plot: out of memory\n", stderr);
        return 1;
    }
    int nflag = 1, nruns = 0;
    flag_args[0] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1]) {
            flag_args[nflag++] = argv[i];
            size_t len = strcspn(a, "=");
            for (size_t f = 0; f < NFLAGS; f++)
                if (!a[len] && !strcmp(plot_flags[f].name, a) && plot_flags[f].kind != APP_SWITCH &&
                    i + 1 < argc)
                    flag_args[nflag++] = argv[++i];
        } else {
            runs[nruns++].path = a;
        }
    }
    app_flag_value v[NFLAGS];
    char err[512];
    int rc = app_flags_parse(plot_flags, NFLAGS, nflag, flag_args, 1, v, NULL, err, sizeof err);
    const app_flag_value *x = app_flag_get(plot_flags, NFLAGS, v, "--x");
    const app_flag_value *y = app_flag_get(plot_flags, NFLAGS, v, "--y");
    const app_flag_value *out = app_flag_get(plot_flags, NFLAGS, v, "--out");
    const app_flag_value *title = app_flag_get(plot_flags, NFLAGS, v, "--title");
    if (rc == APP_FLAGS_HELP) {
        print_help(stdout);
        rc = 0;
    } else if (rc) {
        rc = usage("%s", err);
    } else if (nruns == 0) {
        rc = usage("%s", "no METRICS.jsonl file given");
    } else if (y && strlen(y->text) > KEY_MAX) {
        rc = usage("--y: '%s' is too long for a metric name", y->text);
    } else if (!out || !*out->text) {
        rc = usage("%s", "--out FILE.png is required");
    } else if (!on_path("gnuplot")) {
        fputs("loom plot: gnuplot is not installed (not on PATH): install Debian's gnuplot-nox "
              "(scripts/install-deps.sh)\n",
              stderr);
        rc = 1;
    } else {
        int axis = x ? (int)x->choice : X_EPOCH;
        const char *ykey = y ? y->text : default_y(runs[0].path);
        if (!ykey) rc = 1;
        for (int i = 0; i < nruns && rc == 0; i++) rc = read_run(&runs[i], axis, ykey);
        if (rc == 0) rc = plot(runs, nruns, axis, ykey, out->text, title ? title->text : NULL);
    }
    for (int i = 0; i < nruns; i++) {
        free(runs[i].x);
        free(runs[i].y);
    }
    free(runs);
    free(flag_args);
    return rc;
}
