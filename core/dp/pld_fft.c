/*
 * pld_fft.c - the FFT engine's memory and the pairwise convolution: transform sizes, FFTW
 * plans cached per size (made ahead by pld_warm_plans), work blocks kept across compositions,
 * pld_convolve and its round-off bound. It calls pld.c (pld_int.h) and FFTW only.
 *
 * FFTW's planner is not thread-safe: plan creation and destruction hold plan_lock
 * (pld_fftw_lock); fftw_execute on distinct plans runs concurrently.
 */
#include "pld_fft.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cancel.h"

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

void pld_fftw_lock(void)
{
    pthread_mutex_lock(&plan_lock);
}

void pld_fftw_unlock(void)
{
    pthread_mutex_unlock(&plan_lock);
}

/* The smallest 2^a 3^b 5^c >= n (sizes FFTW handles fastest). */
static size_t pld_good_size(size_t n)
{
    size_t best = (size_t)1 << 62;
    for (size_t p2 = 1; p2 < 2 * n + 2; p2 *= 2)
        for (size_t p3 = p2; p3 < 2 * n + 2; p3 *= 3)
            for (size_t p5 = p3; p5 < 2 * n + 2; p5 *= 5)
                if (p5 >= n && p5 < best)
                    best = p5;
    return best;
}

/* A composition's transform size: pld_good_size up to 64, above it the smallest 2^j m >= n with
 * m one of 16, 18, 20, 21, 24, 27, 30 (products of 2, 3, 5 and 7, which FFTW handles well):
 * at most 14% above n (6% on average, against about 3% for pld_good_size), and few enough sizes
 * that their plans stay cached (see the plan cache below). */
size_t pld_ladder_size(size_t n)
{
    static const size_t m[] = {16, 18, 20, 21, 24, 27, 30, 32};
    if (n <= 64)
        return pld_good_size(n);
    size_t p = 1;
    while (32 * p < n)
        p *= 2;
    for (size_t i = 0;; i++)
        if (m[i] * p >= n)
            return m[i] * p;
}

/* 8 u (log2 N + 2): a radix-2 FFT's butterfly stage adds at most about (sqrt 2 + 4) u
 * relative to the 1-norm it carries (Higham, Accuracy and Stability of Numerical
 * Algorithms, 2nd ed., section 24.1: eta = mu + gamma_4 (sqrt 2 + mu) a stage, the stages'
 * moduli product |A_L|...|A_1| all ones), so log2 N stages give < 6 u log2 N; FFTW's other
 * radices and codelets are covered by the margin (8 and the + 2). The same constant bounds
 * the normwise error ||y^ - y||_2 <= eta ||y||_2 (Higham's Theorem 24.2). */
double pld_fft_eta(size_t N)
{
    return 8.0 * DBL_EPSILON * (log2((double)(N > 1 ? N : 1)) + 2.0);
}

/* pld_convolve sums directly below this many products */
static int convolve_direct(size_t na, size_t nb)
{
    return (double)na * (double)nb <= 4e6;
}

/* Destroy the n plans made for one call (NULL ones skipped), under plan_lock. */
static void plans_drop(const fftw_plan *p, size_t n)
{
    pthread_mutex_lock(&plan_lock);
    for (size_t i = 0; i < n; i++)
        if (p[i] != NULL)
            fftw_destroy_plan(p[i]);
    pthread_mutex_unlock(&plan_lock);
}

/* Linear convolution of a and b into c (length na + nb - 1): direct for small inputs, FFT
 * otherwise (the product of two transforms of the zero-padded inputs). */
dpb_status pld_convolve(const double *a, size_t na, const double *b, size_t nb, double *c)
{
    return pld_convolve_by(a, na, b, nb, c, !convolve_direct(na, nb));
}

dpb_status pld_convolve_by(const double *a, size_t na, const double *b, size_t nb, double *c,
                           int fft)
{
    size_t nc = na + nb - 1;
    if (!fft) {
        memset(c, 0, nc * sizeof *c);
        for (size_t i = 0; i < na; i++)
            for (size_t j = 0; j < nb; j++)
                c[i + j] += a[i] * b[j];
        return DPB_OK;
    }
    size_t N = pld_good_size(nc), nf = N / 2 + 1;
    double *buf = fftw_malloc(N * sizeof *buf);
    fftw_complex *A = fftw_malloc(nf * sizeof *A), *B = fftw_malloc(nf * sizeof *B);
    dpb_status st = DPB_OK;
    fftw_plan pa = NULL, pb = NULL, inv = NULL;
    if (buf == NULL || A == NULL || B == NULL) {
        st = DPB_ENOMEM;
        goto out;
    }
    pthread_mutex_lock(&plan_lock);
    pa = fftw_plan_dft_r2c_1d((int)N, buf, A, FFTW_ESTIMATE);
    pb = fftw_plan_dft_r2c_1d((int)N, buf, B, FFTW_ESTIMATE);
    inv = fftw_plan_dft_c2r_1d((int)N, A, buf, FFTW_ESTIMATE);
    pthread_mutex_unlock(&plan_lock);
    if (pa == NULL || pb == NULL || inv == NULL) {
        st = DPB_ENOMEM;
        goto out;
    }
    if (dpb_cancelled()) {
        st = DPB_ECANCELLED;
        goto out;
    }
    memset(buf, 0, N * sizeof *buf);
    memcpy(buf, a, na * sizeof *a);
    fftw_execute(pa);
    memset(buf, 0, N * sizeof *buf);
    memcpy(buf, b, nb * sizeof *b);
    fftw_execute(pb);
    for (size_t k = 0; k < nf; k++)
        A[k] *= B[k];
    fftw_execute(inv);
    for (size_t j = 0; j < nc; j++)
        c[j] = buf[j] / (double)N;
out:
    plans_drop((fftw_plan[]){pa, pb, inv}, 3);
    fftw_free(buf);
    fftw_free(A);
    fftw_free(B);
    return st;
}

/*
 * Round-off of c = a * b (pld_convolve), as a bound on sum_j |c^_j - c_j| (the 1-norm over
 * the output, which bounds the error of every delta(eps) = sum (1 - e^{eps - l}) p_l, the
 * weights lying in [0, 1]). sa, sb >= the inputs' 1-norms; u = DBL_EPSILON (generous: the
 * unit round-off is u / 2).
 *   - direct sums: each c_j sums at most m = min(na, nb) products, so
 *     |c^_j - c_j| <= gamma_{m+1} sum |a_i b_{j-i}| and the 1-norm <= gamma_{m+1} sa sb;
 *   - FFT of size N (eta = pld_fft_eta(N)): |A^_f - A_f| <= eta sa =: ea (componentwise),
 *     likewise eb, |A_f| <= sa, so the product's error at f is at most
 *     b = ea (sb + eb) + sa eb + 4 u (sa + ea)(sb + eb), |Z^_f| <= zmax = (sa + ea)(sb + eb);
 *     the inverse maps the spectrum's error to the output's 2-norm with the factor
 *     1/sqrt N, i.e. at most b, and adds eta ||z^||_2 <= eta zmax (normwise), the division
 *     by N u zmax; the 1-norm over the nc points read is <= sqrt(nc) times the 2-norm.
 * The inputs' own errors ra, rb add ra (sb + rb) + sa rb (||a^ * b^ - a * b||_1).
 */
double pld_convolve_roundoff(const pld_pmf *a, const pld_pmf *b)
{
    size_t nc = a->n + b->n - 1;
    return pld_convolve_roundoff_n(a, b, convolve_direct(a->n, b->n) ? 0 : pld_good_size(nc));
}

double pld_convolve_roundoff_n(const pld_pmf *a, const pld_pmf *b, size_t N)
{
    const double u = DBL_EPSILON;
    double sa = pld_sum_mass(a), sb = pld_sum_mass(b), r;
    size_t nc = a->n + b->n - 1;
    if (N == 0) {
        double m = (double)(a->n < b->n ? a->n : b->n) + 1.0;
        r = m * u / (1.0 - m * u) * sa * sb;
    } else {
        double eta = pld_fft_eta(N), ea = eta * sa, eb = eta * sb;
        double zmax = (sa + ea) * (sb + eb);
        double bf = ea * (sb + eb) + sa * eb + 4.0 * u * zmax;
        r = sqrt((double)nc) * (bf + (eta + u) * zmax);
    }
    r += a->roundoff * (sb + b->roundoff) + sa * b->roundoff;
    return r * (1.0 + 1e-6);
}

dpb_status pld_convolve_ladder(const double *a, size_t na, const double *b, size_t nb, double *c,
                               size_t *N_used)
{
    size_t nc = na + nb - 1, N = pld_ladder_size(nc), held = 0;
    int cx = N <= PLD_C2C_MAX_N, slot;
    size_t nf = cx ? N : N / 2 + 1;
    fftw_plan fwd, inv;
    dpb_status st = pld_plans_get(N, &fwd, &inv, &slot);
    if (st != DPB_OK)
        return st;
    /* work: the input (N complex, or N real), A and B (nf complex each) */
    size_t bin = pld_scratch_round(N * (cx ? sizeof(fftw_complex) : sizeof(double))),
           bf = pld_scratch_round(nf * sizeof(fftw_complex));
    char *work = pld_scratch_get(bin + 2 * bf, &held);
    if (work == NULL) {
        pld_plans_put(fwd, inv, slot);
        return DPB_ENOMEM;
    }
    fftw_complex *A = (fftw_complex *)(work + bin), *B = (fftw_complex *)(work + bin + bf);
    const double *src[2] = {a, b};
    size_t len[2] = {na, nb};
    for (int k = 0; k < 2; k++) {
        if (cx) {
            fftw_complex *in = (fftw_complex *)work;
            for (size_t i = 0; i < N; i++)
                in[i] = i < len[k] ? src[k][i] : 0.0;
            fftw_execute_dft(fwd, in, k == 0 ? A : B);
        } else {
            double *in = (double *)work;
            memset(in, 0, N * sizeof *in);
            memcpy(in, src[k], len[k] * sizeof *in);
            fftw_execute_dft_r2c(fwd, in, k == 0 ? A : B);
        }
    }
    for (size_t f = 0; f < nf; f++)
        A[f] *= B[f];
    if (cx) {
        fftw_complex *out = (fftw_complex *)work;
        fftw_execute_dft(inv, A, out);
        for (size_t j = 0; j < nc; j++)
            c[j] = creal(out[j]) / (double)N;
    } else {
        double *out = (double *)work;
        fftw_execute_dft_c2r(inv, A, out);
        for (size_t j = 0; j < nc; j++)
            c[j] = out[j] / (double)N;
    }
    pld_scratch_put(work, held);
    pld_plans_put(fwd, inv, slot);
    *N_used = N;
    return DPB_OK;
}

/* ---- work memory, kept across compositions ---------------------------------------------------
 * A composition's transforms need 32 to 80 bytes a point of work memory. glibc maps blocks
 * that large afresh for each request, and the page faults of touching them took about 40% of
 * a small composition's time (11 Laplace steps: N = 160 000). Freed work blocks are kept
 * instead, at most SCRATCH_KEEP bytes in SCRATCH_SLOTS blocks for the whole process (a
 * larger block is freed at once; to keep a new one the smallest kept ones go), and the next
 * composition of any thread takes the smallest that fits. */
#define SCRATCH_SLOTS 8
#define SCRATCH_KEEP ((size_t)64 << 20)

static struct {
    void *p;
    size_t size;
} scratch[SCRATCH_SLOTS];
static size_t scratch_held;
static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;

/* bytes rounded up to a multiple of 64 (each array of a block keeps FFTW's SIMD alignment) */
size_t pld_scratch_round(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* A block of at least bytes (fftw_malloc'ed), *size its real size; NULL if out of memory. */
void *pld_scratch_get(size_t bytes, size_t *size)
{
    pthread_mutex_lock(&scratch_lock);
    size_t best = SCRATCH_SLOTS;
    for (size_t i = 0; i < SCRATCH_SLOTS; i++)
        if (scratch[i].p != NULL && scratch[i].size >= bytes &&
            (best == SCRATCH_SLOTS || scratch[i].size < scratch[best].size))
            best = i;
    if (best < SCRATCH_SLOTS) {
        void *p = scratch[best].p;
        *size = scratch[best].size;
        scratch[best].p = NULL;
        scratch_held -= *size;
        pthread_mutex_unlock(&scratch_lock);
        return p;
    }
    pthread_mutex_unlock(&scratch_lock);
    *size = bytes;
    return fftw_malloc(bytes);
}

/* Give a block back: kept if it fits the budget (evicting the smallest kept ones), else freed. */
void pld_scratch_put(void *p, size_t size)
{
    void *drop[SCRATCH_SLOTS + 1];
    size_t nd = 0;
    if (p == NULL)
        return;
    pthread_mutex_lock(&scratch_lock);
    while (size <= SCRATCH_KEEP) {
        size_t slot = SCRATCH_SLOTS, small = SCRATCH_SLOTS;
        for (size_t i = 0; i < SCRATCH_SLOTS; i++) {
            if (scratch[i].p == NULL)
                slot = slot == SCRATCH_SLOTS ? i : slot;
            else if (small == SCRATCH_SLOTS || scratch[i].size < scratch[small].size)
                small = i;
        }
        if (slot < SCRATCH_SLOTS && scratch_held + size <= SCRATCH_KEEP) {
            scratch[slot].p = p;
            scratch[slot].size = size;
            scratch_held += size;
            p = NULL;
            break;
        }
        if (small == SCRATCH_SLOTS)
            break;
        drop[nd++] = scratch[small].p;
        scratch_held -= scratch[small].size;
        scratch[small].p = NULL;
    }
    pthread_mutex_unlock(&scratch_lock);
    for (size_t i = 0; i < nd; i++)
        fftw_free(drop[i]);
    fftw_free(p);
}

/* ---- FFT plans, cached per size ------------------------------------------------------------
 * FFTW_ESTIMATE plans cost O(N) trigonometric calls to create, and a real-input (r2c) size
 * 4-20 ms from 2^16 to 2^20, as long as its transforms take up to 2^19 (measured on the 2-core
 * machine). Compositions therefore use a short ladder of sizes (pld_ladder_size: 7 an octave, 113
 * up to 2^20 with 11.3 M points in all), so the same sizes recur across requests, and a pair
 * of plans is kept per size, created under plan_lock: at most PLAN_CACHE pairs, of sizes up
 * to PLAN_CACHE_MAX_N, holding at most plan_budget points in all (a pair holds O(N) twiddle
 * factors: 12-16 bytes a point measured, PLAN_BYTES_PER_POINT counted; the default budget
 * holds the whole ladder, about 140 MiB resident), the least recently used pair no call is
 * executing destroyed to make room; other plans are made and destroyed per call. Cached
 * plans are executed with the new-array interface on fftw_malloc'ed (so SIMD-aligned)
 * buffers, which FFTW documents as thread-safe for distinct arrays. */
#define PLAN_CACHE 192
#define PLAN_CACHE_MAX_N ((size_t)1 << 20)
#define PLAN_BYTES_PER_POINT 16

/* Up to this size the transforms are complex (c2c) of the real input: FFTW plans a new r2c
 * size in 1-6 ms (its real-data planner tries many solvers), a c2c size in 0.1-0.5 ms, and at
 * these sizes a transform runs in well under a millisecond either way, so a request whose
 * size was never planned before costs the planning, not the transform (PLD_C2C_MAX_N, in
 * pld_fft.h). */

typedef struct {
    size_t n; /* 0: an empty slot */
    fftw_plan fwd, inv;
    unsigned users; /* calls executing the pair now: never evicted while > 0 */
    uint64_t used;  /* when last taken (least recently used goes first) */
} plan_pair;

static plan_pair plan_cache[PLAN_CACHE];
static size_t plan_points;
static size_t plan_budget = (size_t)PLD_PLAN_MEMORY_DEFAULT / PLAN_BYTES_PER_POINT;
static uint64_t plan_tick;

void pld_plan_memory(size_t bytes)
{
    pthread_mutex_lock(&plan_lock);
    plan_budget = bytes / PLAN_BYTES_PER_POINT;
    pthread_mutex_unlock(&plan_lock);
}

/* Make room for a pair of size N (under plan_lock): evict the least recently used pairs no
 * call is using until a slot and the points are free. The free slot, or -1. */
static int plan_room(size_t N)
{
    if (N > PLAN_CACHE_MAX_N)
        return -1;
    for (;;) {
        int empty = -1, lru = -1;
        for (int i = 0; i < PLAN_CACHE; i++) {
            if (plan_cache[i].n == 0)
                empty = empty < 0 ? i : empty;
            else if (plan_cache[i].users == 0 &&
                     (lru < 0 || plan_cache[i].used < plan_cache[lru].used))
                lru = i;
        }
        if (empty >= 0 && plan_points + N <= plan_budget)
            return empty;
        if (lru < 0)
            return -1;
        fftw_destroy_plan(plan_cache[lru].fwd);
        fftw_destroy_plan(plan_cache[lru].inv);
        plan_points -= plan_cache[lru].n;
        plan_cache[lru].n = 0;
    }
}

/* The plans for size N: cached (*slot >= 0, held until pld_plans_put) or made for this call
 * (*slot = -1); complex (out of place, forward and backward) when N <= PLD_C2C_MAX_N, real (r2c,
 * c2r) above. */
dpb_status pld_plans_get(size_t N, fftw_plan *fwd, fftw_plan *inv, int *slot)
{
    dpb_status st = DPB_ENOMEM;
    *slot = -1;
    pthread_mutex_lock(&plan_lock);
    for (int i = 0; i < PLAN_CACHE; i++)
        if (plan_cache[i].n == N) {
            *fwd = plan_cache[i].fwd;
            *inv = plan_cache[i].inv;
            plan_cache[i].users++;
            plan_cache[i].used = ++plan_tick;
            *slot = i;
            pthread_mutex_unlock(&plan_lock);
            return DPB_OK;
        }
    int cx = N <= PLD_C2C_MAX_N;
    double *buf = fftw_malloc(N * (cx ? sizeof(fftw_complex) : sizeof *buf));
    fftw_complex *X = fftw_malloc((cx ? N : N / 2 + 1) * sizeof *X);
    *fwd = *inv = NULL;
    if (buf != NULL && X != NULL && cx) {
        fftw_complex *in = (fftw_complex *)buf;
        *fwd = fftw_plan_dft_1d((int)N, in, X, FFTW_FORWARD, FFTW_ESTIMATE);
        *inv = fftw_plan_dft_1d((int)N, in, X, FFTW_BACKWARD, FFTW_ESTIMATE);
    } else if (buf != NULL && X != NULL) {
        *fwd = fftw_plan_dft_r2c_1d((int)N, buf, X, FFTW_ESTIMATE);
        *inv = fftw_plan_dft_c2r_1d((int)N, X, buf, FFTW_ESTIMATE);
    }
    if (*fwd != NULL && *inv != NULL) {
        st = DPB_OK;
        *slot = plan_room(N);
        if (*slot >= 0) {
            plan_cache[*slot] = (plan_pair){N, *fwd, *inv, 1, ++plan_tick};
            plan_points += N;
        }
    } else {
        if (*fwd)
            fftw_destroy_plan(*fwd);
        if (*inv)
            fftw_destroy_plan(*inv);
    }
    pthread_mutex_unlock(&plan_lock);
    fftw_free(buf);
    fftw_free(X);
    return st;
}

void pld_plans_put(fftw_plan fwd, fftw_plan inv, int slot)
{
    pthread_mutex_lock(&plan_lock);
    if (slot >= 0) {
        plan_cache[slot].users--;
    } else if (fwd != NULL) {
        fftw_destroy_plan(fwd);
        fftw_destroy_plan(inv);
    }
    pthread_mutex_unlock(&plan_lock);
}

/* The ladder's sizes up to PLAN_CACHE_MAX_N, smallest first, as many as the budget holds,
 * planned ahead so that no request pays the planning (4-20 ms a real-input size from 2^16 to
 * 2^20; about 0.3 s of one core for all). */
void pld_warm_plans(void)
{
    for (size_t N = 16; N <= PLAN_CACHE_MAX_N; N = pld_ladder_size(N + 1)) {
        pthread_mutex_lock(&plan_lock);
        int room = plan_points + N <= plan_budget;
        pthread_mutex_unlock(&plan_lock);
        if (!room)
            return;
        fftw_plan fwd, inv;
        int slot;
        if (pld_plans_get(N, &fwd, &inv, &slot) == DPB_OK)
            pld_plans_put(fwd, inv, slot);
    }
}

static void *warm_main(void *arg)
{
    (void)arg;
    pld_warm_plans();
    return NULL;
}

void pld_warm_plans_start(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, warm_main, NULL) == 0)
        pthread_detach(t);
}
