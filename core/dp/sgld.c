/* sgld.c - the clipped-SGLD mapping and the Gaussian Renyi divergence (seed 003). */
#include "sgld.h"

#include <math.h>

dpb_status sgld_noise_multiplier(const sgld_params *p, double *sigma)
{
    if (!p->clipped || !(p->clipping_norm > 0.0) || !(p->step_size > 0.0) ||
        !(p->batch_size >= 1.0) || !(p->dataset_size >= p->batch_size) ||
        !isfinite(p->clipping_norm + p->step_size + p->dataset_size))
        return DPB_EINVAL;
    double s = 2.0 * p->batch_size / (p->dataset_size * p->clipping_norm * sqrt(p->step_size));
    /* the DP-SGD it maps to takes the Gaussian's range of noise multipliers, (0, 1e6]: an
     * overflow (a tiny clipping norm or step size) or a larger multiplier is refused, as the
     * same noise multiplier given directly would be */
    if (!(s > 0.0 && s <= 1e6))
        return DPB_EINVAL;
    *sigma = s;
    return DPB_OK;
}

double sgld_gauss_renyi(double nu, double m1, double s1, double m2, double s2)
{
    if (!(nu > 1.0) || !(s1 > 0.0) || !(s2 > 0.0))
        return NAN;
    double S = nu * s2 * s2 + (1.0 - nu) * s1 * s1;
    if (!(S > 0.0))
        return HUGE_VAL;
    double dm = m1 - m2;
    return log(s2 / s1) + log(s2 * s2 / S) / (2.0 * (nu - 1.0)) + nu * dm * dm / (2.0 * S);
}
