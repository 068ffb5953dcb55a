/* types: the ft layer's message types (docs/PROTOCOL.md) and the layer's
 * descriptor: its checkpoints' (ft/msg_types.h) and those of replication, a
 * replacement's return and handbacks, whose numbers ps/msg_types.h declares
 * (ps's parking sends PARKED, and part.h's mechanisms make and take what
 * the others carry) but which only this layer handles, so registers. Alone
 * in this file so that the decoders' fuzz target (tests/fuzz/fuzz_decode.c)
 * knows them without the rest of the layer. */
#include "core/msg.h"
#include "core/node_impl.h"
#include "ft/ft_impl.h"
#include "ft/msg_types.h"
#include "ps/msg_types.h"

static const msg_type_info ft_types[] = {
    {MSG_CKPT_PART, "CKPT_PART", 1, 1, MSG_BY_SERVER | MSG_BY_WORKER},
    {MSG_REPL, "REPL", 2, 2, MSG_BY_SERVER},
    {MSG_REPL_ACK, "REPL_ACK", 0, 0, MSG_BY_SERVER},
    {MSG_REJOIN_COPY, "REJOIN_COPY", 0, 0, MSG_BY_SCHED},
    {MSG_REJOIN_COPIED, "REJOIN_COPIED", 0, 0, MSG_BY_SERVER},
    {MSG_REJOIN_READY, "REJOIN_READY", 0, 0, MSG_BY_SCHED},
    {MSG_HANDBACK, "HANDBACK", 0, 0, MSG_BY_SCHED | MSG_BY_SERVER},
    {MSG_HANDBACK_ACK, "HANDBACK_ACK", 0, 0, MSG_BY_SERVER | MSG_BY_WORKER},
    {MSG_PARKED, "PARKED", 0, 0, MSG_BY_SERVER},
    {MSG_CKPT_BASE, "CKPT_BASE", 0, 0, MSG_BY_SCHED},
    {MSG_CKPT_PLAN, "CKPT_PLAN", 0, 0, MSG_BY_SCHED},
    {MSG_CKPT_SKIP, "CKPT_SKIP", 0, 0, MSG_BY_SERVER | MSG_BY_WORKER},
    {MSG_CKPT_EPOCH, "CKPT_EPOCH", 0, 0, MSG_BY_WORKER},
    {MSG_CKPT_FINAL, "CKPT_FINAL", 0, 0, MSG_BY_WORKER},
};

node_layer_def ft_layer_def = {"ft", ft_types, sizeof ft_types / sizeof *ft_types, 0};
