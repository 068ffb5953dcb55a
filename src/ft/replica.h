/* replica.h: a server's replication state, which the files of src/ft that
 * keep ranges alive share: replica.c (the rounds), failover.c (a server
 * died), rejoin.c (a replacement took a dead server's rank) and handback.c
 * (it takes its ranges back). They reach the server's parts through
 * src/ps/part.h. */
#ifndef LOOM_FT_REPLICA_H
#define LOOM_FT_REPLICA_H

#include <stddef.h>
#include <stdint.h>

#include "core/node_impl.h"
#include "loom/node.h"

/* A replication round: REPL messages still to be acknowledged per server,
 * and what each table's applied sequences were when the round was cut. */
typedef struct repl_round {
    uint64_t round;
    uint32_t *waiting; /* per server rank */
    size_t nwaiting;
    uint64_t *applied; /* per table id < cap, per worker */
    uint32_t cap;
    struct repl_round *next;
} repl_round;

/* A push acknowledgement held until the replicas hold the push. */
typedef struct held_ack {
    uint32_t to, table;
    uint64_t req, applied, round;
    int status;
    struct held_ack *next;
} held_ack;

typedef struct ft_repl {
    loom_node *node;
    int replicas, num_servers, num_workers;
    int due;             /* rows changed since the last round */
    uint64_t rounds_cut; /* the last round's number */
    repl_round *rounds, *rounds_tail;
    held_ack *acks, *acks_tail; /* in the order the pushes arrived */
    /* per server rank, a replacement's copies (rejoin.c): fed: it gets
     * this server's rounds; copy: 1 its full copies are due in the next
     * round, 2 they went in round copy_round; gen: the scheduler's
     * (rejoin_coord.c) */
    uint8_t *fed, *copy;
    uint64_t *copy_round, *copy_gen;
    /* handback.c: the generation of the last fence (HANDBACK b = 0 or 3),
     * the round whose acknowledgement answers it (0: none due), and, when
     * this server leaves (b = 3), the REPL bytes sent before it (logged) */
    uint64_t hb_gen, hb_round;
    int hb_leaving;
    uint64_t hb_bytes;
    _Atomic uint64_t *bytes; /* REPL bytes sent: loom_stats' replicated_bytes (node_stats_area) */
    uint64_t rows;           /* rows among them (logged at the end) */
    uint64_t msgs;           /* REPL messages sent (logged at the end) */
    uint64_t naive_bytes;    /* what forwarding every push would have sent */
} ft_repl;

/* This server's rank: known from its roster on (every use is in a handler
 * or timer, after it), not when the layer attaches: a server joining a
 * running job (LOOM_JOIN=1) learns its rank from the scheduler. */
static inline int ft_me(const ft_repl *r)
{
    return loom_rank(r->node);
}

/* ---- replica.c ---- */

/* A server's replication: its state, its handlers, its timer and its hooks
 * on ps, failover.c's and rejoin.c's subscribers (without replicas no round
 * is ever due, and no death survived). 0 or LOOM_ENOMEM. */
int ft_repl_attach(loom_node *n, ft_repl **out);
void ft_repl_destroy(ft_repl *r);
/* Complete the rounds whose REPLs are all acknowledged, and send what they
 * held. */
void ft_repl_rounds_done(ft_repl *r);
/* A round is due (now, or soon on the timer). */
void ft_repl_due(ft_repl *r);
/* Cut a replication round now: every changed row of every range this
 * server is master of goes to the range's live replicas (if it cannot be
 * cut, it stays due). */
void ft_repl_cut(ft_repl *r);

/* ---- failover.c: the node's failover subscriber ---- */

int ft_failover(loom_node *n, void *ctx, uint32_t id);

/* ---- rejoin.c: a replacement server ---- */

void ft_rejoin(loom_node *n, void *ctx, uint32_t id);
void ft_on_rejoin_copy(loom_node *n, void *ctx, node_msg *m);
void ft_on_rejoin_ready(loom_node *n, void *ctx, node_msg *m);
/* The replacements whose full copies went in a round up to `done`. */
void ft_copies_done(ft_repl *r, uint64_t done);

/* ---- handback.c: a replacement taking its ranges back, on a server ---- */

void ft_on_handback(loom_node *n, void *ctx, node_msg *m);
void ft_on_handback_ack(loom_node *n, void *ctx, node_msg *m);
/* The masters changed (a handback's commit or abort, a failover): a fence
 * in progress is off, and fenced or incoming ranges this server is master
 * of now open, gated. */
void ft_handback_reopen(ft_repl *r);
/* Every round up to `done` is acknowledged: a fence's last one among them,
 * the fence is answered. */
void ft_fence_done(ft_repl *r, uint64_t done);

#endif
