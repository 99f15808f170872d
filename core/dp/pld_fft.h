/*
 * pld_fft.h - internal to core/dp's PLD files: the FFT engine's memory (pld_fft.c): the
 * transform sizes, FFTW plans cached per size, work blocks kept across compositions, and the
 * pairwise convolution's round-off. pld_fft.c calls only pld.c (pld_int.h) and FFTW.
 */
#ifndef DP_PLD_FFT_H
#define DP_PLD_FFT_H

/* complex.h first: fftw_complex is then C's double complex (pld_convolve multiplies them) */
#include <complex.h>

#include <fftw3.h>

#include "pld_int.h"

/* Up to this size the composition's transforms are complex (c2c) of the real input
 * (pld_plans_get makes c2c plans), above it real (r2c, c2r). */
#define PLD_C2C_MAX_N ((size_t)1 << 16)

/* A composition's transform size for n points: 2^a 3^b 5^c up to 64, above it the smallest
 * 2^j m >= n with m one of 16, 18, 20, 21, 24, 27, 30 (few sizes, so their plans stay cached). */
size_t pld_ladder_size(size_t n);

/* bytes rounded up to a multiple of 64 (each array of a work block keeps FFTW's alignment). */
size_t pld_scratch_round(size_t bytes);

/* A work block of at least bytes (fftw_malloc'ed; a kept one when one fits), *size its real
 * size, owned by the caller until pld_scratch_put; NULL if out of memory. Thread-safe. */
void *pld_scratch_get(size_t bytes, size_t *size);

/* Give back a block from pld_scratch_get (NULL: nothing): kept for the next composition if
 * it fits the budget, else freed. Thread-safe. */
void pld_scratch_put(void *p, size_t size);

/* The forward and inverse plans for size N: complex (out of place) when N <= PLD_C2C_MAX_N,
 * real (r2c, c2r) above; cached (*slot >= 0) or made for this call (*slot = -1). The caller
 * executes them with FFTW's new-array interface on fftw_malloc'ed arrays and gives them back
 * with pld_plans_put. DPB_ENOMEM when FFTW cannot plan. Thread-safe. */
dpb_status pld_plans_get(size_t N, fftw_plan *fwd, fftw_plan *inv, int *slot);
void pld_plans_put(fftw_plan fwd, fftw_plan inv, int slot);

/* A bound on sum_j |c^_j - c_j| for c = a * b as pld_convolve computes it (directly or by
 * FFT), the inputs' own round-off (a->roundoff, b->roundoff) included. */
double pld_convolve_roundoff(const pld_pmf *a, const pld_pmf *b);

/* pld_convolve by FFT (fft 1, the size pld_convolve picks) or summed directly (fft 0). */
dpb_status pld_convolve_by(const double *a, size_t na, const double *b, size_t nb, double *c,
                           int fft);

/* The same bound for a convolution by FFT of size N (N 0: summed directly). */
double pld_convolve_roundoff_n(const pld_pmf *a, const pld_pmf *b, size_t N);

/* pld_convolve by FFT whatever the sizes, on the ladder's size (*N_used) with the cached
 * plans and kept work blocks, so that the many small compositions of the ledger's kept
 * compositions pay no planning: its round-off is pld_convolve_roundoff_n(a, b, *N_used). */
dpb_status pld_convolve_ladder(const double *a, size_t na, const double *b, size_t nb, double *c,
                               size_t *N_used);

#endif
