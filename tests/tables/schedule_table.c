/*
 * schedule_table.c - docs/LEDGER.md's table of rounds per client for a DP-SGD federated schedule,
 * computed by the ledger the daemon runs (core/ledger), so the table can be regenerated:
 *
 *     make schedule-table
 *
 * Each round is 50 steps of Poisson sampling at q = 0.01 with noise multiplier 1.0
 * (SelfComposedDpEvent of 50 PoissonSampledDpEvent of GaussianDpEvent), add/remove relation.
 * For every accounting mode that accounts it (rdp, pld, rdp_filter; gdp_filter accounts
 * unsampled Gaussians only) and eps in {1, 4, 8} at delta = 1e-5, a client is offered rounds
 * (admit_eligible) until it is refused; the table gives the rounds it was charged.
 * Prints a Markdown table; exit status 1 on a ledger failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/ledger/ledger.h"

enum { NEPS = 3, NMODES = 3, MAX_ROUNDS = 5000 };

int main(void)
{
    static const double eps[NEPS] = {1, 4, 8};
    static const ledger_mode modes[NMODES] = {LEDGER_RDP, LEDGER_PLD, LEDGER_RDP_FILTER};
    char dir[] = "/tmp/dpb_schedule_XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    ledger_options o = {dir, NULL, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
    ledger *l = NULL;
    dpb_error err = {0};
    if (ledger_open(&o, &l, &err) != DPB_OK) {
        fprintf(stderr, "schedule_table: %s\n", err.detail);
        return 1;
    }
    char names[NEPS * NMODES][32];
    const char *ids[NEPS * NMODES];
    for (int m = 0; m < NMODES; m++)
        for (int e = 0; e < NEPS; e++) {
            int i = m * NEPS + e;
            snprintf(names[i], sizeof names[i], "%s-%g", ledger_mode_name(modes[m]), eps[e]);
            ids[i] = names[i];
            ledger_client in, out;
            memset(&in, 0, sizeof in);
            snprintf(in.id, sizeof in.id, "%s", ids[i]);
            in.epsilon = eps[e];
            in.delta = 1e-5;
            in.mode = modes[m];
            int created;
            if (ledger_put_client(l, &in, &created, &out, &err) != DPB_OK) {
                fprintf(stderr, "schedule_table: %s\n", err.detail);
                return 1;
            }
        }
    dp_event *g = dp_event_new(DP_EV_GAUSSIAN), *ps = dp_event_new(DP_EV_POISSON_SAMPLED),
             *round = dp_event_new(DP_EV_SELF_COMPOSED);
    if (g == NULL || ps == NULL || round == NULL)
        return 1;
    g->u.noise.noise_multiplier = 1.0;
    ps->u.sampled.sampling_probability = 0.01;
    ps->u.sampled.event = g;
    round->u.self.event = ps;
    round->u.self.count = 50;
    /* offer every round to the clients still admitted (the others are refused for good:
     * the same event never fits again) */
    const char *offer[NEPS * NMODES];
    size_t noffer = NEPS * NMODES;
    memcpy(offer, ids, sizeof offer);
    for (int t = 0; t < MAX_ROUNDS && noffer > 0; t++) {
        ledger_round_req rq;
        memset(&rq, 0, sizeof rq);
        snprintf(rq.round_id, sizeof rq.round_id, "round-%d", t);
        rq.policy = LEDGER_ADMIT_ELIGIBLE;
        rq.event = round;
        rq.participants = offer;
        rq.n = noffer;
        ledger_hash128(rq.round_id, strlen(rq.round_id), rq.body_hash);
        ledger_round_res res;
        if (ledger_round(l, &rq, &res, &err) != DPB_OK) {
            fprintf(stderr, "schedule_table: %s\n", err.detail);
            return 1;
        }
        size_t k = 0;
        for (size_t i = 0; i < res.n; i++)
            if (res.outcomes[i].admitted)
                offer[k++] = offer[i];
        noffer = k;
        ledger_round_res_free(&res);
    }
    printf("| accounting | guarantee | eps = 1 | eps = 4 | eps = 8 |\n|---|---|---|---|---|\n");
    for (int m = 0; m < NMODES; m++) {
        printf("| `%s` | %s |", ledger_mode_name(modes[m]),
               ledger_guarantee_name(ledger_guarantee_of(modes[m], 0, 1, 0)));
        for (int e = 0; e < NEPS; e++) {
            ledger_client c;
            if (ledger_get_client(l, ids[m * NEPS + e], &c) != DPB_OK)
                return 1;
            printf(" %llu (%.3f) |", (unsigned long long)c.rounds, c.spent);
        }
        printf("\n");
    }
    dp_event_free(round);
    ledger_close_nosnapshot(l);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
