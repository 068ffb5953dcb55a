/* types: the ps layer's message types (docs/PROTOCOL.md) and the layer's
 * descriptor; alone in this file so that the decoders' fuzz target
 * (tests/fuzz/fuzz_decode.c) knows them without the rest of the layer. The
 * replication, rejoin and handback types that ps/msg_types.h declares are
 * the ft layer's to register (src/ft/types.c). */
#include "core/msg.h"
#include "core/node_impl.h"
#include "ps/msg_types.h"
#include "ps/ps.h"

static const msg_type_info ps_types[] = {
    {MSG_TABLE_OPEN, "TABLE_OPEN", 1, 1, MSG_BY_WORKER},
    {MSG_TABLE_CREATE, "TABLE_CREATE", 1, 1, MSG_BY_SCHED},
    {MSG_TABLE_CREATED, "TABLE_CREATED", 0, 0, MSG_BY_SERVER},
    {MSG_TABLE_OPENED, "TABLE_OPENED", 0, 0, MSG_BY_SCHED},
    {MSG_PUSH, "PUSH", 1, 2, MSG_BY_WORKER},
    {MSG_PUSH_ACK, "PUSH_ACK", 0, 0, MSG_BY_SERVER},
    {MSG_PULL, "PULL", 0, 1, MSG_BY_WORKER},
    {MSG_PULL_REPLY, "PULL_REPLY", 0, 1, MSG_BY_SERVER},
    {MSG_CLOCK, "CLOCK", 0, 0, MSG_BY_WORKER | MSG_BY_SCHED},
    {MSG_MIN_CLOCK, "MIN_CLOCK", 0, 0, MSG_BY_SCHED},
    {MSG_JOIN_CLOCK, "JOIN_CLOCK", 0, 0, MSG_BY_SERVER},
    {MSG_PUSH_ENC, "PUSH_ENC", 1, 1, MSG_BY_WORKER},
    {MSG_PULL_SINCE, "PULL_SINCE", 2, 2, MSG_BY_WORKER},
    {MSG_PULL_REPLY_ENC, "PULL_REPLY_ENC", 0, 2, MSG_BY_SERVER},
    {MSG_ROWS_PUSH, "ROWS_PUSH", 2, 2, MSG_BY_SERVER},
    {MSG_ROWS_PUSH_ACK, "ROWS_PUSH_ACK", 0, 0, MSG_BY_WORKER},
};

node_layer_def ps_layer_def = {"ps", ps_types, sizeof ps_types / sizeof *ps_types, 0};
