/*
 * pld_transform.h - internal to core/dp's PLD files: one composition's transforms
 * (pld_transform.c): every term's forward FFT, the product of their powers and one inverse
 * FFT, in double (optionally through a tilt) or in long double, with the round-off bound of
 * docs/MATH.md section 6. pld_transform.c calls pld_fft.c and pld.c.
 */
#ifndef DP_PLD_TRANSFORM_H
#define DP_PLD_TRANSFORM_H

#include "pld_int.h"

/* A transform's round-off: every output point's error is at most ept, the error vector's
 * 2-norm at most e2 (over all N points). */
typedef struct {
    double ept, e2;
} pld_fft_err;

/* The composition of the k terms (every count >= 1, one grid step) in double, circularly:
 * buf (N doubles, the caller's) gets the composed mass at circular position j < N, *fe its
 * round-off. With lm != NULL each term i is tilted first, each mass times e^{theta l - lm[i]}
 * (pld_compose.c's tilted composition). DPB_ECANCELLED when the request's cancellation
 * fires (looked at before each transform), DPB_ENOMEM. */
dpb_status pld_transform_double(const pld_term *terms, size_t k, size_t N, double *buf,
                                double theta, const double *lm, pld_fft_err *fe);

/* The same in long double transforms and powers (no tilt): out (N doubles, the caller's)
 * gets the result rounded to double, *fe a bound about 2000 times smaller (x86-64). */
dpb_status pld_transform_ext(const pld_term *terms, size_t k, size_t N, double *out,
                             pld_fft_err *fe);

/* The round-off bound R_fft over n_out points read: per point, or by Cauchy-Schwarz. */
double pld_window_roundoff(pld_fft_err e, size_t n_out);

/* Where the composed index m sits in the circular result of size N: (m - sum_i count_i lo_i)
 * mod N, in exact integer arithmetic (the sum can pass 2^53). */
int64_t pld_circular_pos(const pld_term *terms, size_t k, int64_t m, size_t N);

#endif
