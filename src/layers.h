/* layers: every layer's part of a node's role, attached in one place.
 *
 * src/loom.c defines it (the one file that knows every layer); loom_node_start
 * and loom_init attach it to each node they start, and the handlers' fuzz target
 * (tests/fuzz/fuzz_handlers.c) to each node of its one-thread job, so that every
 * handler a real node has is fuzzed, including those of a layer added later. */
#ifndef LOOM_LAYERS_H
#define LOOM_LAYERS_H

#include "loom/node.h"

/* Attach every layer's handlers to n (before any message can arrive), in layer
 * order: ps, ft, sched (rotation, dynamic engine, data parts), p2p (reduce, svb). 0 or a loom
 * error code. */
int layers_attach(loom_node *n);

#endif
