/*
 * pld.h - privacy-loss distributions (docs/MATH.md section 6; Koskela et al., Doroshenko et al.):
 * the law of the privacy loss L = ln(P/Q) under P for a dominating pair (P, Q), on a grid
 * of step h, discretised pessimistically, so every delta derived from it is an upper bound.
 *
 *   - each leaf is discretised by "connect the dots": the discrete delta(eps) interpolates
 *     the true one at the grid points in e^eps and lies above it in between (for every
 *     real eps), so the discrete pair dominates; mass below the lowest grid point is moved
 *     up onto it, mass above the top one is split between it and +infinity;
 *   - composition is convolution (FFT); the composed tails outside a Chernoff window are
 *     bounded and that bound is added to the mass at +infinity;
 *   - delta(eps) = P(L = inf) + sum_{l_k > eps} (1 - e^{eps - l_k}) p_k.
 * Subsampled mechanisms need both directions (remove: P = D, add: P = D'): they are built
 * and composed separately and the larger delta is reported (by the caller).
 *
 * Where it lives (each file's head says what it may call; arrows one way):
 *   pld_compose.c (composition, the tilt, pld_side) -> pld_transform.c (the transforms and
 *   their round-off) -> pld_fft.c (sizes, plans, work blocks, pld_convolve) -> pld.c (the
 *   distribution, delta, epsilon); pld_compose.c -> pld_window.c (Chernoff windows) -> pld.c;
 *   pld_leaf.c (the leaves) -> pld.c. Internal contracts: pld_int.h, pld_fft.h,
 *   pld_transform.h, pld_window.h.
 */
#ifndef DP_PLD_H
#define DP_PLD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/status.h"

/* Defaults: dp_accounting's PLD grid, and the tail mass moved per operation. */
#define PLD_DEFAULT_H 1e-4
#define PLD_TAIL 1e-15
/* A leaf's mass above its top grid point goes (mostly) to +infinity, and a leaf composed T
 * times contributes T times that: leaves are cut where the upper tail is 1e-22 (about
 * dp_accounting's e^-50), so 10^5 steps add 1e-17 to delta, not 1e-10. */
#define PLD_LEAF_TAIL 1e-22
/* Largest grid a distribution may have (memory bound: 8 bytes a point, twice for FFT). */
#define PLD_MAX_POINTS ((size_t)1 << 23)

/* The round-off bound of a composition computed through an exponential tilt
 * (pld_ctx.tilt): the error of the point at loss m h (lo < m <= hi) is at most
 * a_m = err_m scale e^{logw - theta m h}, where the err_m are bounded pointwise by ept and
 * in 2-norm by e2, so the error of delta(eps) is at most the sum of a_m over m h > eps, by
 * the smaller of ept sum W_m and e2 (sum W_m^2)^(1/2) (pld_delta). theta = 0: no tilt. */
typedef struct {
    double theta, logw, scale, ept, e2;
    int64_t lo, hi;
} pld_tilt_err;

typedef struct {
    double h;          /* grid step of the loss */
    int64_t lo;        /* p[i] is the mass at loss (lo + i) h */
    size_t n;          /* number of grid points (>= 1) */
    double *p;         /* owned */
    double inf_mass;   /* P(L = +infinity) */
    double roundoff;   /* bound on sum_i |p[i] - exact p[i]| from FFT round-off (0 for leaves) */
    pld_tilt_err tilt; /* a tilted composition's finer bound (tilt.theta 0: none) */
    double floor;      /* losses below it are not kept exactly: their mass is moved up onto it
                        * (a tilted composition); -HUGE_VAL: every loss is kept */
    double steps;      /* leaves composed into it (1 for a leaf): the double bound's scale */
    double gauss_mu;   /* > 0: exactly the Gaussian mechanism's law of this mu, on no grid
                        * (pld_gaussian_exact); p holds nothing and it composes with nothing */
} pld_pmf;

enum { PLD_REMOVE = 0, PLD_ADD = 1 };

void pld_free(pld_pmf *d);
dpb_status pld_copy(const pld_pmf *src, pld_pmf *dst);

/* Leaves. sigma/b are the noise multipliers relative to the sensitivity (the caller maps
 * replace-one to sigma/2). All DPB_EINVAL on a bad domain, DPB_ELIMIT if the grid would
 * exceed PLD_MAX_POINTS, DPB_ENOMEM. */
dpb_status pld_gaussian(double sigma, double h, pld_pmf *out);
dpb_status pld_laplace(double b, double h, pld_pmf *out);
dpb_status pld_sampled_gaussian(double q, double sigma, int dir, double h, pld_pmf *out);
dpb_status pld_sampled_laplace(double q, double b, int dir, double h, pld_pmf *out);
/* Poisson sampling (0 < q < 1) of the Gaussian mechanism under replace-one (sigma relative
 * to the clipping norm): the worst-case pair (1-q)N(0) + qN(-1) against (1-q)N(0) + qN(1)
 * (Lebeda, Regehr, Kamath, Steinke 2025, Proposition 13), symmetric: one direction. */
dpb_status pld_sampled_gaussian_replace(double q, double sigma, double h, pld_pmf *out);
dpb_status pld_eps_delta(double eps, double delta, double h, pld_pmf *out);
dpb_status pld_identity(double h, pld_pmf *out); /* no privacy loss */

/* The Gaussian mechanism of parameter mu (sensitivity over noise) exactly: its loss is
 * N(mu^2/2, mu^2) under P, and pld_delta and pld_epsilon answer in closed form (dp_gdp_delta,
 * rounded up) at every eps, with no grid and no round-off bound. For a composition of
 * Gaussian mechanisms only, whose mu^2 add up; it cannot be composed further (DPB_EINVAL). */
dpb_status pld_gaussian_exact(double mu, double h, pld_pmf *out);
dpb_status pld_non_private(double h, pld_pmf *out); /* all mass at +infinity */

/* ---- issue 16: leaves of dp_accounting's mechanism events ---- */

/* A discrete privacy loss: atoms loss[i] with P-masses mass[i] (their Q-masses are
 * mass[i] e^{-loss[i]}) and inf_mass at +infinity, each atom split between its two grid
 * points by connect-the-dots (randomized response, the discrete Laplace mechanism). */
dpb_status pld_atoms(const double *loss, const double *mass, size_t n, double inf_mass, double h,
                     pld_pmf *out);

/* The mixture of Gaussians mechanism (dp_accounting's MixtureOfGaussiansDpEvent): N(0, s^2)
 * against sum_i w_i N(c_i, s^2), every c_i >= 0 and one > 0; dir PLD_REMOVE has the mixture as
 * P. (The Poisson-sampled Gaussian is c = (0, 1), w = (1 - q, q).) */
dpb_status pld_mixture_gaussian(double sigma, const double *c, const double *w, size_t n, int dir,
                                double h, pld_pmf *out);

/*
 * A dominating PLD for a mechanism known only through a symmetric upper bound on its
 * privacy profile: f(ctx, eps) >= delta(eps) for eps >= 0, for both orders of the pair.
 * The bound is extended to eps < 0 by delta(-e) = 1 - e^{-e} + e^{-e} delta(e), made
 * non-increasing, and replaced by its lower convex envelope in x = e^eps through (0, 1):
 * the true delta is convex in x and below every point, so it stays below the envelope,
 * which is the hockey-stick curve of the returned discrete pair (atoms at the envelope's
 * vertices, which are grid points). f must return a finite value in [0, 1].
 */
typedef double (*pld_profile_fn)(void *ctx, double eps);
dpb_status pld_from_profile(pld_profile_fn f, void *ctx, double h, pld_pmf *out);

/*
 * The same for a pair known through upper bounds on both orders, not necessarily equal:
 * f(ctx, eps) >= delta_PQ(eps) and g_rev(ctx, eps) >= delta_QP(eps) for eps >= 0. The
 * result is the PLD of P over Q (swap f and g_rev for the other direction).
 */
dpb_status pld_from_pair_profile(pld_profile_fn f, pld_profile_fn g_rev, void *ctx, double h,
                                 pld_pmf *out);

/* Linear convolution c = a * b (length na + nb - 1), directly or by FFT. */
dpb_status pld_convolve(const double *a, size_t na, const double *b, size_t nb, double *c);

/* FFTW's planner is not thread-safe: hold this lock to create or destroy plans. */
void pld_fftw_lock(void);
void pld_fftw_unlock(void);

/* out = a (x) b (both on the same grid step). */
dpb_status pld_compose(const pld_pmf *a, const pld_pmf *b, pld_pmf *out);

/* The same by FFT whatever the sizes (pld_compose sums directly up to 4e6 products): n log n
 * time and the FFT's round-off bound, for compositions extended one at a time (the ledger's
 * kept compositions). */
dpb_status pld_compose_fft(const pld_pmf *a, const pld_pmf *b, pld_pmf *out);

/* out = a composed with itself count times (count >= 1), by one FFT power. */
dpb_status pld_self_compose(const pld_pmf *a, uint64_t count, pld_pmf *out);

/* One term of a composition: count (>= 1) copies of d. */
typedef struct {
    const pld_pmf *d;
    uint64_t count;
} pld_term;

/* out = the composition of all k >= 1 terms (same grid step), at once in the Fourier
 * domain: one forward FFT per term on one size, chosen from the Chernoff window of the whole
 * composition (not of each piece), the product of the powers, one inverse FFT. The mass
 * outside the window (at most PLD_TAIL a side) is added to +infinity. */
dpb_status pld_compose_many(const pld_term *terms, size_t k, pld_pmf *out);

/* How a composition is computed, passed down by the caller (as GSL passes its workspaces):
 *   - ext: transforms in long double (u = 2^-63 on x86-64), so the round-off bound is about
 *     2000 times smaller, at about 6 times the transform time: for requests whose delta the
 *     double bound would dominate;
 *   - tilt: while tilt.floor is finite, the composition is computed in double through an
 *     exponential tilt (docs/MATH.md section 6): each term's masses are multiplied by
 *     e^{theta l} (theta > 0 from the Chernoff bound at the loss aim >= floor), composed, and
 *     divided again, so the FFT's round-off reaches a loss l scaled by about
 *     e^{F(theta) - theta l}, near the Chernoff bound at l, instead of by 1. The result is
 *     exact (to its bound) only at losses above floor: the mass below it is moved up onto
 *     floor, which keeps every delta an upper bound and makes those below floor loose. For
 *     requests whose delta the double bound would dominate, at the cost of one double
 *     composition. Where the tilt cannot help (floor not above the composition's mean, the
 *     inputs composed already, or the window too large), the composition is computed as
 *     without it (in long double if ext). floor NAN (and delta 0) turns it off. */
typedef struct {
    double floor, aim;
    double delta; /* floor NAN and delta > 0: an epsilon at delta will be asked (direct, below) */
} pld_tilt_at;
typedef struct {
    pld_tilt_at tilt; /* {NAN, NAN, 0}: no tilt */
    int ext;          /* 1: long double transforms */
} pld_ctx;

/* pld_compose_many as cx says (borrowed; NULL: in double, no tilt, as pld_compose_many). */
dpb_status pld_compose_many_ctx(const pld_ctx *cx, const pld_term *terms, size_t k, pld_pmf *out);

/* Whether a composition of this many leaves (pld_pmf.steps) is tilted at once for an answer
 * near delta: where its double round-off bound (about 3 eta steps, eta = pld_fft_eta(2^20);
 * measured 2.5-3.4 times eta steps from 10^3 to 10^5 steps) would pass 1e-3 of delta. The
 * same test decides an epsilon query at delta (direct, below) and a delta query answering
 * delta, which is then composed again tilted: the two agree (a tilted delta is at most the
 * double one, and the test holds for every smaller delta).
 *
 * Direct: with floor NAN and delta > 0, a composition pld_tilt_direct accepts is tilted at once,
 * at floor and aim estimated from its own terms (the Chernoff bound at delta, corrected by the
 * saddle-point factor, less a margin), instead of being composed in double first. An answer at
 * or below the floor (d->floor) means the estimate was too high: the caller composes again
 * without. */
int pld_tilt_direct(double steps, double delta);

/* The round-off bound pld_delta adds at eps (d->roundoff, or a tilted composition's over the
 * points above eps). */
double pld_roundoff_at(const pld_pmf *d, double eps);

/* A job run on a second thread with the calling thread's cancellation installed (the two
 * directions of a composition are independent: a request composes them side by side; the
 * job's arg carries whatever pld_ctx it composes with). pld_side_run starts fn(arg), or runs
 * it before returning when no thread can be made; pld_side_join waits for it. */
typedef struct {
    pthread_t thread;
    int running;
    void (*fn)(void *);
    void *arg;
    const struct dpb_cancel *cancel;
} pld_side;
void pld_side_run(pld_side *s, void (*fn)(void *), void *arg);
void pld_side_join(pld_side *s);

/* FFTW plans for the transform sizes compositions use (up to 2^20) made ahead and kept, on
 * this thread (pld_warm_plans) or on one of its own (pld_warm_plans_start, which returns at
 * once): the daemon starts it with the service, so that no request pays the planning. The
 * sizes are planned smallest first while they fit the plans' memory budget. */
void pld_warm_plans(void);
void pld_warm_plans_start(void);

/* The memory the kept FFTW plans may hold, in bytes (counted at 16 bytes a transform point;
 * 0: none are kept, every call plans its own). The default holds every size up to 2^20:
 * 11.3 M points, about 140 MiB resident. Set it before pld_warm_plans; lowering it later
 * evicts as sizes are next planned. */
#define PLD_PLAN_MEMORY_DEFAULT ((size_t)192 << 20)
void pld_plan_memory(size_t bytes);

/* Componentwise error of one computed DFT of length N per unit of the input's 1-norm
 * (|y^_f - y_f| <= pld_fft_eta(N) sum_j |x_j| for every f): a generous constant times
 * u (log2 N + 1); shared by every FFT round-off bound (PLD composition, shuffle_exact). */
double pld_fft_eta(size_t N);

/* delta(eps) for any real eps (an upper bound for the mechanism, by construction): the
 * discrete sum plus the FFT round-off bound (d->roundoff, or for a tilted composition its
 * bound over the losses above eps). */
double pld_delta(const pld_pmf *d, double eps);

/* The smallest eps >= 0 with delta(eps) <= delta, verified and rounded up; +HUGE_VAL when
 * the mass at infinity plus the round-off bound exceeds delta. */
double pld_epsilon(const pld_pmf *d, double delta);

#endif
