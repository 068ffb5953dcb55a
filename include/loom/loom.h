/* Loom: distributed training on a parameter server. Include this one header.
 *
 * error.h    error codes and loom_strerror()
 * node.h     processes, roles, start-up, clock, barrier, timestamps
 * table.h    shared tables: open, pull, push, consistency
 * filter.h   what a table's filters saved on the wire
 * updater.h  server-side update rules, user updaters
 * delay.h    bounded-delay task ordering
 * secret.h   the job secret that encrypts and authenticates traffic (CURVE)
 * checkpoint.h  checkpoints, resuming, reading a checkpoint directory
 * sched.h    scheduled model parallelism (STRADS): static and dynamic engines
 * p2p.h      serverless data parallelism: communication graphs, stochastic reduce
 * sketch.h   Count-Min sketches: approximate counts of a huge key space on the servers
 * loop.h     parallel loops with declared accesses (Orion): plans and their runs
 * darray.h   distributed arrays (Orion's DistArrays): what a loop runs over
 * parts.h    training data handed out to the workers in parts, on demand
 *
 * Two headers are included on their own: data.h (the LIBSVM, ratings and
 * bag-of-words readers) and svb.h (sufficient-vector broadcasting). */
#ifndef LOOM_LOOM_H
#define LOOM_LOOM_H

#include "error.h"
#include "node.h"
#include "table.h"
#include "filter.h"
#include "updater.h"
#include "delay.h"
#include "secret.h"
#include "checkpoint.h"
#include "sched.h"
#include "p2p.h"
#include "sketch.h"
#include "loop.h"
#include "darray.h"
#include "strads.h"
#include "parts.h"

#define LOOM_VERSION_MAJOR 0
#define LOOM_VERSION_MINOR 1
#define LOOM_VERSION_PATCH 0

#endif
