/* client_ft: what a worker's side of the parameter server offers the
 * fault-tolerance layer's worker policy (src/ft/client_failover.c).
 *
 * With replicas the master of a key range changes when its server dies and
 * again when a replacement takes its ranges back (ring.h). ft decides when
 * (a death, a replacement's return, a handback's commit, PARKED); ps keeps
 * the routing and the requests: the server states a key's master follows,
 * and moving what waits on a server that is master no more (in-flight
 * pushes sent again with their sequence numbers, pull parts asked again).
 * Each function takes the client's and the tables' locks itself; they run
 * on the thread that read the message (the I/O thread or one in
 * loom_wait()), as the handlers do. */
#ifndef LOOM_PS_CLIENT_FT_H
#define LOOM_PS_CLIENT_FT_H

#include <stddef.h>
#include <stdint.h>

#include "core/node_impl.h"

/* Server rank's state as this worker knows it (ring.h: PS_UP, PS_DOWN,
 * PS_JOINING, PS_BACK), which the masters follow; set it, with `returned`
 * the order it came back in when BACK (else unused). */
int ps_client_server_state(loom_node *n, int rank);
void ps_client_set_server_state(loom_node *n, int rank, int state, uint32_t returned);
/* Whether the job goes on without node `id` (ps_survives; marks it DOWN). */
int ps_client_survives(loom_node *n, uint32_t id);

/* In-flight pushes sent again, with their sequence numbers, to the master
 * of their range now: PS_RESEND_ALL, every push to server `server` (it died;
 * the masters are computed again and cached rows dropped first);
 * PS_RESEND_PARKED, those server `server` parked; PS_RESEND_MOVED, those to
 * any other server whose range has a new master (a handback to `server`
 * committed; masters computed again, cached rows dropped). Returns how many
 * went; *ok is 0 if the tables could not be listed (out of memory). */
enum { PS_RESEND_ALL, PS_RESEND_PARKED, PS_RESEND_MOVED };
size_t ps_client_resend(loom_node *n, int which, int server, int *ok);
/* Server `server` hands its ranges over and leaves (src/ft/handback.c, a
 * drain): it applies nothing more, and its replicas hold every push it
 * applied. So the pushes it acknowledged and did not park are dropped from
 * its in-flight lists (what stays there was never applied: a later
 * PS_RESEND_ALL redirects it). Returns how many were dropped. */
size_t ps_client_drained(loom_node *n, int server);
/* Count pushes sent again (loom_stats' pushes_resent: the old master may
 * have applied them) and redirected (pushes_redirected: never applied). */
void ps_client_count_resent(loom_node *n, size_t resent, size_t redirected);
/* Pull parts asked again of their range's master now: PS_REPULL_DEAD,
 * every one waiting for server `server` (which is marked redirected: a pull
 * routed to it later goes to the new master); PS_REPULL_REFUSED, those it
 * refused (LOOM_ESTATE); PS_REPULL_MOVED, those waiting for any other server
 * whose range has a new master. Returns how many went; *ok as above. */
enum { PS_REPULL_DEAD, PS_REPULL_REFUSED, PS_REPULL_MOVED };
size_t ps_client_repull(loom_node *n, int which, int server, int *ok);
/* Server `server` parked push `seq` of table `table`: it is kept (its
 * acknowledgements skip it) until sent again. 0, or LOOM_ENOTFOUND if no
 * such table is open (a push no longer there was sent elsewhere already). */
int ps_client_park(loom_node *n, uint32_t table, int server, uint64_t seq);
/* A replacement took server rank `rank`'s place: its links' filter chains
 * are new, its acknowledgements start from nothing, its pulls are routed to
 * it again, and it gets this worker's last CLOCK now (in order with later
 * ones). */
void ps_client_rejoined(loom_node *n, int rank);
/* A handback moved pushes between live servers: late acknowledgements and
 * replies of an old master are expected from now on. */
void ps_client_handback_seen(loom_node *n);
/* A death or handback was handled (its requests went again): the CLOCKs
 * after this say so (h.b, a checkpoint's cut). */
void ps_client_failover_done(loom_node *n);

#endif
