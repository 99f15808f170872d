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
        /* libpq reads the userinfo up to the first '@' or '/': '?' and '#' are the password's
         * (issue 34: "Pw?xLeakQ" was printed); an unencoded '/' or '@' splits it, and what
         * libpq makes of the rest is hidden too (up to the last '@') */
        {"postgresql://u:Pw?xLeakQ@h/d", "postgresql://u:***@h/d"},
        {"postgresql://u:p#ssLeak@h:5432/d", "postgresql://u:***@h:5432/d"},
        {"postgresql://u:pa/ssLeak@h/d", "postgresql://u:***@h/d"},
        {"postgresql://u:p@ssLeak@h/d?sslmode=require", "postgresql://u:***@h/d?sslmode=require"},
        /* the parameter in any spelling libpq decodes, any case, and sslpassword */
        {"postgresql://h/d?%70assword=Leak1", "postgresql://h/d?%70assword=***"},
        {"postgresql://h/d?a=1&pass%77ord=Leak2&b=2", "postgresql://h/d?a=1&pass%77ord=***&b=2"},
        {"postgresql://h/d?PASSWORD=Leak3", "postgresql://h/d?PASSWORD=***"},
        {"postgresql://h/d?sslpassword=Leak4", "postgresql://h/d?sslpassword=***"},
        {"/var/lib/dpbudget", "/var/lib/dpbudget"},
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

/* key/value conninfo strings: parsed by libpq (PQconninfoParse) and written back. */
static void admin_redacts_key_value_pairs(void)
{
    static const struct {
        const char *conninfo, *must, *secret;
    } cases[] = {
        {"host=h password=LeakA dbname=d", "password=***", "LeakA"},
        {"host=h password = 'Le ak B' dbname=d", "password=***", "ak B"},
        {"host=h sslpassword=LeakC", "sslpassword=***", "LeakC"},
        {"host=h dbname=postgresql://u:LeakD@h/d", "postgresql://u:***@h/d", "LeakD"},
        {"host=h dbname='password=LeakE'", "password=***", "LeakE"},
        /* libpq cannot parse it: not shown at all */
        {"host=h password=LeakF 'unterminated", "not shown", "LeakF"},
        {"host=h pass%77ord=LeakG", "not shown", "LeakG"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256];
        admin_redact_url(cases[i].conninfo, out, sizeof out);
        CHECKF(strstr(out, cases[i].must) != NULL && strstr(out, cases[i].secret) == NULL,
               "%s shown as %s", cases[i].conninfo, out);
    }
    char out[256];
    admin_redact_url("host=db port=5433 user=dpb password=x dbname=ledger", out, sizeof out);
    CHECKF(strstr(out, "host=db") && strstr(out, "port=5433") && strstr(out, "dbname=ledger"),
           "the rest is shown: %s", out);
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
    /* what libpq makes of a password an unencoded '/' splits: a port and a database name,
     * quoted in its errors */
    char split[256] = "invalid integer value \"pa\" for connection option \"port\"; database "
                      "\"ssLeak@h/d\" does not exist";
    admin_scrub(split, "postgresql://u:pa/ssLeak@h/d");
    CHECKF(strstr(split, "\"pa\"") == NULL && strstr(split, "ssLeak") == NULL, "%s", split);
    char kv[256] = "missing \"=\" after \"tail\" in connection info string; pw head tail";
    admin_scrub(kv, "host=h password=head tail dbname=d");
    CHECKF(strstr(kv, "head") == NULL && strstr(kv, "tail") == NULL, "%s", kv);
    char enc[128] = "percent-encoded token: \"%7x\" near sec/ret";
    admin_scrub(enc, "postgresql://h/d?%70assword=sec%2Fret");
    CHECKF(strstr(enc, "sec/ret") == NULL, "%s", enc);
}

const tl_test ADMIN_TESTS[] = {
    TL_T(admin_redacts_url_passwords),
    TL_T(admin_redacts_key_value_pairs),
    TL_T(admin_scrubs_messages),
};
const size_t ADMIN_NTESTS = sizeof ADMIN_TESTS / sizeof ADMIN_TESTS[0];
