/* svb: the internals of sufficient-vector broadcasting (include/loom/svb.h)
 * that the layer's files share: the wire format of a set of SVs, and the
 * layer's attachment to a node. */
#ifndef LOOM_P2P_SVB_H
#define LOOM_P2P_SVB_H

#include <stddef.h>
#include <stdint.h>

#include "core/node_impl.h"
#include "loom/svb.h"

/* A frame of SVs, little-endian, one SV after the other:
 *   u32 nnz, width x f32 u, nnz x u32 idx, nnz x f32 val
 * svb_frame_check walks `count` SVs of a frame of len bytes: every SV whole,
 * ids below rows, every value finite, nothing left over. 0, or -1 with the
 * reason in *why. */
int svb_frame_check(const uint8_t *p, size_t len, uint64_t count, uint32_t width, uint64_t rows,
                    const char **why);
/* AdaGrad's state on a replica (opts.adagrad): the rate, the accumulators,
 * and a frame's gradient being summed with the rows it touches. */
typedef struct svb_adagrad {
    double lr;
    double *acc, *grad; /* rows x width */
    uint8_t *mark;      /* rows: touched by the gradient being summed */
    uint64_t *touched;  /* the rows marked, ntouched of them */
    size_t ntouched;
} svb_adagrad;
int svb_adagrad_init(svb_adagrad *a, uint64_t rows, uint32_t width, double lr);
void svb_adagrad_free(svb_adagrad *a);
/* The step with the gradient summed so far (loom_svb_adagrad_step); 1 if
 * there was one to take. */
int svb_adagrad_step(double *w, svb_adagrad *a, uint32_t width);

/* Apply `count` SVs of a checked frame to w: each as W += u v^T, in order,
 * or, with AdaGrad state `ag`, add them to its gradient for the next
 * svb_adagrad_step; scratch holds width floats and (nnz) ids and values:
 * grown as needed. */
typedef struct svb_scratch {
    float *u, *val;
    uint64_t *idx;
    size_t cap;
} svb_scratch;
int svb_frame_apply(double *w, svb_adagrad *ag, uint32_t width, const uint8_t *p, uint64_t count,
                    svb_scratch *s);
void svb_scratch_free(svb_scratch *s);

/* Registers the SVB message handlers of a worker (called at node start). */
int svb_attach(loom_node *n);

#endif
