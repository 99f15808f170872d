/* test_ops.c - GET /v1/accountants, /healthz (GET and HEAD), /openapi.yaml and /. */
#include <string.h>

#include "check.h"
#include "suites.h"

/* 1 if the array at path of o holds an object whose member key is the string want. */
static int lists(const json_t *o, const char *path, const char *key, const char *want)
{
    size_t i;
    json_t *e;
    json_array_foreach(jget(o, path), i, e)
    {
        const char *s = json_string_value(json_object_get(e, key));
        if (s && strcmp(s, want) == 0)
            return 1;
    }
    return 0;
}

static void accountants_lists_both(void)
{
    api_reply r;
    api_get("/v1/accountants", &r);
    CHECK(r.status == 200);
    CHECK(strncmp(r.content_type, "application/json", 16) == 0);
    CHECK(json_is_object(r.json));
    CHECK(lists(r.json, "accountants", "name", "thm41"));
    CHECK(lists(r.json, "accountants", "name", "gdp_clt"));
    CHECK(lists(r.json, "events", "class_name", "ShuffledDpSgdEpochDpEvent"));
    CHECK(lists(r.json, "events", "class_name", "SelfComposedDpEvent"));
    CHECK(lists(r.json, "events", "class_name", "ComposedDpEvent"));
    CHECK(json_is_array(jget(r.json, "neighboring_relations")));
    CHECK(json_is_array(jget(r.json, "solve_for")));
    CHECK(all_finite(r.json));
    api_reply_free(&r);
}

static void healthz_ok(void)
{
    api_reply r;
    api_get("/healthz", &r);
    CHECK(r.status == 200);
    CHECK(strncmp(r.content_type, "application/json", 16) == 0);
    CHECK(jstr(r.json, "status") && strcmp(jstr(r.json, "status"), "ok") == 0);
    api_reply_free(&r);
}

static void healthz_head(void)
{
    api_reply r;
    CHECK(api_call("HEAD", "/healthz", NULL, NULL, 0, &r) == 0);
    CHECK(r.status == 200);
    CHECK(strncmp(r.content_type, "application/json", 16) == 0);
    CHECK(r.body_len == 0);
    api_reply_free(&r);
}

static void openapi_served(void)
{
    api_reply r;
    api_get("/openapi.yaml", &r);
    CHECK(r.status == 200);
    CHECKF(strncmp(r.content_type, "application/yaml", 16) == 0, "Content-Type '%s'",
           r.content_type);
    CHECKF(r.body_len >= 8 && strncmp(r.body, "openapi:", 8) == 0,
           "the body (%zu bytes) does not start with 'openapi:'", r.body_len);
    api_reply_free(&r);
}

static void index_page(void)
{
    api_reply r;
    api_get("/", &r);
    CHECK(r.status == 200);
    CHECKF(strncmp(r.content_type, "text/html", 9) == 0, "Content-Type '%s'", r.content_type);
    CHECK(r.body_len > 0 && strstr(r.body, "<html") != NULL);
    CHECK(r.json == NULL);
    api_reply_free(&r);
}

const tl_test OPS_TESTS[] = {
    TL_T(accountants_lists_both), TL_T(healthz_ok), TL_T(healthz_head),
    TL_T(openapi_served),         TL_T(index_page),
};
const size_t OPS_NTESTS = sizeof OPS_TESTS / sizeof OPS_TESTS[0];
