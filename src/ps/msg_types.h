/* msg_types: the ps layer's message type numbers.
 *
 * Core names none of a layer's types: src/ps/types.c registers these with
 * what each is (name, who may send it, frames) when the layer attaches, and
 * core refuses a number it or another layer has already. docs/PROTOCOL.md is
 * the one table of every layer's numbers, where a new type takes a free one;
 * a number never changes without a new MSG_VERSION (core/msg.h). The
 * replication, rejoin and handback types (REPL to PARKED) are declared here,
 * where ps's parking (server_park.c sends PARKED) and part.h's mechanisms
 * name them, but they are the ft layer's, which handles them and registers
 * them (src/ft/types.c). */
#ifndef LOOM_PS_MSG_TYPES_H
#define LOOM_PS_MSG_TYPES_H

enum ps_msg_type {
    /* tables, pushes, pulls and clocks */
    MSG_TABLE_OPEN = 32, /* worker -> scheduler: blob (table name and options) */
    MSG_TABLE_CREATE,    /* scheduler -> server: table = id, blob as above */
    MSG_TABLE_CREATED,   /* server -> scheduler: table = id, a = status */
    MSG_TABLE_OPENED,    /* scheduler -> worker: table = id, a = status, req echoed */
    MSG_PUSH,            /* worker -> server: req = sequence, clock = the pusher's clock;
                            frames keys, values; or MSG_F_RANGE with a = begin, b = end
                            and one values frame */
    MSG_PUSH_ACK,        /* server -> worker: req = sequence, a = status, b = last
                            sequence applied from this worker (BSP applies later);
                            with replicas, clock = last sequence the replicas hold */
    MSG_PULL,            /* worker -> server: req = request id, clock = oldest clock the
                            answer may reflect; frame keys, or MSG_F_RANGE with a, b */
    MSG_PULL_REPLY,      /* server -> worker: req echoed, clock = server's min clock,
                            a = last push sequence applied from this worker, b = status;
                            frame values */
    MSG_CLOCK,           /* worker -> servers, scheduler: clock = clocks completed */
    MSG_MIN_CLOCK,       /* scheduler -> workers: clock = slowest worker's clock */
    MSG_JOIN_CLOCK,      /* server -> scheduler: a = node id of a worker joining the running
                            job, clock = the min clock the server holds its slot at */
    /* filtered and sparse rows (src/ps/filter.c's encoding) */
    MSG_PUSH_ENC = 48,  /* worker -> server: as PUSH (keyed), one frame: the table's push
                           chain's encoding of the keys and delta rows */
    MSG_PULL_SINCE,     /* worker -> server: as PULL (keyed), a = the oldest row version the
                           reader holds; frames keys, a bitmap of the keys it holds */
    MSG_PULL_REPLY_ENC, /* server -> worker: as PULL_REPLY; frames u64 row version of the
                           answer, the pull chain's encoding of the rows that changed */
    /* managed communication (ps/comm.h) */
    MSG_ROWS_PUSH = 56, /* server -> worker: rows that changed, for the worker's cache;
                           req = push id, clock = server's min clock, a = last push
                           sequence applied from this worker, b = the row version
                           the rows reflect (as PULL_REPLY_ENC's); frames keys, values */
    MSG_ROWS_PUSH_ACK,  /* worker -> server: req echoed */
    /* replication (src/ft/replica.c, src/ps/ring.h; docs/FAULTS.md) */
    MSG_REPL = 120, /* server -> server (a range's master to its replicas): table = id,
                       req = replication round, a = ring range, b = rows; frames the
                       last push sequence applied per worker (u64 each), the rows
                       changed since the last round ([u64 key][values][updater state]) */
    MSG_REPL_ACK,   /* server -> server (replica to master): table = id, req = round */
    /* a replacement server rejoining (src/ft/rejoin_coord.c, src/ft/rejoin.c; docs/FAULTS.md) */
    MSG_REJOIN_COPY = 144, /* scheduler -> servers: a = node id of a rejoining server,
                              req = generation; copy it the ranges you are master of */
    MSG_REJOIN_COPIED,     /* server -> scheduler: a, req echoed; the copies are acknowledged */
    MSG_REJOIN_READY,      /* scheduler -> servers, workers: a = node id of a rejoined
                              server, which now holds full copies of its ranges */
    /* a replacement taking its ranges back (src/ft/handback.c; docs/FAULTS.md) */
    MSG_HANDBACK = 152, /* scheduler -> servers (b = 0 fence, 2 abort), servers and workers
                           (b = 1 commit): a = node id of the server taking its ranges
                           back, req = generation; a server leaving (a drain,
                           docs/ELASTIC.md): scheduler -> servers (b = 3 fence, 2 abort),
                           scheduler -> the leaving server -> workers (b = 4 sync), a =
                           node id of the leaving server */
    MSG_HANDBACK_ACK,   /* server -> scheduler: fenced, its last round acknowledged;
                           worker -> that server: switched, its pushes sent again; req
                           (and, answering PARKED, b) echoed; worker -> scheduler: a
                           drain's sync seen (req echoed) */
    MSG_PARKED,         /* server -> worker: table = id, req = the sequence of a push not
                           applied (its range is fenced, or an older push to it is): hold
                           it; req = 0: send again every push parked here (and ask again
                           every pull refused here), a = generation, b = the number of
                           such PARKED so far */
};

#endif
