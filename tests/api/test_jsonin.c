/* test_jsonin.c - the request reader (server/jsonin.h) against jansson's json_loadb: the same
 * tree (types, order, doubles bit for bit) or the same error, for plain bodies, for every
 * kind of body the fast path hands over, and for 100,000 mutated bodies; and
 * the fast path taken where it should be. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/jsonin.h"
#include "check.h"
#include "suites.h"

static uint64_t rng = 0x2545F4914F6CDD1DULL;

static uint64_t next64(void)
{
    return tl_splitmix(&rng); /* fixed seed: a failure is reproducible */
}

/* The same tree: the same types (an integer is not a real), members in the same order, the
 * same strings and integers, reals with the same bits (-0.0 is not 0.0). */
static int same_tree(const json_t *a, const json_t *b)
{
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return 0;
        void *ia = json_object_iter((json_t *)a), *ib = json_object_iter((json_t *)b);
        for (; ia && ib; ia = json_object_iter_next((json_t *)a, ia),
                         ib = json_object_iter_next((json_t *)b, ib))
            if (json_object_iter_key_len(ia) != json_object_iter_key_len(ib) ||
                memcmp(json_object_iter_key(ia), json_object_iter_key(ib),
                       json_object_iter_key_len(ia)) != 0 ||
                !same_tree(json_object_iter_value(ia), json_object_iter_value(ib)))
                return 0;
        return ia == NULL && ib == NULL;
    }
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_tree(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_INTEGER:
        return json_integer_value(a) == json_integer_value(b);
    case JSON_REAL: {
        double x = json_real_value(a), y = json_real_value(b);
        return memcmp(&x, &y, sizeof x) == 0;
    }
    default:
        return 1;
    }
}

/* jsonin_load(text) is json_loadb(text, JSON_REJECT_DUPLICATES): the same tree or the same
 * error (code, text, position). Counts the bodies the fast path took in *plain. */
static int agrees(const char *text, size_t len, int *plain)
{
    json_error_t e1, e2;
    json_t *fast = jsonin_plain(text, len);
    json_t *mine = jsonin_load(text, len, &e1);
    json_t *theirs = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e2);
    int ok;
    if (mine == NULL || theirs == NULL)
        ok = mine == NULL && theirs == NULL && fast == NULL && strcmp(e1.text, e2.text) == 0 &&
             e1.position == e2.position && json_error_code(&e1) == json_error_code(&e2);
    else
        ok = same_tree(mine, theirs) && (fast == NULL || same_tree(fast, theirs));
    *plain += fast != NULL;
    json_decref(fast);
    json_decref(mine);
    json_decref(theirs);
    return ok;
}

/* The bodies requests are made of go the fast way, and give jansson's tree. */
static void jsonin_plain_bodies(void)
{
    static const char *const bodies[] = {
        "{\"accountant\":\"thm41\",\"event\":" EPOCH_1 ",\"epsilon\":1.0}",
        "{\"accountant\":\"thm41\",\"event\":{\"class_name\":\"ShuffledDpSgdEpochDpEvent\","
        "\"noise_multiplier\":1.0},\"solve_for\":\"rounds\",\"target\":{\"epsilon\":0,"
        "\"delta\":0.01}}",
        " {\n\t\"round_id\" : \"r-1\", \"participants\": [\"a\", \"b\", \"c\"],\r\n \"event\": "
        "{\"class_name\": \"PoissonSampledDpEvent\", \"sampling_probability\": 1e-3, "
        "\"event\": {\"class_name\": \"GaussianDpEvent\", \"noise_multiplier\": 1.1E0}}} \n",
        "{\"epsilons\":[0,0.5,1,-0.0,1e-300,2.5E+3,1.7976931348623157e308,123456789012345678],"
        "\"flags\":[true,false,null],\"empty\":{},\"none\":[],\"\":\"\",\"nest\":[[[[{}]]]],"
        "\"ascii\":\" !#$%&'()*+,-./:;<=>?@[]^_`{|}~\x7f\"}",
        "{}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        int plain = 0;
        CHECKF(agrees(bodies[i], strlen(bodies[i]), &plain), "body %zu: %s", i, bodies[i]);
        CHECKF(plain == 1, "body %zu not read by the fast path: %s", i, bodies[i]);
    }
    /* integers stay integers and reals reals, as jansson types them */
    static const char typed[] = "{\"a\":1,\"b\":1.0,\"c\":-0,\"d\":1e2}";
    json_t *j = jsonin_plain(typed, sizeof typed - 1);
    CHECK(j && json_is_integer(json_object_get(j, "a")) && json_is_real(json_object_get(j, "b")) &&
          json_is_integer(json_object_get(j, "c")) && json_is_real(json_object_get(j, "d")));
    json_decref(j);
}

/* Every kind of body the fast path hands to jansson, and bodies next to them that it keeps:
 * the same answer either way. */
static void jsonin_handovers_agree(void)
{
    static const char *const bodies[] = {
        /* not plain: escapes, non-ASCII, control bytes, long integers, huge or tiny reals,
         * duplicates, depth */
        "{\"a\":\"x\\ny\"}",
        "{\"a\\u0041\":1}",
        "{\"a\":\"\\u0000\"}",
        "{\"a\":\"\xc3\xa9\"}",
        "{\"a\":\"\xff\"}",
        "{\"a\":\"\xc3\"}",
        "{\"a\":\"tab\there\"}",
        "{\"a\":\"\x01\"}",
        "{\"a\":1234567890123456789}",
        "{\"a\":-9223372036854775808}",
        "{\"a\":9223372036854775808}",
        "{\"a\":123456789012345678}",
        "{\"a\":1e400}",
        "{\"a\":-1e400}",
        "{\"a\":1e-400}",
        "{\"a\":4.9e-324}",
        "{\"a\":2.2250738585072014e-308}",
        "{\"a\":1,\"a\":2}",
        "{\"a\":{\"b\":1,\"b\":1}}",
        "{\"a\":1,\"b\":{},\"a\":[]}",
        "{\"d\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]"
        "]"
        "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
        /* not JSON, or not an object */
        "",
        " ",
        "[]",
        "1",
        "\"s\"",
        "null",
        "{",
        "}",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "{,\"a\":1}",
        "{\"a\":1 \"b\":2}",
        "{\"a\":[1,]}",
        "{\"a\":[,1]}",
        "{\"a\":[1 2]}",
        "{\"a\":01}",
        "{\"a\":-}",
        "{\"a\":1.}",
        "{\"a\":.5}",
        "{\"a\":1e}",
        "{\"a\":1e+}",
        "{\"a\":+1}",
        "{\"a\":0x10}",
        "{\"a\":NaN}",
        "{\"a\":Infinity}",
        "{\"a\":-Infinity}",
        "{\"a\":tru}",
        "{\"a\":truex}",
        "{\"a\":True}",
        "{\"a\":nul}",
        "{\"a\":\"x}",
        "{\"a\":'x'}",
        "{a:1}",
        "{\"a\":1}x",
        "{\"a\":1}{}",
        "{\"a\":1} \x00",
        "{\"a\":1}\n]",
        "\xef\xbb\xbf{\"a\":1}",
        "{\"a\":1\x0b}",
        "{\"a\":1\x0c}",
        "{\"a\"\x00:1}",
        "{\"a\":[1,2,3]]",
        "{\"a\":{\"b\":1}",
        "{\"a\":1}}",
        /* plain, and close to the ones above */
        "{\"a\":-0.0}",
        "{\"a\":0}",
        "{\"a\":-0}",
        "{\"a\":0.5e-3}",
        "{\"a\":5E+2}",
        "{\"a\":1.7976931348623157e308}",
        "{\"a\":2.2250738585072014e-300}",
        "{\"a\":\"\x7f\"}",
        "{\"a\":[]}",
        "{\"a\":{}}",
        "{\"a\":[{},[],\"\",0,true]}",
        "{\"a\":1,\"A\":2}",
    };
    int plain = 0;
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        CHECKF(agrees(bodies[i], strlen(bodies[i]), &plain), "body %zu: %s", i, bodies[i]);
    /* a body with a NUL byte inside, and one cut at every length */
    static const char nul[] = "{\"a\":\"x\0y\",\"b\":1}";
    CHECK(agrees(nul, sizeof nul - 1, &plain));
    const char *whole = "{\"a\":[1,-2.5e-3,\"s\",{\"b\":null}],\"c\":true,\"d\":12.75}";
    for (size_t n = 0; n <= strlen(whole); n++)
        CHECKF(agrees(whole, n, &plain), "cut at %zu: %.*s", n, (int)n, whole);
    CHECK(plain > 0);
}

/* Bodies mutated at random (bytes replaced, inserted, dropped, from JSON's own alphabet and
 * the bytes around it): whatever the fast path takes, jansson takes the same way, and what
 * it refuses, jansson answers. */
static void jsonin_mutations_agree(void)
{
    static const char *const seeds[] = {
        "{\"accountant\":\"pld\",\"event\":{\"class_name\":\"PoissonSampledDpEvent\","
        "\"sampling_probability\":0.01,\"event\":{\"class_name\":\"GaussianDpEvent\","
        "\"noise_multiplier\":1.0}},\"epsilons\":[0.5,1,2],\"relation\":\"replace_one\"}",
        "{\"round_id\":\"r-7\",\"participants\":[\"c1\",\"c2\"],\"event\":{\"class_name\":"
        "\"GaussianDpEvent\",\"noise_multiplier\":5},\"dry_run\":false,\"meta\":null}",
    };
    static const char alphabet[] = "{}[]:,\"\\ -+.0123456789eEtrufalsn\n\t\x01\x7f\xc3\xa9\x00";
    int bad = 0, n = 0, plain = 0;
    char buf[512];
    for (int i = 0; i < 100000; i++) {
        const char *seed = seeds[i % 2];
        size_t len = strlen(seed);
        memcpy(buf, seed, len);
        int edits = 1 + (int)(next64() % 3);
        for (int k = 0; k < edits; k++) {
            size_t at = (size_t)(next64() % (len + 1));
            char ch = alphabet[next64() % (sizeof alphabet - 1)];
            switch (next64() % 3) {
            case 0: /* replace */
                if (at < len)
                    buf[at] = ch;
                break;
            case 1: /* insert */
                if (len + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = ch;
                    len++;
                }
                break;
            default: /* drop */
                if (at < len) {
                    memmove(buf + at, buf + at + 1, len - at - 1);
                    len--;
                }
            }
        }
        n++;
        if (!agrees(buf, len, &plain) && bad++ < 3)
            CHECKF(0, "mutated body: %.*s", (int)len, buf);
    }
    CHECKF(bad == 0, "%d of %d mutated bodies", bad, n);
    /* the mutations keep many bodies plain: the fast path was exercised, not only jansson */
    CHECKF(plain > n / 10, "only %d of %d mutated bodies read by the fast path", plain, n);
}

const tl_test JSONIN_TESTS[] = {
    TL_T(jsonin_plain_bodies),
    TL_T(jsonin_handovers_agree),
    TL_T(jsonin_mutations_agree),
};
const size_t JSONIN_NTESTS = sizeof JSONIN_TESTS / sizeof JSONIN_TESTS[0];
