/* textfile: what every sharded text reader shares (libsvm.c, ratings.c, bow.c):
 * loading a file, cutting it into shares on line boundaries, a newline at the
 * end of every line, locale-independent parsing and "FILE:LINE: what" errors.
 *
 * Loading. A regular file is mapped, not read. A pipe or terminal
 * (/dev/stdin) is read whole into memory, which only one share can do: its
 * bytes go to whoever reads them first. Other devices (/dev/zero, which
 * never ends) are refused.
 *
 * Shares. Share i of n owns every line whose first byte lies in the byte
 * range [edge(i), edge(i+1)), edge(i) = floor(i * size / n): a share whose
 * range starts mid-line skips to the next line start, and its last line may
 * run past the range's end. Every line starts in exactly one range, so every
 * line is read by exactly one share without anyone splitting the file, and a
 * range holding no line start gives an empty share. Readers whose records
 * span several lines (bow.c's UCI documents) move these line boundaries
 * further by a rule that both neighbours compute alike. Line numbers in
 * messages are absolute: a share counts the newlines before its first line
 * (memchr, 10-20 GB/s).
 *
 * Sentinel. Every line a reader sees ends with '\n': the file's last line,
 * when it lacks one, is served from a copy that has it (textfile_line,
 * textfile_parse). So a token loop stops at a byte that cannot continue the
 * token, at the latest the newline, and needs no end-of-buffer check; "\r\n"
 * ends a line too (textfile_eol).
 *
 * Messages. A malformed line is described by textfile_fail() into a
 * textfile_fault (what, and where in the line parsing stopped, so that
 * skip_bad can resume at the next line) and reported by textfile_report() as
 * "PATH:LINE: what"; bad tokens are quoted by textfile_quote(). */
#ifndef LOOM_IO_TEXTFILE_H
#define LOOM_IO_TEXTFILE_H

#include <locale.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TEXTFILE_TOKEN_SHOWN 40 /* at most this many bytes of a bad token are quoted */
#define TEXTFILE_QUOTED      (TEXTFILE_TOKEN_SHOWN + 4) /* room for a quote: "...", NUL */

/* A file's contents, s[0, size): mapped for a regular file, else read whole. */
typedef struct textfile {
    const char *path;
    const char *s;
    size_t size;
    size_t tail; /* where the last line starts if it lacks its newline, else size */
    char *last;  /* that last line plus a newline (size - tail + 1 bytes), or NULL */
    void *map;   /* the mapping, or NULL */
    char *loaded;
    locale_t c_locale, old_locale; /* set by textfile_c_locale, or 0 */
} textfile;

/* Opens path for a reader of one of nshards shares (a pipe only for one).
 * Returns 0, or LOOM_ENOTFOUND / LOOM_EINVAL / LOOM_ENOMEM with "PATH: what"
 * in err. After a failure f needs no textfile_close (it does no harm). */
int textfile_open(textfile *f, const char *path, int nshards, char *err, size_t errlen);
/* Unmaps or frees the contents and restores the thread's locale. */
void textfile_close(textfile *f);
/* Switches the calling thread to the "C" locale until textfile_close, so that
 * strtod()/strtof() read '.' as the decimal point whatever setlocale() said.
 * Returns 0 or LOOM_ENOMEM. */
int textfile_c_locale(textfile *f);

/* Reads share `shard` of `nshards` of f into ctx, the reader's state. Returns
 * 0 or an error code with the message in err. */
typedef int (*textfile_share_fn)(void *ctx, const textfile *f, int shard, int nshards);
/* What the readers' public read functions share around read_share: checks the
 * arguments ("PATH: invalid arguments (share I of N)" unless path and the
 * result pointer (has_out) are given and 0 <= shard < nshards), reports
 * bad_opts if the caller found its options invalid ("PATH: bad_opts"), opens
 * path, switches to the "C" locale if c_locale, runs read_share and closes the
 * file. Returns 0 or LOOM_EINVAL / LOOM_ENOTFOUND / LOOM_ENOMEM or
 * read_share's error, with the message in err; on an error the caller frees
 * whatever read_share left in ctx. */
int textfile_read(const char *path, int shard, int nshards, int has_out, const char *bad_opts,
                  int c_locale, textfile_share_fn read_share, void *ctx, char *err, size_t errlen);

/* floor(i * size / n), the first byte of share i's range. */
size_t textfile_edge(size_t size, int i, int n);
/* The first line start at or after pos (pos itself if a line starts there;
 * size if none does). */
size_t textfile_line_start(const textfile *f, size_t pos);
/* The start of the line after the one holding pos (size after the last). */
size_t textfile_next_line(const textfile *f, size_t pos);
/* The bytes from pos (< size) to the end of its line, which end with '\n':
 * the mapping, or for the unterminated last line its copy. */
static inline const char *textfile_line(const textfile *f, size_t pos)
{
    return pos < f->tail ? f->s + pos : f->last + (pos - f->tail);
}
/* Newlines in [p, p + n). */
size_t textfile_count_newlines(const char *p, size_t n);

/* Parses lines: called with p at a line start and stop <= end, each line
 * from p on ending with a newline before end; parses the lines starting in
 * [p, stop). Returns 0 or an error code. */
typedef int (*textfile_lines_fn)(void *ctx, const char *p, const char *stop, const char *end);
/* Runs fn over the lines starting in [from, to) (from a line start), first
 * those of the mapping and then, if it is among them, the copy of the
 * unterminated last line. Returns 0 or fn's error. */
int textfile_parse(const textfile *f, size_t from, size_t to, textfile_lines_fn fn, void *ctx);

static inline int textfile_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* End of the line's content: the newline, or "\r\n". */
static inline int textfile_eol(const char *p)
{
    return *p == '\n' || (*p == '\r' && p[1] == '\n');
}

/* The start of the line after the one holding p, which ends before end. */
static inline const char *textfile_after_line(const char *p, const char *end)
{
    return (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
}

/* Why the current line is malformed, and where parsing stopped in it. */
typedef struct textfile_fault {
    const char *at;
    char msg[160];
} textfile_fault;

/* Records why the current line is malformed; returns LOOM_EINVAL. */
int textfile_fail(textfile_fault *why, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Puts the error rc met at line `line` into err: "PATH:LINE: out of memory"
 * for LOOM_ENOMEM, else "PATH:LINE: why->msg". Returns rc. */
int textfile_report(const textfile *f, size_t line, int rc, const textfile_fault *why, char *err,
                    size_t errlen);
/* printf into err (if err and errlen). */
void textfile_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The token at p as quoted in a message: up to a blank, the end of the line,
 * the byte `stop` or TEXTFILE_TOKEN_SHOWN bytes ("..." marks the cut),
 * unprintable bytes as '?' (the input may be binary garbage). */
const char *textfile_quote(const char *p, char stop, char out[TEXTFILE_QUOTED]);

#endif
