/* test_owner.c - who may commit or release a reservation, over HTTP (own daemon, with API
 * keys): the key that reserved it or an admin key; another charge key gets 403
 * not_reservation_owner and changes nothing, a read key 403 forbidden; the round names its
 * holder in "reserved_by" (a key's name, or for an unnamed key a fingerprint of its hash, never
 * the token); --max-reserved-per-key refuses a reservation that would take a key past it
 * with 409 reservation_quota_exceeded, per key, and a commit frees what it held. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "suites.h"

/* sha256sum of the tokens (printf %s TOKEN | sha256sum); the unnamed key's fingerprint is
 * the first 8 bytes of the SHA-256 of its hash's 32 bytes (python3 hashlib) */
#define COORD "owner-coord-1"
#define OTHER "owner-other-2"
#define ANON "owner-anon-3"
#define ADMIN "owner-admin-4"
#define READER "owner-read-5"
#define ANON_ID "#2503f81ff7c0db3d"
static const char OWNER_KEYS[] =
    "4a6a4368bd78c4e430dc598da7b75b9314678f04b616915a8fb5703587a2c878 charge coordinator\n"
    "5b5a4d105390ef1472b668735128fca9a2a04e9b572364192121edca4db86c37 charge other\n"
    "767d37bd2c40132dc14f87d53f275561fc57517449e91ee2277495e2c6dab2ed charge\n"
    "761fec619b69bbc1f73938f5df8025d87ac823a6e602a002116dffc7c2c45209 admin ops\n"
    "7b643d61dee45b5bccea2895a4f7e7c9fa506bb3948ca0e1b35afee62c56f854 read auditor\n";

#define G5 "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":5}"

/* One request as the key of token (NULL: none): its reply. */
static void as_key(api_reply *r, const char *token, const char *method, const char *path,
                   const char *body)
{
    char h[128];
    snprintf(h, sizeof h, "Authorization: Bearer %s", token);
    api_set_header(token ? h : NULL);
    api_call(method, path, body ? "application/json" : NULL, body, body ? strlen(body) : 0, r);
    api_set_header(NULL);
}

/* Reserve rid over the clients (a JSON list) as token: the HTTP status, *by the holder. */
static long reserve_as(const char *token, const char *rid, const char *clients, char *by,
                       size_t cap)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"round_id\":\"%s\",\"event\":" G5 ",\"participants\":%s,\"phase\":\"reserve\","
             "\"reservation_ttl_seconds\":600}",
             rid, clients);
    api_reply r;
    as_key(&r, token, "POST", "/v1/rounds", body);
    long st = r.status;
    const char *b = r.json ? jstr(r.json, "reserved_by") : NULL;
    if (by)
        snprintf(by, cap, "%s", b ? b : "");
    if (st != 200 && st != 409)
        fprintf(stderr, "reserve %s: %ld %.300s\n", rid, st, r.body);
    api_reply_free(&r);
    return st;
}

/* POST /v1/rounds/rid/what (commit: reported list; release: {}) as token: 1 if answered
 * status with code (NULL: 200). */
static int resolve_is(const char *token, const char *rid, const char *what, int status,
                      const char *code)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/rounds/%s/%s", rid, what);
    api_reply r;
    as_key(&r, token, "POST", path,
           strcmp(what, "commit") == 0 ? "{\"reported\":[\"o-c1\"]}" : "{}");
    int ok = code ? is_problem(&r, status, code, NULL) : r.status == status;
    if (!ok)
        fprintf(stderr, "%s %s as %s: %ld %.300s\n", what, rid, token, r.status, r.body);
    api_reply_free(&r);
    return ok;
}

static int state_is(const char *rid, const char *want)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/rounds/%s", rid);
    api_reply r;
    as_key(&r, READER, "GET", path, NULL);
    int ok = r.status == 200 && api_str_is(r.json, "state", want);
    api_reply_free(&r);
    return ok;
}

static void owner_matrix_over_http(void)
{
    char dir[] = "/tmp/dpb-owner-XXXXXX", keys[128];
    if (mkdtemp(dir) == NULL)
        return;
    snprintf(keys, sizeof keys, "%s/keys", dir);
    FILE *f = fopen(keys, "w");
    if (f) {
        fputs(OWNER_KEYS, f);
        fclose(f);
    }
    const char *extra[] = {
        "--api-keys", keys, "--default-budget", "10,1e-5", "--max-reserved-per-key", "3", NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "dpbudgetd did not start (%d)", st);
    if (st == 0) {
        char by[80];
        CHECK(reserve_as(COORD, "o1", "[\"o-c1\",\"o-c2\"]", by, sizeof by) == 200 &&
              strcmp(by, "coordinator") == 0);
        /* another charge key, a read key: refused, nothing changed */
        CHECK(resolve_is(OTHER, "o1", "commit", 403, "not_reservation_owner"));
        CHECK(resolve_is(OTHER, "o1", "release", 403, "not_reservation_owner"));
        CHECK(resolve_is(ANON, "o1", "commit", 403, "not_reservation_owner"));
        CHECK(resolve_is(READER, "o1", "commit", 403, "forbidden"));
        CHECK(state_is("o1", "reserved"));
        /* the owner commits; another key cannot even replay it, an admin can */
        CHECK(resolve_is(COORD, "o1", "commit", 200, NULL));
        CHECK(resolve_is(OTHER, "o1", "commit", 403, "not_reservation_owner"));
        CHECK(resolve_is(ADMIN, "o1", "commit", 200, NULL));
        CHECK(state_is("o1", "committed"));
        /* an admin releases another key's reservation */
        CHECK(reserve_as(COORD, "o2", "[\"o-c1\"]", NULL, 0) == 200);
        CHECK(resolve_is(ADMIN, "o2", "release", 200, NULL));
        CHECK(state_is("o2", "released"));
        /* an unnamed key is known by its fingerprint */
        CHECK(reserve_as(ANON, "o3", "[\"o-c1\"]", by, sizeof by) == 200 &&
              strcmp(by, ANON_ID) == 0);
        CHECK(resolve_is(COORD, "o3", "release", 403, "not_reservation_owner"));
        CHECK(resolve_is(ANON, "o3", "release", 200, NULL));
        /* the cap: 3 client-reservations per key */
        CHECK(reserve_as(COORD, "o4", "[\"o-c1\",\"o-c2\"]", NULL, 0) == 200);
        api_reply r;
        as_key(&r, COORD, "POST", "/v1/rounds",
               "{\"round_id\":\"o5\",\"event\":" G5 ",\"participants\":[\"o-c3\",\"o-c4\"],"
               "\"phase\":\"reserve\"}");
        CHECKF(is_problem(&r, 409, "reservation_quota_exceeded", "participants"), "%ld %.300s",
               r.status, r.body);
        api_reply_free(&r);
        CHECK(reserve_as(OTHER, "o5", "[\"o-c3\",\"o-c4\"]", NULL, 0) == 200); /* per key */
        CHECK(resolve_is(COORD, "o4", "commit", 200, NULL)); /* frees what it held */
        CHECK(reserve_as(COORD, "o6", "[\"o-c3\",\"o-c4\"]", NULL, 0) == 200);
        st = api_daemon_stop();
        CHECKF(st == 0, "dpbudgetd did not exit 0 on SIGTERM (wait status %d)", st);
    }
    unlink(keys);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

const tl_test OWNER_TESTS[] = {
    TL_T(owner_matrix_over_http),
};
const size_t OWNER_NTESTS = sizeof OWNER_TESTS / sizeof OWNER_TESTS[0];
