/* routes.c - the one routing table. Mirrored by openapi.yaml's paths. */
#include "resources.h"

const route ROUTES[] = {
    {"POST", "/v1/delta", res_delta, 1},
    {"POST", "/v1/epsilon", res_epsilon, 1},
    {"POST", "/v1/calibrate", res_calibrate, 1},
    {"POST", "/v1/curve", res_curve, 1},
    {"POST", "/v1/proactive", res_proactive, 1},
    {"GET", "/v1/accountants", res_accountants, 0},
    {"GET", "/healthz", res_healthz, 0},
    {"GET", "/openapi.yaml", res_openapi, 0},
    {"GET", "/", res_index, 0},
    {NULL, NULL, NULL, 0},
};
