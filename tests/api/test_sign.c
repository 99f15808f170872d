/* test_sign.c - signed tree heads and receipts (issue 36): RFC 8785 canonical JSON against
 * the RFC's own examples (Appendix B's numbers, 3.2.2's object, 3.2.3's sorting), nettle's
 * Ed25519 against RFC 8032 7.1's test vectors, the key file's refusals and `dpbudgetd
 * keygen`, and over HTTP (own daemons): GET /v1/log/keys and /v1/log/sth, receipts on
 * charges and commits (verified with the public key GET /v1/log/keys gives, tampering caught),
 * and a daemon without --signing-key (404 signing_off, no receipt). The signatures are also
 * verified by an implementation independent of the daemon, in Python (clients/python/tests/
 * test_transparency.py: cryptography and the rfc8785 package). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/base64.h>
#include <nettle/eddsa.h>
#include <nettle/sha2.h>

#include "../../server/jcs.h"
#include "../../server/jsonout.h"
#include "../../server/signer.h"
#include "check.h"
#include "suites.h"

static char dir[64];

static const char *path_of(const char *name)
{
    static char p[8][160];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/dpb-sign-XXXXXX");
    if (mkdtemp(dir) == NULL)
        dir[0] = '\0';
}

static void remove_dir(void)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (dir[0] && system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return n;
}

/* A double's IEEE-754 bits and its ECMAScript form ("" : an error). */
typedef struct {
    uint64_t bits;
    const char *want;
} num_case;

/* Each case's form from jcs_number, and for a finite double from the text the answer writes
 * for it too (jcs_number_text of jsonout_real's text: how a receipt writes its spends). */
static void check_numbers(const num_case *T, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x;
        memcpy(&x, &T[i].bits, sizeof x);
        char out[40], text[40], out2[40];
        size_t k = jcs_number(x, out);
        CHECKF(k == strlen(T[i].want) && strcmp(out, T[i].want) == 0, "%016llx: '%s', want '%s'",
               (unsigned long long)T[i].bits, out, T[i].want);
        if (!isfinite(x))
            continue;
        jsonout_real(x, text);
        k = jcs_number_text(text, out2);
        CHECKF(k == strlen(T[i].want) && strcmp(out2, T[i].want) == 0,
               "%016llx: '%s' from '%s', want '%s'", (unsigned long long)T[i].bits, out2, text,
               T[i].want);
    }
}

/* RFC 8785 Appendix B: IEEE-754 bits and their ECMAScript form ("" : an error). */
static void jcs_rfc8785_numbers(void)
{
    static const num_case T[] = {
        {0x0000000000000000ULL, "0"},
        {0x8000000000000000ULL, "0"},
        {0x0000000000000001ULL, "5e-324"},
        {0x8000000000000001ULL, "-5e-324"},
        {0x7fefffffffffffffULL, "1.7976931348623157e+308"},
        {0xffefffffffffffffULL, "-1.7976931348623157e+308"},
        {0x4340000000000000ULL, "9007199254740992"},
        {0xc340000000000000ULL, "-9007199254740992"},
        {0x4430000000000000ULL, "295147905179352830000"},
        {0x7fffffffffffffffULL, ""},
        {0x7ff0000000000000ULL, ""},
        {0x44b52d02c7e14af5ULL, "9.999999999999997e+22"},
        {0x44b52d02c7e14af6ULL, "1e+23"},
        {0x44b52d02c7e14af7ULL, "1.0000000000000001e+23"},
        {0x444b1ae4d6e2ef4eULL, "999999999999999700000"},
        {0x444b1ae4d6e2ef4fULL, "999999999999999900000"},
        {0x444b1ae4d6e2ef50ULL, "1e+21"},
        {0x3eb0c6f7a0b5ed8cULL, "9.999999999999997e-7"},
        {0x3eb0c6f7a0b5ed8dULL, "0.000001"},
        {0x41b3de4355555553ULL, "333333333.3333332"},
        {0x41b3de4355555554ULL, "333333333.33333325"},
        {0x41b3de4355555555ULL, "333333333.3333333"},
        {0x41b3de4355555556ULL, "333333333.3333334"},
        {0x41b3de4355555557ULL, "333333333.33333343"},
        {0xbecbf647612f3696ULL, "-0.0000033333333333333333"},
        {0x43143ff3c1cb0959ULL, "1424953923781206.2"},
    };
    check_numbers(T, sizeof T / sizeof T[0]);
    /* integers: exact up to 2^53 - 1, refused past it (no exact double) */
    json_t *ok = json_integer(9007199254740991LL), *big = json_integer(9007199254740992LL);
    char *s = jcs_dumps(ok, NULL);
    CHECK(s && strcmp(s, "9007199254740991") == 0);
    free(s);
    CHECK(jcs_dumps(big, NULL) == NULL);
    json_decref(ok);
    json_decref(big);
}

/* The receipt's spends from the text the answer wrote for them (jcs_number_text of
 * jsonout_real's text, through a jsonout_memo): RFC 8785's form as the Python rfc8785 package
 * writes it (0.1.4; random doubles of every exponent, spends of 15 to 17 digits, whole
 * numbers), and the same as jcs_number on a million more random doubles. */
static void jcs_numbers_from_answer_text(void)
{
    static const num_case T[] = {
        {0x3fd3333333333334ULL, "0.30000000000000004"},
        {0x4008000000000000ULL, "3"},
        {0x444b1ae4d6e2ef50ULL, "1e+21"},
        {0x3e7ad7f29abcaf48ULL, "1e-7"},
        {0x419d6f3454000000ULL, "123456789"},
        {0x3f647ae147ae147bULL, "0.0025"},
        {0x01bac9a7b3b7302fULL, "2.5e-300"},
        {0x4341c37937e08000ULL, "10000000000000000"},
        {0x4350000000000000ULL, "18014398509481984"},
        {0x8000000000000000ULL, "0"},
        {0x0000000000000001ULL, "5e-324"},
        {0x0ef152125425b7b2ULL, "1.0639620873337284e-236"},
        {0x055665f0fbb3e84eULL, "6.025004351821988e-283"},
        {0xcd268110f5913f13ULL, "-4.6288382639490845e+63"},
        {0xe8cd8ad5eb174f64ULL, "-6.90099768200763e+196"},
        {0x48d39be1ca37417aULL, "6.832709303359709e+42"},
        {0x141ec2c0e0045dceULL, "9.137345770293671e-212"},
        {0x80a50dd9001a6566ULL, "-1.4991011405948697e-305"},
        {0x2d2c309ba0825acbULL, "4.324585299256143e-91"},
        {0x44f85bd63f658226ULL, "1.8404941995077818e+24"},
        {0xa700bc19bafe6860ULL, "-8.100865720546843e-121"},
        {0x5d50c5f76eb1135cULL, "3.195925664611882e+141"},
        {0x44a15d898f61f037ULL, "4.100284482831408e+22"},
        {0x13e75c178af34e81ULL, "8.673631590548329e-213"},
        {0x6868d91d937f5a19ULL, "9.069441211265411e+194"},
        {0x7d71435fd3cca141ULL, "1.7640730843716538e+296"},
        {0x63d45566fb46a844ULL, "7.857997031741622e+172"},
        {0xc19dc4315875d214ULL, "-124849238.1150592"},
        {0x654875dfce5ca601ULL, "7.929609576407565e+179"},
        {0x3e49986be3a6cfceULL, "1.1918785171361144e-8"},
        {0x2aebb812645ec117ULL, "6.18798877361731e-102"},
        {0x839e9e041f9ae58aULL, "-3.068106228008048e-291"},
        {0xb39c15f37f54cdf7ULL, "-4.3694507740384593e-60"},
        {0x341b6ba3c3c082eaULL, "1.0920831283394962e-57"},
        {0x4b584e858631af84ULL, "9.312486887294445e+54"},
        {0x7de1673e2f3915cbULL, "2.276340066479632e+298"},
        {0x97e25086b499b037ULL, "-1.2544379325463676e-193"},
        {0xb6994315531482a1ULL, "-1.1062394891945934e-45"},
        {0x8c9b62b8e2e0a81bULL, "-6.1199288840051336e-248"},
        {0x00cf3d1f2b22697fULL, "8.897093276758321e-305"},
        {0x40b732d4c450542fULL, "5938.831120510628"},
        {0x41612df043f1bbcbULL, "9006978.123258492"},
        {0x3f56b62b94a29129ULL, "0.0013862062064982728"},
        {0x407a1a386f31ed09ULL, "417.63877791883766"},
        {0x415ea5b758147283ULL, "8034013.376248005"},
        {0x3fedddf883b7ab81ULL, "0.9333460400206236"},
        {0x3faf4bcced08a705ULL, "0.06112518685797678"},
        {0x4123204f9a0ba7dfULL, "626727.8008701763"},
        {0x4019fd45c889ff40ULL, "6.497336514876054"},
        {0x3e9e60f523110f3eULL, "4.52678508959038e-7"},
        {0x4020ec1dac164a88ULL, "8.461163881035887"},
        {0x3f2aa2e7c7c449b6ULL, "0.0002032192168220489"},
        {0x3f922cd2b403e63aULL, "0.017749111401803776"},
        {0x40f850c6fc508eb4ULL, "99596.43660026306"},
        {0x3e442bbcb3b732f6ULL, "9.392783098961004e-9"},
        {0x40838679da947813ULL, "624.8094989394325"},
        {0x3fdf492ca15c74f2ULL, "0.4888412071030209"},
        {0x40f4c53854da115cULL, "85075.52071577817"},
        {0x406a3d8b9a5ef502ULL, "209.92329138323117"},
        {0x3f1925c5fabfc8c3ULL, "0.00009593029852775479"},
        {0x3f4dd0ded4240895ULL, "0.000909909060539132"},
        {0x3ea220dca7609290ULL, "5.402674350158711e-7"},
        {0x3fde53a3e73e434aULL, "0.4738549955591692"},
        {0x4021c5e3b6332f99ULL, "8.886502927540095"},
    };
    check_numbers(T, sizeof T / sizeof T[0]);
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    size_t bad = 0;
    for (int i = 0; i < 1000000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        double x;
        if (i % 2) { /* any bits */
            memcpy(&x, &s, sizeof x);
        } else { /* a spend: a fraction with a few decimal digits of magnitude */
            x = (double)(s >> 11) * 0x1p-53 * pow(10.0, (double)((int)(s & 15) - 8));
        }
        if (!isfinite(x))
            continue;
        char text[40], out[40], want[40];
        jsonout_real(x, text);
        size_t n = jcs_number_text(text, out);
        if (n != jcs_number(x, want) || strcmp(out, want) != 0)
            CHECKF(bad++ < 5, "%.17g: '%s' from '%s', jcs_number '%s'", x, out, text, want);
    }
    CHECK(bad == 0);
}

/* A writer with a memo remembers every real it wrote with its very text (and writes the same
 * bytes as without); a real it did not write, or past the room asked for, is not found. */
static void jsonout_memo_keeps_what_was_written(void)
{
    json_t *a = json_array();
    for (int i = 0; i < 300; i++)
        json_array_append_new(a,
                              json_real(i % 3 == 0 ? i + 1.0 / (i + 3) : i * 0.1)); /* distinct */
    json_array_append_new(a, json_real(-0.0));
    json_array_append_new(a, json_real(0.0));
    size_t n1, n2;
    char *plain = jsonout_dump(a, &n1);
    jsonout_w w;
    jsonout_init(&w);
    w.reals = jsonout_memo_new(400);
    jsonout_tree(&w, a);
    jsonout_memo *m = w.reals;
    char *with = jsonout_finish(&w, &n2);
    CHECK(plain && with && n1 == n2 && memcmp(plain, with, n1) == 0);
    CHECK(m != NULL);
    for (size_t i = 0; m && i < json_array_size(a); i++) {
        double x = json_real_value(json_array_get(a, i));
        char want[40];
        jsonout_real(x, want);
        const char *got = jsonout_memo_get(m, x);
        CHECKF(got && strcmp(got, want) == 0, "%.17g: '%s', want '%s'", x, got ? got : "NULL",
               want);
    }
    CHECK(m == NULL || jsonout_memo_get(m, 0.7777) == NULL);
    jsonout_memo_free(m);
    /* room for 10: the first ones kept, no later one answered wrongly */
    jsonout_init(&w);
    w.reals = jsonout_memo_new(10);
    jsonout_tree(&w, a);
    m = w.reals;
    size_t kept = 0;
    for (size_t i = 0; m && i < json_array_size(a); i++) {
        double x = json_real_value(json_array_get(a, i));
        char want[40];
        jsonout_real(x, want);
        const char *got = jsonout_memo_get(m, x);
        kept += got != NULL;
        CHECK(got == NULL || strcmp(got, want) == 0);
    }
    CHECKF(kept >= 10 && kept <= 16, "%zu kept", kept);
    jsonout_memo_free(m);
    free(jsonout_finish(&w, &n2));
    free(plain);
    free(with);
    json_decref(a);
}

/* RFC 8785 3.2.2's sample object and 3.2.3's sorting by UTF-16 code units. */
static void jcs_rfc8785_objects(void)
{
    static const char in[] = "{\"numbers\": [333333333.33333329, 1E30, 4.50, 2e-3, "
                             "0.000000000000000000000000001], \"string\": "
                             "\"\\u20ac$\\u000F\\u000aA'\\u0042\\u0022\\u005c\\\\\\\"\\/\", "
                             "\"literals\": [null, true, false]}";
    static const char want[] = "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,"
                               "1e+30,4.5,0.002,1e-27],\"string\":\"\xe2\x82\xac$\\u000f\\nA'B\\"
                               "\"\\\\\\\\\\\"/\"}";
    json_t *j = json_loads(in, JSON_DECODE_ANY, NULL);
    size_t n;
    char *s = j ? jcs_dumps(j, &n) : NULL;
    CHECKF(s && strcmp(s, want) == 0 && n == strlen(want), "%s", s ? s : "(null)");
    free(s);
    json_decref(j);
    static const char sorting[] =
        "{\"\\u20ac\": \"Euro Sign\", \"\\r\": \"Carriage Return\", \"\\ufb33\": \"Hebrew "
        "Letter Dalet With Dagesh\", \"1\": \"One\", \"\\ud83d\\ude00\": \"Emoji: Grinning "
        "Face\", \"\\u0080\": \"Control\", \"\\u00f6\": \"Latin Small Letter O With "
        "Diaeresis\"}";
    static const char *const order[] = {"Carriage Return",
                                        "One",
                                        "Control",
                                        "Latin Small Letter O With Diaeresis",
                                        "Euro Sign",
                                        "Emoji: Grinning Face",
                                        "Hebrew Letter Dalet With Dagesh"};
    j = json_loads(sorting, 0, NULL);
    s = j ? jcs_dumps(j, NULL) : NULL;
    const char *at = s;
    for (size_t i = 0; at && i < sizeof order / sizeof order[0]; i++) {
        const char *p = strstr(at, order[i]);
        CHECKF(p != NULL, "'%s' out of order in %s", order[i], s);
        at = p;
    }
    CHECK(s != NULL);
    free(s);
    json_decref(j);
}

/* RFC 8032 7.1, TESTs 1-3: nettle's public key, signature and verification. */
static void ed25519_rfc8032_vectors(void)
{
    static const char *const V[][4] = {
        {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
         "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
         "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
        {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
         "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da"
         "085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
        {"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
         "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
         "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac"
         "18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
    };
    for (size_t i = 0; i < sizeof V / sizeof V[0]; i++) {
        uint8_t sk[32], pk[32], want_pk[32], msg[8], sig[64], want_sig[64];
        unhex(V[i][0], sk);
        unhex(V[i][1], want_pk);
        size_t mlen = unhex(V[i][2], msg);
        unhex(V[i][3], want_sig);
        ed25519_sha512_public_key(pk, sk);
        CHECKF(memcmp(pk, want_pk, 32) == 0, "TEST %zu: public key", i + 1);
        ed25519_sha512_sign(pk, sk, mlen, msg, sig);
        CHECKF(memcmp(sig, want_sig, 64) == 0, "TEST %zu: signature", i + 1);
        CHECKF(ed25519_sha512_verify(pk, mlen, msg, sig), "TEST %zu: verify", i + 1);
        sig[5] ^= 1;
        CHECKF(!ed25519_sha512_verify(pk, mlen, msg, sig), "TEST %zu: a changed bit", i + 1);
    }
}

/* RFC 8032's TEST 1 key in the key file's form */
#define T1_SECRET "nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A="
#define T1_PUBLIC "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="
#define T2_PUBLIC "PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw="
/* sha256 of TEST 1's raw public key (python3 hashlib) */
#define T1_KEY_ID "21fe31dfa154a261626bf854046fd2271b7bed4b6abe45aa58877ef47f9721b9"

/* A key file's refusals: each names the file and line, never shows the secret. */
static void signing_key_file_refusals(void)
{
    make_dir();
    static const struct {
        const char *text, *want;
    } T[] = {
        {"", "holds no key"},
        {"# only a comment\n", "holds no key"},
        {"ed25519-public " T1_PUBLIC "\n", "line 1: the first key must be an ed25519-secret"},
        {"ed25519-secret nWGxne/9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyu\n", "line 1: the key is not 32"},
        {"ed25519-secret " T1_SECRET " extra\n", "line 1: one key per line"},
        {"rsa " T1_SECRET "\n", "line 1: unknown key kind"},
        {"ed25519-secret " T1_SECRET "\ned25519-public " T1_PUBLIC "\n", "line 2: the same key"},
        {"ed25519-secret\n", "line 1: a key line is"},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        write_text(path_of("bad.key"), T[i].text);
        signer *s = NULL;
        char err[512] = "";
        CHECKF(signer_load(path_of("bad.key"), &s, err, sizeof err) == -1 && s == NULL &&
                   strstr(err, T[i].want) && strstr(err, "bad.key") &&
                   !strstr(err, "nWGxne/9WmC6hEr0"),
               "case %zu: %s", i, err);
    }
    signer *s = NULL;
    char err[512] = "";
    CHECK(signer_load(path_of("absent.key"), &s, err, sizeof err) == -1 &&
          strstr(err, "absent.key"));
    /* the good file: the signing key first, a retired one listed */
    write_text(path_of("good.key"),
               "# a comment\n\ned25519-secret " T1_SECRET "\r\ned25519-public " T2_PUBLIC "\n");
    CHECKF(signer_load(path_of("good.key"), &s, err, sizeof err) == 0, "%s", err);
    if (s) {
        CHECK(strcmp(signer_key_id(s), T1_KEY_ID) == 0);
        json_t *k = signer_keys_json(s);
        CHECK(json_array_size(json_object_get(k, "keys")) == 2);
        CHECK(api_str_is(k, "keys[0].public_key", T1_PUBLIC));
        CHECK(api_str_is(k, "keys[0].key_id", T1_KEY_ID));
        CHECK(json_is_true(jget(k, "keys[0].signing")));
        CHECK(api_str_is(k, "keys[1].public_key", T2_PUBLIC));
        CHECK(json_is_false(jget(k, "keys[1].signing")));
        char *text = json_dumps(k, 0);
        CHECK(text && strstr(text, "nWGxne") == NULL); /* never the secret */
        free(text);
        json_decref(k);
        /* sign, verify, and a changed member breaks the signature */
        json_t *o = json_pack("{s:s, s:f, s:I}", "round_id", "x", "spent", 0.5, "leaf_index",
                              (json_int_t)7);
        CHECK(signer_sign(s, o) == 0);
        CHECK(api_str_is(o, "key_id", T1_KEY_ID));
        CHECK(signer_verify(s, o) == 1);
        json_object_set_new(o, "spent", json_real(0.5000000000000001));
        CHECK(signer_verify(s, o) == 0);
        json_decref(o);
        signer_free(s);
    }
    remove_dir();
}

/* The daemon refuses to start on a bad key file, naming it. */
static void daemon_refuses_bad_signing_key(void)
{
    make_dir();
    write_text(path_of("bad.key"), "ed25519-secret short\n");
    const char *extra[] = {"--signing-key", path_of("bad.key"), NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 1002, "start status %d", st);
    if (st == 0)
        api_daemon_stop();
    const char *extra2[] = {"--signing-key", path_of("none.key"), NULL};
    st = api_daemon_start(extra2, NULL, "http");
    CHECKF(st == 1002, "start status %d (no file)", st);
    if (st == 0)
        api_daemon_stop();
    remove_dir();
}

/* `dpbudgetd keygen FILE`: mode 0600, the key_id printed, an existing file never
 * overwritten. */
static void keygen_makes_a_key_once(void)
{
    make_dir();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' keygen '%s' > '%s' 2>&1", daemon_binary(), path_of("new.key"),
             path_of("out"));
    CHECK(system(cmd) == 0);
    struct stat sb;
    CHECK(stat(path_of("new.key"), &sb) == 0 && (sb.st_mode & 0777) == 0600);
    signer *s = NULL;
    char err[512] = "", printed[128] = "";
    CHECKF(signer_load(path_of("new.key"), &s, err, sizeof err) == 0, "%s", err);
    FILE *f = fopen(path_of("out"), "r");
    if (f) {
        if (fgets(printed, sizeof printed, f) == NULL)
            printed[0] = '\0';
        fclose(f);
    }
    printed[strcspn(printed, "\n")] = '\0';
    CHECKF(s && strcmp(printed, signer_key_id(s)) == 0, "printed '%s'", printed);
    signer_free(s);
    FILE *k = fopen(path_of("new.key"), "r");
    char before[400] = "", after[400] = "";
    if (k) {
        size_t n = fread(before, 1, sizeof before - 1, k);
        before[n] = '\0';
        fclose(k);
    }
    CHECK(WEXITSTATUS(system(cmd)) == 1); /* exists: refused */
    k = fopen(path_of("new.key"), "r");
    if (k) {
        size_t n = fread(after, 1, sizeof after - 1, k);
        after[n] = '\0';
        fclose(k);
    }
    CHECK(before[0] && strcmp(before, after) == 0);
    remove_dir();
}

#define G2 "{\"class_name\":\"GaussianDpEvent\",\"noise_multiplier\":2}"
/* base64 SHA-256 of the RFC 8785 form of G2 and G3 (python3 hashlib) */
#define G2_DIGEST "XlGvEn2Dd56zgkl/YlEl3I+c8riBGLOPLyNHZH6U670="
#define G3_DIGEST "epaiAdzZLhEy08EWHsZh01TAEMMw6TTe0NMX7G6vCx0="

/* Verify o's signature with the public key of GET /v1/log/keys (nettle, not the signer). */
static int verifies_with(const json_t *keys, const json_t *o)
{
    const char *pk64 = jstr(keys, "keys[0].public_key"), *sig64 = jstr(o, "signature");
    if (pk64 == NULL || sig64 == NULL)
        return 0;
    uint8_t pk[64], sig[80];
    size_t npk = sizeof pk, nsig = sizeof sig;
    struct base64_decode_ctx d;
    base64_decode_init(&d);
    if (!base64_decode_update(&d, &npk, pk, strlen(pk64), pk64) || npk != 32)
        return 0;
    base64_decode_init(&d);
    if (!base64_decode_update(&d, &nsig, sig, strlen(sig64), sig64) || nsig != 64)
        return 0;
    json_t *c = json_copy((json_t *)o);
    json_object_del(c, "signature");
    size_t n;
    char *b = jcs_dumps(c, &n);
    json_decref(c);
    int ok = b && ed25519_sha512_verify(pk, n, (const uint8_t *)b, sig);
    free(b);
    return ok;
}

static json_t *get_json(const char *path)
{
    api_reply r;
    api_get(path, &r);
    json_t *j = r.status == 200 && r.json ? json_incref(r.json) : NULL;
    if (j == NULL)
        fprintf(stderr, "GET %s: %ld %.300s\n", path, r.status, r.body);
    api_reply_free(&r);
    return j;
}

/* Receipts on a charge and a commit, none on a dry run or a reservation; keys; the STH. */
static void receipts_over_http(void)
{
    make_dir();
    write_text(path_of("log.key"), "ed25519-secret " T1_SECRET "\ned25519-public " T2_PUBLIC "\n");
    const char *extra[] = {"--signing-key", path_of("log.key"), NULL};
    int st = api_daemon_start(extra, NULL, "http");
    CHECKF(st == 0, "start status %d", st);
    if (st != 0) {
        remove_dir();
        return;
    }
    char logtext[8192] = "";
    FILE *lf = fopen(api_daemon_log(), "r");
    if (lf) {
        size_t got = fread(logtext, 1, sizeof logtext - 1, lf);
        logtext[got] = '\0';
        fclose(lf);
    }
    CHECK(strstr(logtext, T1_KEY_ID) != NULL); /* the listening line names it */
    CHECK(strstr(logtext, "nWGxne") == NULL);  /* never the secret */
    json_t *keys = get_json("/v1/log/keys");
    CHECK(keys && api_str_is(keys, "keys[0].key_id", T1_KEY_ID));
    CHECK(keys && api_str_is(keys, "keys[1].public_key", T2_PUBLIC));
    api_reply r;
    for (int i = 0; i < 3; i++) {
        api_postf(&r, "/v1/clients:batch",
                  "{\"clients\":[{\"id\":\"sign-%d\",\"budget\":"
                  "{\"epsilon\":10,\"delta\":1e-5}}]}",
                  i);
        api_reply_free(&r);
    }
    /* a one-step charge */
    api_postf(&r, "/v1/rounds",
              "{\"round_id\":\"sign-r1\",\"event\":" G2 ",\"participants\":"
              "[\"sign-0\",\"sign-1\",\"nobody\"],\"policy\":\"admit_eligible\"}");
    json_t *rc = r.json ? json_incref(json_object_get(r.json, "receipt")) : NULL;
    CHECKF(r.status == 200 && rc, "%ld %.400s", r.status, r.body);
    api_reply_free(&r);
    if (rc) {
        CHECK(api_str_is(rc, "round_id", "sign-r1"));
        CHECK(api_str_is(rc, "phase", "charge"));
        CHECK(api_str_is(rc, "key_id", T1_KEY_ID));
        CHECK(api_str_is(rc, "event_digest", G2_DIGEST));
        CHECK(json_array_size(json_object_get(rc, "charged")) == 2); /* not the refused one */
        CHECK(api_str_is(rc, "charged[1].client", "sign-1"));
        CHECK(jnum(rc, "charged[1].spent_before") == 0.0 && jnum(rc, "charged[1].spent_after") > 0);
        CHECK(json_integer_value(json_object_get(rc, "leaf_index")) > 0);
        CHECK(json_integer_value(json_object_get(rc, "timestamp")) > 1700000000000LL);
        CHECK(verifies_with(keys, rc));
        json_object_set_new(
            rc, "leaf_index",
            json_integer(json_integer_value(json_object_get(rc, "leaf_index")) + 1));
        CHECK(!verifies_with(keys, rc)); /* a changed leaf index: caught */
    }
    json_decref(rc);
    /* the replay carries a receipt too, for the same leaf */
    api_postf(&r, "/v1/rounds",
              "{\"round_id\":\"sign-r1\",\"event\":" G2 ",\"participants\":"
              "[\"sign-0\",\"sign-1\",\"nobody\"],\"policy\":\"admit_eligible\"}");
    CHECK(r.status == 200 && jget(r.json, "receipt.signature") != NULL);
    api_reply_free(&r);
    /* a dry run and a reservation: nothing charged, no receipt */
    api_postf(&r, "/v1/rounds",
              "{\"round_id\":\"sign-r2\",\"event\":" G2 ",\"participants\":"
              "[\"sign-0\"],\"dry_run\":true}");
    CHECK(r.status == 200 && json_object_get(r.json, "receipt") == NULL);
    api_reply_free(&r);
    api_postf(
        &r, "/v1/rounds",
        "{\"round_id\":\"sign-r3\",\"event\":{\"class_name\":"
        "\"GaussianDpEvent\",\"noise_multiplier\":3},\"participants\":[\"sign-1\",\"sign-2\"],"
        "\"phase\":\"reserve\"}");
    CHECK(r.status == 200 && json_object_get(r.json, "receipt") == NULL);
    long long reserve_leaf = -1;
    api_reply_free(&r);
    /* the commit: a receipt for the reported client, at the COMMIT record's leaf */
    api_postf(&r, "/v1/rounds/sign-r3/commit", "{\"reported\":[\"sign-2\"]}");
    rc = r.json ? json_incref(json_object_get(r.json, "receipt")) : NULL;
    CHECKF(r.status == 200 && rc, "%ld %.400s", r.status, r.body);
    api_reply_free(&r);
    if (rc) {
        CHECK(api_str_is(rc, "phase", "commit"));
        CHECK(api_str_is(rc, "event_digest", G3_DIGEST));
        CHECK(json_array_size(json_object_get(rc, "charged")) == 1);
        CHECK(api_str_is(rc, "charged[0].client", "sign-2"));
        reserve_leaf = json_integer_value(json_object_get(rc, "leaf_index"));
        CHECK(verifies_with(keys, rc));
    }
    json_decref(rc);
    /* the signed tree head covers the commit's leaf */
    json_t *sth = get_json("/v1/log/sth");
    CHECK(sth != NULL);
    if (sth) {
        CHECK(verifies_with(keys, sth));
        CHECK(api_str_is(sth, "key_id", T1_KEY_ID));
        CHECK(json_integer_value(json_object_get(sth, "tree_size")) > reserve_leaf);
        CHECK(jstr(sth, "root_hash") && strlen(jstr(sth, "root_hash")) == 44);
        json_object_set_new(sth, "tree_size", json_integer(1));
        CHECK(!verifies_with(keys, sth));
    }
    json_decref(sth);
    json_decref(keys);
    st = api_daemon_stop();
    CHECKF(st == 0, "dpbudgetd did not exit 0 on SIGTERM (wait status %d)", st);
    remove_dir();
}

/* Without --signing-key: no keys, 404 signing_off for the tree head, no receipt. */
static void signing_off_without_key(void)
{
    int st = api_daemon_start(NULL, NULL, "http");
    CHECKF(st == 0, "start status %d", st);
    if (st != 0)
        return;
    api_reply r;
    api_get("/v1/log/keys", &r);
    CHECK(r.status == 200 && json_array_size(json_object_get(r.json, "keys")) == 0);
    api_reply_free(&r);
    api_get("/v1/log/sth", &r);
    CHECKF(is_problem(&r, 404, "signing_off", NULL) && strstr(r.body, "--signing-key"),
           "%ld %.300s", r.status, r.body);
    api_reply_free(&r);
    api_call("HEAD", "/v1/log/sth", NULL, NULL, 0, &r);
    CHECK(r.status == 404);
    api_reply_free(&r);
    api_postf(&r, "/v1/clients:batch",
              "{\"clients\":[{\"id\":\"o-0\",\"budget\":{\"epsilon\":10,\"delta\":1e-5}}]}");
    api_reply_free(&r);
    api_postf(&r, "/v1/rounds",
              "{\"round_id\":\"o1\",\"event\":" G2 ",\"participants\":"
              "[\"o-0\"]}");
    CHECK(r.status == 200 && jint_is(r.json, "charged", 1) &&
          json_object_get(r.json, "receipt") == NULL);
    api_reply_free(&r);
    st = api_daemon_stop();
    CHECKF(st == 0, "dpbudgetd did not exit 0 on SIGTERM (wait status %d)", st);
}

const tl_test SIGN_TESTS[] = {
    TL_T(jcs_rfc8785_numbers),
    TL_T(jcs_rfc8785_objects),
    TL_T(jcs_numbers_from_answer_text),
    TL_T(jsonout_memo_keeps_what_was_written),
    TL_T(ed25519_rfc8032_vectors),
    TL_T(signing_key_file_refusals),
    TL_T(daemon_refuses_bad_signing_key),
    TL_T(keygen_makes_a_key_once),
    TL_T(receipts_over_http),
    TL_T(signing_off_without_key),
};
const size_t SIGN_NTESTS = sizeof SIGN_TESTS / sizeof SIGN_TESTS[0];
const tl_test SIGN_PG_TESTS[] = {
    TL_T(receipts_over_http),
};
const size_t SIGN_PG_NTESTS = sizeof SIGN_PG_TESTS / sizeof SIGN_PG_TESTS[0];
