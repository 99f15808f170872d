/* event.c - mechanism description trees. */
#include "event.h"

#include <stdlib.h>

dp_event *dp_event_new(dp_event_kind kind)
{
    dp_event *ev = calloc(1, sizeof *ev);
    if (ev)
        ev->kind = kind;
    return ev;
}

void dp_event_free(dp_event *ev)
{
    if (ev == NULL)
        return;
    switch (ev->kind) {
    case DP_EV_SELF_COMPOSED:
        dp_event_free(ev->u.self.event);
        break;
    case DP_EV_COMPOSED:
        for (size_t i = 0; i < ev->u.composed.n; i++)
            dp_event_free(ev->u.composed.events[i]);
        free(ev->u.composed.events);
        break;
    case DP_EV_POISSON_SAMPLED:
        dp_event_free(ev->u.sampled.event);
        break;
    case DP_EV_SHUFFLED_EPOCH:
    case DP_EV_GAUSSIAN:
    case DP_EV_LAPLACE:
    case DP_EV_EPSILON_DELTA:
    case DP_EV_NO_OP:
    case DP_EV_PROACTIVE:
        free(ev->u.proactive.sigma);
        free(ev->u.proactive.batch);
        free(ev->u.proactive.rounds);
        break;
    case DP_EV_NON_PRIVATE:
    case DP_EV_PNSGD:
    case DP_EV_SGLD:
        break;
    }
    free(ev);
}

const char *dp_param_name(dp_param p)
{
    switch (p) {
    case DP_PARAM_NOISE_MULTIPLIER:
        return "noise_multiplier";
    case DP_PARAM_ROUNDS:
        return "rounds";
    case DP_PARAM_COUNT:
        return "count";
    case DP_PARAM_SAMPLING_PROBABILITY:
        return "sampling_probability";
    case DP_PARAM_NOISE_SCALE:
        return "noise_scale";
    case DP_PARAM_DATASET_SIZE:
        return "dataset_size";
    case DP_PARAM_C1:
        return "c1";
    case DP_PARAM_NONE:
        break;
    }
    return "none";
}

static void find_unknown(dp_event *ev, dp_event **first, int *n)
{
    if (ev == NULL)
        return;
    if (ev->unknown != DP_PARAM_NONE) {
        if (*first == NULL)
            *first = ev;
        (*n)++;
    }
    if (ev->kind == DP_EV_SELF_COMPOSED)
        find_unknown(ev->u.self.event, first, n);
    else if (ev->kind == DP_EV_POISSON_SAMPLED)
        find_unknown(ev->u.sampled.event, first, n);
    else if (ev->kind == DP_EV_COMPOSED)
        for (size_t i = 0; i < ev->u.composed.n; i++)
            find_unknown(ev->u.composed.events[i], first, n);
}

dp_event *dp_event_find_unknown(dp_event *ev, int *nunknown)
{
    dp_event *first = NULL;
    int n = 0;
    find_unknown(ev, &first, &n);
    if (nunknown)
        *nunknown = n;
    return first;
}
