/* main.c - runs every unit suite and prints the closing "unit: N passed, M failed". */
#define TESTLIB_MAIN
#include "suites.h"

#include <gsl/gsl_errno.h>

int main(int argc, char **argv)
{
    static tl_test all[1024];
    size_t n = 0;
    const struct {
        const tl_test *t;
        size_t n;
    } suites[] = {
        {NORMAL_TESTS, NORMAL_NTESTS},
        {SHUFFLE_TESTS, SHUFFLE_NTESTS},
        {ACCOUNT_TESTS, ACCOUNT_NTESTS},
        {ACCOUNTANT_TESTS, ACCOUNTANT_NTESTS},
        {PNSGD_TESTS, PNSGD_NTESTS},
        {SHUFFLE_EXACT_TESTS, SHUFFLE_EXACT_NTESTS},
        {REF_ACCOUNTANT_TESTS, REF_ACCOUNTANT_NTESTS},
        {PROACTIVE_TESTS, PROACTIVE_NTESTS},
        {SAMPLING_TESTS, SAMPLING_NTESTS},
        {CANCEL_TESTS, CANCEL_NTESTS},
        {WAL_TESTS, WAL_NTESTS},
        {LEDGER_TESTS, LEDGER_NTESTS},
        {VOCAB_TESTS, VOCAB_NTESTS},
        {SHARED_TESTS, SHARED_NTESTS},
        {RESERVE_TESTS, RESERVE_NTESTS},
        {SPEND_TESTS, SPEND_NTESTS},
        {AFFORD_TESTS, AFFORD_NTESTS},
        {MECH_TESTS, MECH_NTESTS},
        {RDPGAP_TESTS, RDPGAP_NTESTS},
        {TIME_TESTS, TIME_NTESTS},
    };
    gsl_set_error_handler_off();
    for (size_t s = 0; s < sizeof suites / sizeof suites[0]; s++)
        for (size_t i = 0; i < suites[s].n && n < sizeof all / sizeof all[0]; i++)
            all[n++] = suites[s].t[i];
    return tl_run("unit", all, n, argc, argv);
}
