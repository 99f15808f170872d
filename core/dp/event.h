/*
 * event.h - mechanism descriptions ("events"), in the vocabulary of Google's dp_accounting
 * (docs/ARCHITECTURE.md): a tree of leaves (mechanisms) and combinators (composition).
 *
 * Ownership: a tree is owned by its root; dp_event_free frees the whole tree. Children are
 * owned by their parent. For calibration one leaf field of a template may be marked
 * unknown (dp_event.unknown); the solver fills it.
 */
#ifndef DP_EVENT_H
#define DP_EVENT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"
#include "pnsgd.h"
#include "proactive.h"
#include "sgld.h"

typedef enum {
    DP_EV_SHUFFLED_EPOCH = 1,  /* one epoch of DP-SGD with random shuffling (seed 004) */
    DP_EV_SELF_COMPOSED = 2,   /* `event` run `count` times */
    DP_EV_COMPOSED = 3,        /* each of `events` run once */
    DP_EV_GAUSSIAN = 4,        /* Gaussian mechanism, std = noise_multiplier x sensitivity */
    DP_EV_LAPLACE = 5,         /* Laplace mechanism, scale = noise_multiplier x sensitivity */
    DP_EV_EPSILON_DELTA = 6,   /* an (epsilon, delta)-DP mechanism, nothing else known */
    DP_EV_POISSON_SAMPLED = 7, /* `event` on a Poisson sample with rate sampling_probability */
    DP_EV_NO_OP = 8,           /* touches no data: costs nothing */
    DP_EV_NON_PRIVATE = 9,     /* releases data without noise: infinite cost */
    DP_EV_PNSGD = 10,          /* one pass of projected noisy SGD (seed 000) */
    DP_EV_PROACTIVE = 11,      /* a client's local DP-SGD history, by phases (seed 002) */
    DP_EV_SGLD = 12,           /* stochastic gradient Langevin dynamics (seed 003) */
    /* ---- dp_accounting's mechanism events (issue 16, first part): 13..20 ---- */
    DP_EV_RANDOMIZED_RESPONSE = 13, /* k-ary randomized response, noise p */
    DP_EV_DISCRETE_GAUSSIAN = 14,   /* discrete Gaussian, scale sigma, sensitivity */
    DP_EV_DISCRETE_LAPLACE = 15,    /* discrete Laplace DLap(a), integer sensitivity */
    DP_EV_EXPONENTIAL = 16,         /* epsilon-DP exponential mechanism (epsilon-bounded range) */
    DP_EV_PERMUTE_AND_FLIP = 17,    /* epsilon-DP permute-and-flip */
    DP_EV_ZCDP = 18,                /* (xi, rho)-zCDP: RDP xi + rho alpha */
    DP_EV_MIXTURE_GAUSSIANS = 19,   /* N(0, s^2) against sum_i p_i N(c_i, s^2) */
    DP_EV_REPEAT_AND_SELECT = 20,   /* the inner event repeated a random number of times */
    /* ---- fixed-size, truncated sampling and tree aggregation (kinds 21..28) ---- */
    DP_EV_SAMPLED_WITH_REPLACEMENT = 21,    /* `event` on sample_size draws with replacement */
    DP_EV_SAMPLED_WITHOUT_REPLACEMENT = 22, /* `event` on sample_size distinct records */
    DP_EV_TREE_AGGREGATION = 23,            /* one epoch of DP-FTRL tree aggregation */
    DP_EV_TRUNCATED_GAUSSIAN = 24           /* truncated Poisson-subsampled Gaussian */
} dp_event_kind;

/* The last of kinds 13..20 (the decoder takes 1..20 and the sampling kinds 21..24). */
#define DP_EV_LAST_MECH DP_EV_REPEAT_AND_SELECT

/* Parameters that calibration can solve for. */
typedef enum {
    DP_PARAM_NONE = 0,
    DP_PARAM_NOISE_MULTIPLIER = 1,
    DP_PARAM_ROUNDS = 2,
    DP_PARAM_COUNT = 3,
    DP_PARAM_SAMPLING_PROBABILITY = 4,
    DP_PARAM_NOISE_SCALE = 5,  /* PNSGD: the Gaussian std or the Laplace scale */
    DP_PARAM_DATASET_SIZE = 6, /* PNSGD: n */
    DP_PARAM_C1 = 7            /* PNSGD schedules: C1 */
} dp_param;

typedef struct dp_event dp_event;
struct dp_event {
    dp_event_kind kind;
    dp_param unknown; /* the field of this node left for calibration, or DP_PARAM_NONE */
    union {
        struct {
            double noise_multiplier; /* sigma, relative to the clipping norm */
            uint64_t rounds;         /* M: rounds (batches) in the epoch */
        } shuffled;
        struct {
            double noise_multiplier; /* Gaussian std / Laplace scale, over the sensitivity */
        } noise;                     /* DP_EV_GAUSSIAN, DP_EV_LAPLACE */
        struct {
            double epsilon, delta;
        } epsdelta;
        struct {
            double sampling_probability;
            dp_event *event; /* owned */
        } sampled;
        pnsgd_params pnsgd;
        struct {
            double dataset_size;
            int nphases;
            double *sigma, *batch, *rounds; /* owned arrays of nphases */
            pro_variant variant;
        } proactive;
        sgld_params sgld;
        struct {
            dp_event *event; /* owned */
            uint64_t count;
        } self;
        /* ---- issue 16, mechanism events ---- */
        struct {
            double noise_parameter; /* p in [0, 1] */
            uint64_t num_buckets;   /* k >= 1 */
        } rr;
        struct {
            double sigma, sensitivity; /* sigma >= 0 (0: no noise), sensitivity > 0 */
            uint64_t dimension;        /* 0: not given */
        } dgauss;
        struct {
            double noise_parameter; /* a >= 0 (0: no noise) */
            uint64_t sensitivity;   /* integer L1 sensitivity */
        } dlap;
        struct {
            double epsilon;
        } pure; /* DP_EV_EXPONENTIAL, DP_EV_PERMUTE_AND_FLIP */
        struct {
            double rho, xi;
        } zcdp;
        struct {
            double sigma;
            size_t n;
            double *c, *p; /* owned arrays of n sensitivities and probabilities */
        } mog;
        struct {
            dp_event *event;    /* owned */
            double mean, shape; /* shape +inf: Poisson */
        } rs;
        /* ---- kinds 21..28 ---- */
        struct {
            uint64_t population; /* source_dataset_size */
            uint64_t sample_size;
            dp_event *event; /* owned */
        } fixed;             /* DP_EV_SAMPLED_WITH_REPLACEMENT, _WITHOUT_REPLACEMENT */
        struct {
            double noise_multiplier;
            uint64_t *steps; /* owned: step_counts */
            size_t nsteps;
            int scalar; /* step_counts was given as one integer */
        } tree;
        struct {
            uint64_t dataset_size;
            double sampling_probability;
            uint64_t batch_size; /* truncated_batch_size */
            double noise_multiplier;
        } truncated;
        struct {
            dp_event **events; /* owned array of owned events */
            size_t n;
        } composed;
    } u;
};

/* A zeroed node of the given kind, or NULL on allocation failure. */
dp_event *dp_event_new(dp_event_kind kind);

/* Free a tree (NULL is fine). */
void dp_event_free(dp_event *ev);

/* Stable parameter names used by the API: "noise_multiplier", "rounds", "count",
 * "sampling_probability". */
const char *dp_param_name(dp_param p);

/* The node carrying the unknown parameter (the first in depth-first order), or NULL.
 * *nunknown receives how many nodes carry one (callers require exactly one). */
dp_event *dp_event_find_unknown(dp_event *ev, int *nunknown);

/* The event objects in the tree: ev and every event nested in it (0 for NULL). */
size_t dp_event_nodes(const dp_event *ev);

#endif

/* ---- binary encoding (the ledger's log and snapshots) --------------------------------- *
 * A tree is written depth-first: u8 kind, then the node's fields little-endian (doubles as
 * IEEE-754 bits, counts as u64), then its children. The format is part of the ledger's
 * on-disk version (LEDGER_FORMAT in ledger.h). */

/* Append the encoding of ev to a growable buffer (*buf may be NULL; realloc'ed safely).
 * DPB_ENOMEM on allocation failure, DPB_EINVAL for a template with an unknown field. */
dpb_status dp_event_encode(const dp_event *ev, unsigned char **buf, size_t *len, size_t *cap);

/* Decode one tree from buf[0..len); *used receives the bytes consumed. DPB_ECORRUPT on
 * malformed input (never reads past len; nesting and sizes bounded). */
dpb_status dp_event_decode(const unsigned char *buf, size_t len, dp_event **out, size_t *used);
