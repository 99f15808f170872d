/*
 * sweep_shuffle_exact.c - slow numerical sweep of the exact shuffled accountant (make
 * test-slow; not part of make test). Over a grid of sigma and M it checks:
 *   - every Theorem 4.1 value (where the theorem applies) bounds the exact total variation;
 *   - delta is non-increasing in M and in sigma at eps in {0, 0.1, 0.5, 1}, wherever it
 *     stands above the numerical floors (1e-8: the round-off and truncation allowances
 *     differ between models and are not monotone themselves);
 *   - halving the grid never raises delta where the discretisation dominates (delta above
 *     1e-6 and sigma >= 0.75: below sigma 0.75 the truncation point depends on the grid);
 *   - for M <= 100, a seeded Monte Carlo of delta_10 and delta_01 agrees within 4.5
 *     standard errors wherever at least 100 samples are nonzero.
 * Prints one line per failure and the closing "slow: N passed, M failed".
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "../../core/dp/shuffle.h"
#include "../../core/dp/shuffle_exact.h"

static int pass, fail;

static void check(int ok, const char *what, double sigma, uint64_t M, double eps, double a,
                  double b)
{
    if (ok) {
        pass++;
        return;
    }
    fail++;
    printf("FAIL %s: sigma %g M %llu eps %g: %.9g vs %.9g\n", what, sigma, (unsigned long long)M,
           eps, a, b);
}

static uint64_t st[2] = {0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL};
static double unif(void)
{
    uint64_t s1 = st[0], s0 = st[1];
    st[0] = s0;
    s1 ^= s1 << 23;
    st[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
    return ((double)((st[1] + s0) >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2.0 * log(unif())) * cos(2.0 * M_PI * unif());
}

int main(void)
{
    static const double sig[] = {0.5, 0.75, 1.0, 1.5, 2.0, 4.0};
    static const uint64_t Ms[] = {2, 10, 100, 1000, 10000, 100000};
    static const double eps[] = {0.0, 0.1, 0.5, 1.0};
    enum { NS = 6, NM = 6, NE = 4 };
    double d[NS][NM][NE];
    for (int a = 0; a < NS; a++)
        for (int b = 0; b < NM; b++) {
            shx_model *m, *c;
            if (shx_acquire(sig[a], Ms[b], 0.0, &m) != DPB_OK ||
                shx_acquire(sig[a], Ms[b], 2.0, &c) != DPB_OK) {
                check(0, "acquire", sig[a], Ms[b], 0, 0, 0);
                continue;
            }
            for (int k = 0; k < NE; k++) {
                d[a][b][k] = shx_delta(m, eps[k]);
                double coarse = shx_delta(c, eps[k]);
                if (sig[a] >= 0.75 && d[a][b][k] > 1e-6)
                    check(coarse >= d[a][b][k] * (1.0 - 1e-9), "refinement", sig[a], Ms[b], eps[k],
                          coarse, d[a][b][k]);
            }
            dp_thm41 e;
            if (dp_thm41_eval(sig[a], Ms[b], &e) == DPB_OK)
                check(d[a][b][0] <= e.delta, "theorem 4.1 bound", sig[a], Ms[b], 0, d[a][b][0],
                      e.delta);
            if (Ms[b] <= 100) {
                const int S = 400000;
                double s = 1.0 / sig[a], t = s * s;
                for (int k = 0; k < NE; k++) {
                    double s10 = 0, q10 = 0, s01 = 0, q01 = 0, ee = exp(eps[k]);
                    int n10 = 0, n01 = 0;
                    for (int r = 0; r < S; r++) {
                        double L = 0;
                        for (uint64_t j = 0; j < Ms[b]; j++)
                            L += exp(s * gauss() - t / 2.0);
                        L /= (double)Ms[b];
                        double v10 = L > ee ? L - ee : 0, v01 = 1 - ee * L > 0 ? 1 - ee * L : 0;
                        n10 += v10 > 0;
                        n01 += v01 > 0;
                        s10 += v10;
                        q10 += v10 * v10;
                        s01 += v01;
                        q01 += v01 * v01;
                    }
                    double m10 = s10 / S, m01 = s01 / S;
                    double e10 = sqrt((q10 / S - m10 * m10) / S),
                           e01 = sqrt((q01 / S - m01 * m01) / S);
                    double x10 = shx_delta10(m, eps[k]), x01 = shx_delta01(m, eps[k]);
                    if (n10 >= 100)
                        check(fabs(x10 - m10) <= 4.5 * e10 + 1e-4 * x10, "monte carlo delta_10",
                              sig[a], Ms[b], eps[k], x10, m10);
                    if (n01 >= 100)
                        check(fabs(x01 - m01) <= 4.5 * e01 + 1e-4 * x01, "monte carlo delta_01",
                              sig[a], Ms[b], eps[k], x01, m01);
                }
            }
            shx_release(m);
            shx_release(c);
            shx_cache_clear();
        }
    for (int a = 0; a < NS; a++)
        for (int b = 0; b < NM; b++)
            for (int k = 0; k < NE; k++) {
                if (b > 0 && d[a][b][k] > 1e-8)
                    check(d[a][b][k] <= d[a][b - 1][k] * (1 + 1e-9) + 1e-15, "monotone in M",
                          sig[a], Ms[b], eps[k], d[a][b][k], d[a][b - 1][k]);
                if (a > 0 && d[a][b][k] > 1e-8)
                    check(d[a][b][k] <= d[a - 1][b][k] * (1 + 1e-9) + 1e-15, "monotone in sigma",
                          sig[a], Ms[b], eps[k], d[a][b][k], d[a - 1][b][k]);
            }
    printf("slow: %d passed, %d failed\n", pass, fail);
    return fail != 0;
}
