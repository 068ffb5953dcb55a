/* flags: the one command-line parser of the `loom` command (see app.h).
 *
 * Every subcommand describes its flags in a table of app_flag rows; this
 * file reads a command line against such a table and prints its help from
 * it, so that what a command accepts, what it refuses and what its help says
 * come from one place. Values are checked here (kind, range, choices);
 * what only makes sense across flags (an SGD flag with --algo dbpg) is left
 * to the command. */
#include "common/app.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t flag_index(const app_flag *flags, size_t n, const char *name, size_t len)
{
    for (size_t f = 0; f < n; f++)
        if (strlen(flags[f].name) == len && !strncmp(flags[f].name, name, len)) return f;
    return n;
}

/* Choice k of "a|b|c" into buf; 0 if there are fewer. */
static int choice_at(const char *choices, size_t k, char *buf, size_t len)
{
    const char *p = choices;
    for (; k > 0; k--) {
        p = strchr(p, '|');
        if (!p) return 0;
        p++;
    }
    size_t n = strcspn(p, "|");
    if (n >= len) n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return 1;
}

/* "a, b or c", for messages. */
static void choice_list(const char *choices, char *buf, size_t len)
{
    char one[64];
    size_t used = 0, count = 0;
    while (choice_at(choices, count, one, sizeof one)) count++;
    buf[0] = '\0';
    for (size_t k = 0; k < count && used < len; k++) {
        choice_at(choices, k, one, sizeof one);
        const char *sep = k == 0 ? "" : k + 1 == count ? " or " : ", ";
        int w = snprintf(buf + used, len - used, "%s%s", sep, one);
        if (w < 0) break;
        used += (size_t)w;
    }
}

/* A whole number >= 0 in decimal digits: strtoull alone would take blanks,
 * a sign ("-1" wraps to 2^64-1) and stop silently at the first non-digit. */
static int parse_whole(const char *v, uint64_t *out)
{
    if (*v < '0' || *v > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end) return -1;
    *out = x;
    return 0;
}

/* A finite number as strtod reads it, without blanks, "inf" or "nan". */
static int parse_real(const char *v, double *out)
{
    const char *d = v[0] == '-' ? v + 1 : v;
    if (!((*d >= '0' && *d <= '9') || *d == '.')) return -1;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x)) return -1;
    *out = x;
    return 0;
}

static int check_value(const app_flag *f, const char *v, app_flag_value *out, char *err,
                       size_t errlen)
{
    char list[256];
    switch (f->kind) {
    case APP_SWITCH:
        break;
    case APP_INT:
        if (parse_whole(v, &out->u) || out->u < f->lo || out->u > f->hi)
            return app_usage(err, errlen, "%s takes a whole number from %llu to %llu, not '%s'",
                             f->name, (unsigned long long)f->lo, (unsigned long long)f->hi, v);
        break;
    case APP_NUM:
        if (parse_real(v, &out->x) || !(out->x >= f->min && out->x <= f->max))
            return app_usage(err, errlen, "%s takes a number from %g to %g, not '%s'", f->name,
                             f->min, f->max, v);
        break;
    case APP_CHOICE: {
        char one[64];
        size_t k = 0;
        while (choice_at(f->arg, k, one, sizeof one) && strcmp(one, v)) k++;
        if (!choice_at(f->arg, k, one, sizeof one)) {
            choice_list(f->arg, list, sizeof list);
            return app_usage(err, errlen, "%s takes %s, not '%s'", f->name, list, v);
        }
        out->choice = k;
        break;
    }
    case APP_TEXT:
        if (!v[0]) return app_usage(err, errlen, "%s needs a non-empty %s", f->name, f->arg);
        break;
    }
    out->text = v;
    return 0;
}

int app_flags_parse(const app_flag *flags, size_t n, int argc, char **argv, int first,
                    app_flag_value *values, int *program, char *err, size_t errlen)
{
    for (size_t f = 0; f < n; f++) values[f] = (app_flag_value){0};
    int i = first;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) return APP_FLAGS_HELP;
        if (program && !strcmp(arg, "--")) {
            i++;
            break;
        }
        if (arg[0] != '-' || !arg[1]) {
            if (program) break; /* PROGRAM: the rest is its own */
            return app_usage(err, errlen, "unexpected argument '%s'", arg);
        }
        /* "--name value" or "--name=value" */
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        size_t f = flag_index(flags, n, arg, len);
        if (f == n) return app_usage(err, errlen, "unknown flag '%.*s'", (int)len, arg);
        const app_flag *fl = &flags[f];
        if (values[f].text) return app_usage(err, errlen, "%s given twice", fl->name);
        const char *v;
        if (fl->kind == APP_SWITCH) {
            if (eq) return app_usage(err, errlen, "%s takes no value", fl->name);
            v = "";
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            return app_usage(err, errlen, "%s needs a value (%s)", fl->name, fl->arg);
        }
        if (check_value(fl, v, &values[f], err, errlen)) return 2;
    }
    for (size_t f = 0; f < n; f++) {
        if (!values[f].text || !flags[f].excludes) continue;
        size_t g = flag_index(flags, n, flags[f].excludes, strlen(flags[f].excludes));
        if (g < n && values[g].text)
            return app_usage(err, errlen, "%s and %s exclude each other; give one of them",
                             flags[f].name, flags[g].name);
    }
    if (program) {
        if (i >= argc) return app_usage(err, errlen, "missing PROGRAM to run");
        *program = i;
    }
    return 0;
}

const app_flag_value *app_flag_get(const app_flag *flags, size_t n, const app_flag_value *values,
                                   const char *name)
{
    size_t f = flag_index(flags, n, name, strlen(name));
    return f < n && values[f].text ? &values[f] : NULL;
}

#define HELP_COLUMN 26

void app_flags_help(FILE *out, const app_flag *flags, size_t n)
{
    for (size_t f = 0; f < n; f++) {
        const app_flag *fl = &flags[f];
        if (fl->section) fprintf(out, "%s\n", fl->section);
        char head[128];
        snprintf(head, sizeof head, "  %s%s%s", fl->name, fl->arg ? " " : "",
                 fl->arg ? fl->arg : "");
        fputs(head, out);
        /* The help, its continuation lines aligned, then range and default. */
        int col = (int)strlen(head);
        for (const char *p = fl->help; *p;) {
            size_t len = strcspn(p, "\n");
            fprintf(out, "%*s%.*s", col < HELP_COLUMN ? HELP_COLUMN - col : 1, "", (int)len, p);
            p += len;
            if (*p) {
                p++;
                fputc('\n', out);
                col = 0;
            }
        }
        if (fl->kind == APP_INT)
            fprintf(out, "; %llu to %llu", (unsigned long long)fl->lo, (unsigned long long)fl->hi);
        else if (fl->kind == APP_NUM)
            fprintf(out, "; %g to %g", fl->min, fl->max);
        if (fl->def) fprintf(out, " (default %s)", fl->def);
        fputc('\n', out);
    }
}
