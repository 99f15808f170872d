/*
 * test_admin.c - the ledger url is shown without its password (server/admin.h): every form
 * libpq takes (user:password@, a password= parameter, percent-encoding), and a message that
 * echoes the password is scrubbed. No daemon needed.
 */
#include <string.h>

#include "../../server/admin.h"
#include "suites.h"

static void admin_redacts_url_passwords(void)
{
    static const struct {
        const char *url, *shown;
    } cases[] = {
        {"postgresql://dpb:s3cret@db:5432/ledger", "postgresql://dpb:***@db:5432/ledger"},
        {"postgres://dpb@db/ledger", "postgres://dpb@db/ledger"},
        {"postgresql://db/ledger", "postgresql://db/ledger"},
        {"postgresql://dpb:p%40ss@db/l?sslmode=require",
         "postgresql://dpb:***@db/l?sslmode=require"},
        {"postgresql://dpb@db/l?sslmode=require&password=abc&connect_timeout=3",
         "postgresql://dpb@db/l?sslmode=require&password=***&connect_timeout=3"},
        {"postgresql://u:x@h/d?password=y", "postgresql://u:***@h/d?password=***"},
        {"postgresql://u:@h/d", "postgresql://u:@h/d"}, /* an empty password: nothing to hide */
        {"not a url", "not a url"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256];
        admin_redact_url(cases[i].url, out, sizeof out);
        CHECKF(strcmp(out, cases[i].shown) == 0, "%s shown as %s, want %s", cases[i].url, out,
               cases[i].shown);
    }
    char small[12];
    admin_redact_url("postgresql://dpb:s3cret@db/ledger", small, sizeof small);
    CHECKF(strstr(small, "s3c") == NULL && strlen(small) < sizeof small, "cut short: %s", small);
}

static void admin_scrubs_messages(void)
{
    char msg[256] = "connection to postgresql://dpb:s3cret@db failed; password s3cret, p@ss";
    admin_scrub(msg, "postgresql://dpb:s3cret@db/ledger?password=p%40ss");
    CHECKF(strstr(msg, "s3cret") == NULL && strstr(msg, "p@ss") == NULL, "%s", msg);
    CHECKF(strstr(msg, "***") != NULL, "%s", msg);
    char none[64] = "nothing secret here";
    admin_scrub(none, "postgresql://dpb@db/ledger");
    CHECK(strcmp(none, "nothing secret here") == 0);
}

const tl_test ADMIN_TESTS[] = {
    TL_T(admin_redacts_url_passwords),
    TL_T(admin_scrubs_messages),
};
const size_t ADMIN_NTESTS = sizeof ADMIN_TESTS / sizeof ADMIN_TESTS[0];
