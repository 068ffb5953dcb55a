/* comm: managed communication (Bösen's communication manager), the parts
 * workers (client_comm.c) and servers (server_comm.c) share. See comm.c for
 * the idea.
 *
 *   comm_bucket  a token bucket: a budget in Mbit/s turned into "may send now"
 *                and "when next";
 *   comm_mgr     a process's manager: its bucket and its window of
 *                unacknowledged messages (thread-safe);
 *   comm_choose  the priority policies: which of the candidate rows to send;
 *   comm_row_magnitude  a row's |d| and |d/w|;
 *   comm_rowset  a server's rows changed since they were last pushed, with
 *                the workers that cache them. */
#ifndef LOOM_PS_COMM_H
#define LOOM_PS_COMM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/u64map.h"
#include "loom/table.h"

/* Rows per managed message when a table says 0 (Bösen's MF setting). */
#define COMM_DEFAULT_QUEUE_ROWS 100
/* Managed messages a process may have unacknowledged before it pauses:
 * more means the network (or the peer) does not keep up with the budget. */
#define COMM_ACK_WINDOW 8
/* Without a budget, managed sends still wait this long between batches, so
 * that they do not spin a core. */
#define COMM_UNLIMITED_PERIOD_MS 1

/* ---- the token bucket ---- */

typedef struct comm_bucket {
    double rate;   /* bytes per ms; 0: no budget */
    double cap;    /* most tokens saved up: a short burst */
    double tokens; /* bytes that may go out now; negative: a debt */
    uint64_t last_ms;
} comm_bucket;

/* A bucket for mbits Mbit/s (0: unlimited), full at now_ms. */
void comm_bucket_init(comm_bucket *b, double mbits, uint64_t now_ms);
/* Whether anything may be sent at now_ms (tokens are not in debt). */
int comm_bucket_ready(comm_bucket *b, uint64_t now_ms);
/* bytes were sent (may run into debt: a send is never split). */
void comm_bucket_charge(comm_bucket *b, uint64_t now_ms, uint64_t bytes);
/* The first time >= now_ms at which the bucket is ready. */
uint64_t comm_bucket_due(comm_bucket *b, uint64_t now_ms);

/* ---- a process's manager ---- */

typedef struct comm_mgr {
    pthread_mutex_t mu; /* a leaf lock */
    comm_bucket bucket;
    int budgeted; /* some table set a budget */
    int unacked;  /* managed messages sent and not acknowledged */
} comm_mgr;

void comm_mgr_init(comm_mgr *m);
void comm_mgr_destroy(comm_mgr *m);
/* A table with this budget was opened: the process's is the largest. */
void comm_mgr_budget(comm_mgr *m, double mbits, uint64_t now_ms);
/* 0 if a managed message may go out at now_ms, else when to ask again
 * (UINT64_MAX: when an acknowledgement comes). */
uint64_t comm_mgr_wait(comm_mgr *m, uint64_t now_ms);
/* A message of bytes went out (managed: it counts in the ack window). */
void comm_mgr_sent(comm_mgr *m, uint64_t now_ms, uint64_t bytes, int managed);
/* A managed message was acknowledged; returns 1 if that reopened the window. */
int comm_mgr_acked(comm_mgr *m);
/* When to try the next managed batch after one went out at now_ms: when the
 * budget allows, or (no budget) after COMM_UNLIMITED_PERIOD_MS. */
uint64_t comm_mgr_next(comm_mgr *m, uint64_t now_ms);
/* When the budget allows the next mandatory send (now_ms if it does now). */
uint64_t comm_mgr_due(comm_mgr *m, uint64_t now_ms);

/* ---- choosing rows ---- */

/* What a policy remembers between choices: the random stream and the round
 * robin's next key. Seed it once per process. */
typedef struct comm_choice {
    uint64_t rng[4];
    uint64_t next_key;
} comm_choice;

void comm_choice_seed(comm_choice *c, uint64_t seed);
/* Choose up to k of the n candidate rows (keys distinct; abs and rel their
 * magnitudes, as comm_row_magnitude computes them) by policy p; write their
 * indices to out, in the order the policy ranks them (best first), and return
 * how many. random: a uniform sample; roundrobin: the next k keys in key
 * order from where the last choice stopped, wrapping; abs / rel: the largest
 * magnitudes (ties: the smaller key). Deterministic given the seed. */
size_t comm_choose(loom_priority p, comm_choice *c, const uint64_t *keys, const double *abs,
                   const double *rel, size_t n, size_t k, uint32_t *out);

/* A delta row's magnitudes: *abs = sum |d_j|, *rel = sum |d_j| / |w_j| over
 * the row's values w (NULL: unknown, taken as 0), where a zero w_j counts as
 * COMM_REL_FLOOR (so a change to a value still at 0 ranks high). */
#define COMM_REL_FLOOR 1e-6
void comm_row_magnitude(loom_type type, uint32_t width, const void *delta, const void *value,
                        double *abs, double *rel);

/* ---- a server's changed rows ---- */

/* Rows of one table partition that workers cache (subscribers: a bit per
 * worker, set when it pulls the row) and how much each changed since it was
 * last pushed. Only the I/O thread touches it. */
typedef struct comm_rowset {
    u64map idx; /* key -> slot */
    uint64_t *keys;
    uint64_t *subs; /* words per slot bit masks of workers */
    double *abs, *rel;
    uint8_t *dirty;
    size_t n, cap, words;
    size_t ndirty;
} comm_rowset;

int comm_rowset_init(comm_rowset *s, int num_workers);
void comm_rowset_free(comm_rowset *s);
/* Worker w caches key. 0 or LOOM_ENOMEM. */
int comm_rowset_subscribe(comm_rowset *s, uint64_t key, int w);
/* key changed by these magnitudes (ignored unless some worker caches it). */
void comm_rowset_changed(comm_rowset *s, uint64_t key, double abs, double rel);
/* Whether worker w caches the row in slot. */
static inline int comm_rowset_has(const comm_rowset *s, size_t slot, int w)
{
    return (int)(s->subs[slot * s->words + (size_t)w / 64] >> ((unsigned)w % 64) & 1u);
}

#endif
