/* ring: a table's key range on a consistent-hash ring of virtual servers.
 *
 * Keys are ordered (range pulls, dense rows), so the ring is the key range
 * itself, wrapped around: every server is inserted at `vnodes` points of it
 * (virtual servers, at positions drawn from a hash of the server and the
 * point's number), and each point owns the keys from itself to the next point
 * (Li's thesis, 3.3.3). Cut at key_begin, the ring becomes `nranges` ranges
 * in key order, each with an owner: its master. The k servers that follow a
 * range's point on the ring (distinct from its master and from each other)
 * hold its replicas, in that order (3.3.4); when the master dies, the first
 * live one of them becomes the master (3.3.5). A replacement for a dead
 * server holds its ranges again as a replica (below, PS_BACK).
 *
 * With one point per server the ring is the even split of the key range the
 * parameter server always used (server s: [begin + span*s/S, begin +
 * span*(s+1)/S)), so a job without replicas partitions exactly as before.
 *
 * Every process builds the same ring from the same arguments (the hash is
 * fixed), so routing needs no messages; failures are the only thing nodes
 * learn (which servers are dead). */
#ifndef LOOM_PS_RING_H
#define LOOM_PS_RING_H

#include <stddef.h>
#include <stdint.h>

#include "loom/table.h"

/* Virtual servers per server when a job replicates (with none, one: the even
 * split). More points spread a dead server's ranges over more successors. */
#define PS_RING_VNODES 4
/* Largest replication factor; a job needs more servers than replicas. */
#define PS_MAX_REPLICAS 7

typedef unsigned __int128 ps_ring_key;

typedef struct ps_ring {
    size_t nranges;
    ps_ring_key *start; /* nranges + 1: range r is [start[r], start[r+1]); the last is the end */
    uint16_t *holder;   /* nranges * (1 + replicas): master, then the replicas in ring order */
    int num_servers, replicas;
} ps_ring;

/* Build the ring of the key range [o->key_begin, end of o) for num_servers
 * servers with `vnodes` points each and `replicas` replicas per range
 * (replicas < num_servers, vnodes >= 1). Empty ranges are left out. 0,
 * LOOM_EINVAL or LOOM_ENOMEM. */
int ps_ring_build(ps_ring *r, const loom_table_opts *o, int num_servers, int vnodes, int replicas);
void ps_ring_free(ps_ring *r);

/* The range holding key (which lies in the table's range). */
size_t ps_ring_range_of(const ps_ring *r, uint64_t key);
/* The i-th holder of range rg: 0 its master, 1..replicas its replicas. */
static inline int ps_ring_holder(const ps_ring *r, size_t rg, int i)
{
    return r->holder[rg * (size_t)(1 + r->replicas) + (size_t)i];
}
/* What every process knows of each server (a byte per server rank, `dead`
 * in the ps layer). A replacement server (docs/FAULTS.md, "A replacement
 * server") is JOINING while it receives copies of its ranges, which are not
 * whole yet: like a dead one it is never master and counts as dead when
 * deciding whether the job survives another death; it is BACK once every copy
 * is acknowledged: a full replica again, master of a range only when none of
 * the range's other holders is UP or came back before it. */
enum { PS_UP = 0, PS_DOWN = 1, PS_JOINING = 2, PS_BACK = 3 };
/* Which of range rg's holders is master given each server's state (NULL:
 * all UP) and, for the BACK ones, the order they came back in (returned[s]:
 * 1 for the job's first return, 2 for the next...; REJOIN_READY tells every
 * node): the first UP one in ring order, else the BACK one that came back
 * first; -1 when there is none (the range is lost). A server coming back has
 * the highest number yet, so it becomes master only of a range that has no
 * live master: a return never moves a range, only a death does, and every
 * node moves it at the same point (its failover). */
int ps_ring_master(const ps_ring *r, size_t rg, const uint8_t *dead, const uint32_t *returned);
/* Whether server s holds range rg (as master or replica). */
int ps_ring_holds(const ps_ring *r, size_t rg, int s);

#endif
