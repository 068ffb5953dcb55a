/* files: the checkpoint's bytes on disk (see ft.h for the layout).
 *
 * Everything read here is untrusted: a checkpoint directory may be truncated
 * by a crash, edited by hand or damaged by a disk, so every length is checked
 * before use and every problem is reported with the file it is in. Writes are
 * atomic per file (temporary name, fsync, rename, fsync of the directory), so
 * a reader sees a whole file or none. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/msg.h"
#include "ft/ft.h"
#include "loom/error.h"

/* ---- CRC-32C ---- */

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t ft_crc32c(uint32_t crc, const void *data, size_t len)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc_init);
    const uint8_t *p = data;
    crc = ~crc;
    /* Slicing by 8: eight table lookups per 8 bytes (a few hundred MB/s and more). */
    while (len >= 8) {
        uint64_t v = msg_load_u64(p) ^ crc;
        crc = crc_table[7][v & 0xff] ^ crc_table[6][(v >> 8) & 0xff] ^
              crc_table[5][(v >> 16) & 0xff] ^ crc_table[4][(v >> 24) & 0xff] ^
              crc_table[3][(v >> 32) & 0xff] ^ crc_table[2][(v >> 40) & 0xff] ^
              crc_table[1][(v >> 48) & 0xff] ^ crc_table[0][v >> 56];
        p += 8;
        len -= 8;
    }
    while (len--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

/* ---- headers ---- */

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void ft_header_encode(const ft_header *h, uint8_t out[FT_HEADER_SIZE])
{
    memcpy(out, FT_MAGIC, 8);
    put_u32(out + 8, FT_VERSION);
    put_u32(out + 12, h->kind);
    msg_store_u64(out + 16, (uint64_t)h->clock);
    put_u32(out + 24, h->rank);
    put_u32(out + 28, h->servers);
    put_u32(out + 32, h->workers);
    put_u32(out + 36, h->full);
}

int ft_header_decode(const uint8_t *in, size_t len, ft_header *h, char *why, size_t whylen)
{
    if (len < FT_HEADER_SIZE || memcmp(in, FT_MAGIC, 8)) {
        snprintf(why, whylen, "not a Loom checkpoint part (no %s header)", FT_MAGIC);
        return -1;
    }
    if (get_u32(in + 8) != FT_VERSION) {
        snprintf(why, whylen, "format version %u, this Loom reads %d", get_u32(in + 8), FT_VERSION);
        return -1;
    }
    h->kind = get_u32(in + 12);
    h->clock = (int64_t)msg_load_u64(in + 16);
    h->rank = get_u32(in + 24);
    h->servers = get_u32(in + 28);
    h->workers = get_u32(in + 32);
    h->full = get_u32(in + 36);
    return 0;
}

/* ---- atomic files ---- */

/* A write failed (errno). ENOENT: the scheduler removed the checkpoint's
 * directory under the writer, as it does when it gives a checkpoint up
 * (plan.c): expected, so not an error. */
static void gone_or_error(ft_file *f, const char *fmt)
{
    f->gone = errno == ENOENT;
    if (f->gone)
        log_info("checkpoint file %s not written: the checkpoint was given up", f->shown);
    else
        log_error(fmt, f->shown, strerror(errno));
}

int ft_file_open(ft_file *f, int dirfd, const char *shown_dir, const char *name)
{
    memset(f, 0, sizeof *f);
    f->dirfd = dirfd;
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp", name);
    snprintf(f->shown, sizeof f->shown, "%s/%s", shown_dir, name);
    /* A temporary name left by a crash, or planted: unlinkat removes the
     * name itself, never what a link points to, and O_EXCL|O_NOFOLLOW then
     * makes a new file or fails. */
    if (unlinkat(dirfd, f->tmp, 0) && errno != ENOENT && errno != EISDIR)
        log_warn("checkpoint file %s.tmp: cannot remove the old one: %s", f->shown,
                 strerror(errno));
    f->fd = openat(dirfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (f->fd < 0) {
        gone_or_error(f, "cannot write checkpoint file %s.tmp: %s");
        return LOOM_EIO;
    }
    return 0;
}

int ft_file_write(ft_file *f, const void *data, size_t len)
{
    const uint8_t *p = data;
    f->crc = ft_crc32c(f->crc, data, len);
    f->size += len;
    while (len) {
        ssize_t w = write(f->fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            log_error("cannot write checkpoint file %s.tmp: %s", f->shown,
                      w < 0 ? strerror(errno) : "no space left");
            return LOOM_EIO;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int ft_file_commit(ft_file *f, int sync)
{
    int rc = sync ? fsync(f->fd) : 0;
    if (close(f->fd) || rc) {
        log_error("cannot sync checkpoint file %s.tmp: %s", f->shown, strerror(errno));
        unlinkat(f->dirfd, f->tmp, 0);
        return LOOM_EIO;
    }
    if (renameat(f->dirfd, f->tmp, f->dirfd, f->name) || (sync && fsync(f->dirfd))) {
        gone_or_error(f, "cannot put checkpoint file %s in place: %s");
        unlinkat(f->dirfd, f->tmp, 0);
        return LOOM_EIO;
    }
    return 0;
}

void ft_file_abort(ft_file *f)
{
    close(f->fd);
    unlinkat(f->dirfd, f->tmp, 0);
}

/* ---- the manifest ---- */

int64_t ft_part_clock(const ft_part *p)
{
    return strtoll(p->path + 5, NULL, 10);
}

void ft_manifest_free(ft_manifest *m)
{
    free(m->parts);
    free(m->moved);
    m->parts = NULL;
    m->moved = NULL;
    m->nparts = 0;
}

/* "ckpt-<12 digits>/server-<rank>.part" or worker-: nothing that could leave DIR. */
static int path_ok(const char *p, uint32_t kind, uint32_t rank)
{
    char want[FT_PATH_MAX];
    if (strncmp(p, "ckpt-", 5)) return 0;
    for (int i = 5; i < 17; i++)
        if (p[i] < '0' || p[i] > '9') return 0;
    snprintf(want, sizeof want, "/%s-%u.part", kind == FT_SERVER ? "server" : "worker", rank);
    return !strcmp(p + 17, want);
}

/* A whole number in [0, max] spelled in decimal (hex with base 16), the whole token. */
static int parse_u64(const char *tok, int base, uint64_t max, uint64_t *out)
{
    if (!*tok || strlen(tok) > 20) return 0;
    uint64_t v = 0;
    for (const char *p = tok; *p; p++) {
        int d = *p >= '0' && *p <= '9'                 ? *p - '0'
                : base == 16 && *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
                                                       : -1;
        if (d < 0 || v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return 0;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    if (v > max) return 0;
    *out = v;
    return 1;
}

#define MAX_PARTS (1u << 20)

int ft_manifest_parse(const char *text, size_t len, ft_manifest *m, char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    m->clock = -1;
    size_t cap = 0;
    int lineno = 0, have_end = 0, have_servers = 0, have_workers = 0, have_model = 0;
    size_t pos = 0;
    while (pos < len && !have_end) {
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        lineno++;
        if (!nl) {
            snprintf(why, whylen, "line %d: truncated (no newline)", lineno);
            goto bad;
        }
        size_t ll = (size_t)(nl - line);
        char buf[256];
        if (ll >= sizeof buf || memchr(line, '\0', ll)) {
            snprintf(why, whylen, "line %d: too long or not text", lineno);
            goto bad;
        }
        memcpy(buf, line, ll);
        buf[ll] = '\0';
        char *tok[8];
        int nt = 0;
        for (char *save, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
            if (nt == 8) {
                snprintf(why, whylen, "line %d: too many fields", lineno);
                goto bad;
            }
            tok[nt++] = t;
        }
        uint64_t v;
        if (lineno == 1) {
            if (nt != 2 || strcmp(tok[0], "loom-checkpoint") || strcmp(tok[1], "1")) {
                snprintf(why, whylen, "line 1: not a Loom checkpoint manifest of version 1");
                goto bad;
            }
        } else if (nt == 2 && !strcmp(tok[0], "clock") && m->clock < 0 &&
                   parse_u64(tok[1], 10, INT64_MAX, &v)) {
            m->clock = (int64_t)v;
        } else if (nt == 2 && !strcmp(tok[0], "model") && !have_model &&
                   strlen(tok[1]) < FT_MODEL_MAX) {
            snprintf(m->model, sizeof m->model, "%s", tok[1]);
            have_model = 1;
        } else if (nt == 2 && !strcmp(tok[0], "servers") && !have_servers &&
                   parse_u64(tok[1], 10, LOOM_MAX_SERVERS, &v) && v > 0) {
            m->servers = (uint32_t)v;
            have_servers = 1;
        } else if (nt == 2 && !strcmp(tok[0], "workers") && !have_workers &&
                   parse_u64(tok[1], 10, LOOM_MAX_WORKERS, &v) && v > 0) {
            m->workers = (uint32_t)v;
            have_workers = 1;
        } else if (nt == 7 && !strcmp(tok[0], "part") && have_servers && have_workers) {
            ft_part p = {0};
            uint64_t rank, size, crc;
            p.kind = !strcmp(tok[1], "server")   ? FT_SERVER
                     : !strcmp(tok[1], "worker") ? FT_WORKER
                                                 : 0;
            p.full = !strcmp(tok[3], "full") ? 1 : !strcmp(tok[3], "incr") ? 0 : 2;
            if (!p.kind || p.full > 1 ||
                !parse_u64(tok[2], 10, p.kind == FT_SERVER ? m->servers - 1 : m->workers - 1,
                           &rank) ||
                strlen(tok[4]) >= FT_PATH_MAX || !path_ok(tok[4], p.kind, (uint32_t)rank) ||
                !parse_u64(tok[5], 10, INT64_MAX, &size) || strlen(tok[6]) != 8 ||
                !parse_u64(tok[6], 16, UINT32_MAX, &crc)) {
                snprintf(why, whylen, "line %d: malformed part record", lineno);
                goto bad;
            }
            p.rank = (uint32_t)rank;
            snprintf(p.path, sizeof p.path, "%s", tok[4]);
            p.size = size;
            p.crc = (uint32_t)crc;
            if (m->nparts == MAX_PARTS) {
                snprintf(why, whylen, "line %d: too many parts", lineno);
                goto bad;
            }
            if (m->nparts == cap) {
                cap = cap ? 2 * cap : 16;
                ft_part *np = realloc(m->parts, cap * sizeof *np);
                if (!np) {
                    snprintf(why, whylen, "out of memory");
                    goto bad;
                }
                m->parts = np;
            }
            m->parts[m->nparts++] = p;
        } else if (nt == 2 && !strcmp(tok[0], "moved") && have_servers &&
                   parse_u64(tok[1], 10, m->servers - 1, &v)) {
            if (!m->moved && !(m->moved = calloc(m->servers, 1))) {
                snprintf(why, whylen, "out of memory");
                goto bad;
            }
            if (m->moved[v]) {
                snprintf(why, whylen, "line %d: server %" PRIu64 " moved twice", lineno, v);
                goto bad;
            }
            m->moved[v] = 1;
        } else if (nt == 2 && !strcmp(tok[0], "end") && strlen(tok[1]) == 8 &&
                   parse_u64(tok[1], 16, UINT32_MAX, &v)) {
            if (ft_crc32c(0, text, pos) != (uint32_t)v) {
                snprintf(why, whylen, "checksum mismatch (the manifest is corrupt)");
                goto bad;
            }
            have_end = 1;
        } else {
            snprintf(why, whylen, "line %d: unexpected \"%.40s\"", lineno, line);
            goto bad;
        }
        pos += ll + 1;
    }
    if (!have_end) {
        snprintf(why, whylen, "truncated (no end line)");
        goto bad;
    }
    if (pos != len) {
        snprintf(why, whylen, "bytes after the end line");
        goto bad;
    }
    if (m->clock < 0 || !have_model || !have_servers || !have_workers) {
        snprintf(why, whylen, "clock, model, servers or workers missing");
        goto bad;
    }
    /* Every server needs a chain (or moved, and none), every worker one part;
     * some server must have a chain. */
    uint32_t nmoved = 0;
    for (uint32_t k = FT_SERVER; k <= FT_WORKER; k++) {
        uint32_t n = k == FT_SERVER ? m->servers : m->workers;
        for (uint32_t r = 0; r < n; r++) {
            size_t count = 0;
            for (size_t i = 0; i < m->nparts; i++)
                count += m->parts[i].kind == k && m->parts[i].rank == r;
            int moved = k == FT_SERVER && m->moved && m->moved[r];
            nmoved += (uint32_t)moved;
            if (moved && count) {
                snprintf(why, whylen, "server %u is moved and has parts too", r);
                goto bad;
            }
            if ((!count && !moved) || (k == FT_WORKER && count != 1)) {
                snprintf(why, whylen, "no part (or several) for %s %u",
                         k == FT_SERVER ? "server" : "worker", r);
                goto bad;
            }
        }
    }
    if (nmoved == m->servers) {
        snprintf(why, whylen, "every server is moved");
        goto bad;
    }
    return 0;
bad:
    ft_manifest_free(m);
    return -1;
}

char *ft_manifest_format(const ft_manifest *m, size_t *len)
{
    size_t cap = 256 + m->nparts * (FT_PATH_MAX + 64) + (m->moved ? m->servers * 16 : 0);
    char *t = malloc(cap);
    if (!t) return NULL;
    size_t n = (size_t)snprintf(
        t, cap, "loom-checkpoint 1\nclock %" PRId64 "\nmodel %s\nservers %u\nworkers %u\n",
        m->clock, m->model[0] ? m->model : "-", m->servers, m->workers);
    for (size_t i = 0; i < m->nparts; i++) {
        const ft_part *p = &m->parts[i];
        n += (size_t)snprintf(t + n, cap - n, "part %s %u %s %s %" PRIu64 " %08x\n",
                              p->kind == FT_SERVER ? "server" : "worker", p->rank,
                              p->full ? "full" : "incr", p->path, p->size, p->crc);
    }
    for (uint32_t r = 0; m->moved && r < m->servers; r++)
        if (m->moved[r]) n += (size_t)snprintf(t + n, cap - n, "moved %u\n", r);
    n += (size_t)snprintf(t + n, cap - n, "end %08x\n", ft_crc32c(0, t, n));
    *len = n;
    return t;
}

/* Whole file into memory (malloc'd); 0, or errno. */
static int slurp(const char *path, uint8_t **data, size_t *len, size_t max)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not hang a reader */
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        int e = errno ? errno : EFBIG;
        close(fd);
        return S_ISREG(st.st_mode) ? e : EISDIR;
    }
    size_t n = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return ENOMEM;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *len = got;
    return 0;
}

/* The newest ckpt-<clock> directory of dir with a MANIFEST; -1 if none. */
static int64_t newest_manifest(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int64_t best = -1;
    for (struct dirent *e; (e = readdir(d));) {
        uint64_t c;
        if (strncmp(e->d_name, "ckpt-", 5) || strlen(e->d_name) != 17 ||
            !parse_u64(e->d_name + 5, 10, INT64_MAX, &c))
            continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s/MANIFEST", dir, e->d_name);
        if (!stat(path, &st) && (int64_t)c > best) best = (int64_t)c;
    }
    closedir(d);
    return best;
}

int ft_manifest_load(const char *dir, int64_t clock, ft_manifest *m, char *why, size_t whylen)
{
    if (clock < 0) clock = newest_manifest(dir);
    if (clock < 0) {
        struct stat st;
        snprintf(why, whylen, "%s: %s", dir,
                 stat(dir, &st) ? strerror(errno)
                                : "no committed checkpoint (no ckpt-*/MANIFEST in it)");
        return LOOM_ENOTFOUND;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/ckpt-%012" PRId64 "/MANIFEST", dir, clock);
    uint8_t *text;
    size_t len;
    int e = slurp(path, &text, &len, (size_t)1 << 30);
    if (e) {
        snprintf(why, whylen, "%s: %s", path, strerror(e));
        return e == ENOENT ? LOOM_ENOTFOUND : LOOM_EPROTO;
    }
    char reason[256];
    int rc = ft_manifest_parse((const char *)text, len, m, reason, sizeof reason);
    free(text);
    if (rc) {
        snprintf(why, whylen, "%s: %s", path, reason);
        return LOOM_EPROTO;
    }
    if (m->clock != clock) {
        snprintf(why, whylen, "%s: says clock %" PRId64 ", its directory %" PRId64, path, m->clock,
                 clock);
        ft_manifest_free(m);
        return LOOM_EPROTO;
    }
    return 0;
}

int ft_part_load(const char *dir, const ft_manifest *m, const ft_part *p, uint8_t **data, char *why,
                 size_t whylen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, p->path);
    size_t len;
    int e = slurp(path, data, &len, (size_t)p->size);
    if (e == EFBIG) {
        snprintf(why, whylen, "%s: larger than the %" PRIu64 " bytes the manifest says", path,
                 p->size);
        return LOOM_EPROTO;
    }
    if (e) {
        snprintf(why, whylen, "%s: %s", path, strerror(e));
        return LOOM_EPROTO;
    }
    const char *bad = NULL;
    char reason[160];
    ft_header h;
    if (len != p->size) {
        snprintf(reason, sizeof reason, "truncated: %zu of the %" PRIu64 " bytes the manifest says",
                 len, p->size);
        bad = reason;
    } else if (ft_crc32c(0, *data, len) != p->crc) {
        bad = "checksum mismatch (the file is corrupt)";
    } else if (ft_header_decode(*data, len, &h, reason, sizeof reason)) {
        bad = reason;
    } else if (h.kind != p->kind || h.rank != p->rank || h.servers != m->servers ||
               h.workers != m->workers || h.full != p->full || h.clock > m->clock) {
        bad = "its header does not match the manifest";
    }
    if (bad) {
        snprintf(why, whylen, "%s: %s", path, bad);
        free(*data);
        *data = NULL;
        return LOOM_EPROTO;
    }
    return 0;
}

int ft_sections(const uint8_t *body, size_t len,
                int (*fn)(void *ctx, const char *name, const uint8_t *data, size_t len), void *ctx)
{
    size_t pos = 0;
    while (pos < len) {
        if (len - pos < 2) return LOOM_EPROTO;
        size_t nl = (size_t)body[pos] | (size_t)body[pos + 1] << 8;
        pos += 2;
        if (nl == 0 || nl > 255 || len - pos < nl + 8) return LOOM_EPROTO;
        char name[256];
        memcpy(name, body + pos, nl);
        name[nl] = '\0';
        if (strlen(name) != nl) return LOOM_EPROTO;
        pos += nl;
        uint64_t sl = msg_load_u64(body + pos);
        pos += 8;
        if (sl > len - pos) return LOOM_EPROTO;
        int rc = fn(ctx, name, body + pos, (size_t)sl);
        if (rc) return rc;
        pos += (size_t)sl;
    }
    return 0;
}
