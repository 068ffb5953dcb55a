/* p2p: the peer-to-peer layer's entry for the API glue (src/loom.c). The public part is
 * include/loom/p2p.h: communication graphs (graph.c) and stochastic reduce (reduce.c). */
#ifndef LOOM_P2P_P2P_H
#define LOOM_P2P_P2P_H

#include "loom/node.h"

/* Give a worker node the p2p layer (its handlers and the models that arrive before its
 * reducer opens); nothing on other roles. Called when the node starts. */
int p2p_attach(loom_node *n);

#endif
