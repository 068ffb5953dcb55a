/* msg_types: the p2p layer's message type numbers: the stochastic reduce's
 * models and sufficient-vector broadcasting.
 *
 * Core names none of a layer's types: src/p2p/reduce.c and src/p2p/svb.c
 * register these with what each is (name, who may send it, frames) when they
 * attach, and core refuses a number it or another layer has already.
 * docs/PROTOCOL.md is the one table of every layer's numbers, where a new type
 * takes a free one; a number never changes without a new MSG_VERSION
 * (core/msg.h). */
#ifndef LOOM_P2P_MSG_TYPES_H
#define LOOM_P2P_MSG_TYPES_H

enum p2p_msg_type {
    /* stochastic reduce, NOTIFY-ACK (src/p2p/reduce.c) */
    MSG_P2P_MODEL = 96, /* worker -> worker: req = round, a = model length (floats); frame values */
    MSG_P2P_ACK = 97,   /* worker -> worker: req = round consumed */
    /* mlr (sufficient-vector broadcasting, src/p2p/svb.c) */
    MSG_SVB_SVS = 112, /* worker -> worker: clock = the sender's clock, a = SVs, b = width;
                          frame SVs (none with a = 0: a clock mark) */
    MSG_SVB_REPLICA,   /* worker -> worker: clock = after which clock, a = 0 averaging,
                          1 rotation; frame the replica (rows x width f64) */
};

#endif
