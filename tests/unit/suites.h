/* suites.h - the unit test suites, one per core module. */
#ifndef DPB_UNIT_SUITES_H
#define DPB_UNIT_SUITES_H

#include <stddef.h>

#include "../testlib.h"

extern const tl_test NORMAL_TESTS[];
extern const size_t NORMAL_NTESTS;
extern const tl_test SHUFFLE_TESTS[];
extern const size_t SHUFFLE_NTESTS;
extern const tl_test ACCOUNT_TESTS[];
extern const size_t ACCOUNT_NTESTS;
extern const tl_test ACCOUNTANT_TESTS[];
extern const size_t ACCOUNTANT_NTESTS;
extern const tl_test PNSGD_TESTS[];
extern const size_t PNSGD_NTESTS;
extern const tl_test LEDGER_TESTS[];
extern const size_t LEDGER_NTESTS;
extern const tl_test WAL_TESTS[];
extern const size_t WAL_NTESTS;
extern const tl_test SHUFFLE_EXACT_TESTS[];
extern const size_t SHUFFLE_EXACT_NTESTS;
extern const tl_test REF_ACCOUNTANT_TESTS[];
extern const size_t REF_ACCOUNTANT_NTESTS;
extern const tl_test CANCEL_TESTS[];
extern const size_t CANCEL_NTESTS;
extern const tl_test AFFORD_TESTS[]; /* test_afford.c: affordability off the ledger's lock */
extern const size_t AFFORD_NTESTS;
extern const tl_test SPEND_TESTS[];
extern const size_t SPEND_NTESTS;
extern const tl_test SAMPLING_TESTS[];
extern const size_t SAMPLING_NTESTS;
extern const tl_test MECH_TESTS[];
extern const size_t MECH_NTESTS;
extern const tl_test SHARED_TESTS[];
extern const size_t SHARED_NTESTS;
extern const tl_test RESERVE_TESTS[];
extern const size_t RESERVE_NTESTS;
extern const tl_test VOCAB_TESTS[]; /* test_vocab.c: the ledger's event vocabulary */
extern const size_t VOCAB_NTESTS;
extern const tl_test PROACTIVE_TESTS[];
extern const size_t PROACTIVE_NTESTS;
extern const tl_test RDPGAP_TESTS[];
extern const size_t RDPGAP_NTESTS;
extern const tl_test TIME_TESTS[]; /* test_time.c: time in the ledger, the series */
extern const size_t TIME_NTESTS;

#endif
