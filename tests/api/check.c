/* check.c - JSON look-ups and answer-shape checks for the API tests (see check.h). */
#include "check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../testlib.h"

/* Print why a check does not hold; returns 0. */
static int bad(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static int bad(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "  %s: ", tl_current ? tl_current : "?");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 0;
}

json_t *jget(const json_t *root, const char *path)
{
    const json_t *cur = root;
    const char *p = path;
    while (cur && *p) {
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p == '[') {
            char *end;
            unsigned long i = strtoul(p + 1, &end, 10);
            if (*end != ']' || !json_is_array(cur))
                return NULL;
            cur = json_array_get(cur, i);
            p = end + 1;
            continue;
        }
        size_t n = strcspn(p, ".[");
        char key[128];
        if (n >= sizeof key || !json_is_object(cur))
            return NULL;
        memcpy(key, p, n);
        key[n] = '\0';
        cur = json_object_get(cur, key);
        p += n;
    }
    return (json_t *)cur;
}

double jnum(const json_t *root, const char *path)
{
    json_t *v = jget(root, path);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

const char *jstr(const json_t *root, const char *path)
{
    return json_string_value(jget(root, path));
}

int jint_is(const json_t *root, const char *path, long long want)
{
    json_t *v = jget(root, path);
    if (!json_is_integer(v)) {
        return bad("%s is not an integer", path);
    }
    if ((long long)json_integer_value(v) != want) {
        return bad("%s = %lld, want %lld", path, (long long)json_integer_value(v), want);
    }
    return 1;
}

/* Walk j; path names the value being visited (for the message). */
static int finite_at(const json_t *j, char *path, size_t len, size_t cap)
{
    const char *key;
    json_t *v;
    size_t i;
    int ok = 1;
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        json_object_foreach((json_t *)j, key, v)
        {
            snprintf(path + len, cap - len, "%s%s", len ? "." : "", key);
            ok &= finite_at(v, path, strlen(path), cap);
        }
        break;
    case JSON_ARRAY:
        json_array_foreach(j, i, v)
        {
            snprintf(path + len, cap - len, "[%zu]", i);
            ok &= finite_at(v, path, strlen(path), cap);
        }
        break;
    case JSON_REAL:
    case JSON_INTEGER:
        if (!isfinite(json_number_value(j)))
            ok = bad("%s is not finite", path);
        break;
    case JSON_NULL:
        ok = bad("%s is null (a NaN leaked?)", len ? path : "the value");
        break;
    default:
        break;
    }
    path[len] = '\0';
    return ok;
}

int all_finite(const json_t *j)
{
    char path[256] = "";
    return finite_at(j, path, 0, sizeof path);
}

static int has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static int condition_ok(const json_t *c, size_t i)
{
    int ok = 1;
    if (!json_is_object(c)) {
        return bad("conditions[%zu] is not an object", i);
    }
    if (!json_is_string(json_object_get(c, "name")) ||
        json_string_length(json_object_get(c, "name")) == 0)
        ok = bad("conditions[%zu].name is not a non-empty string", i);
    if (!json_is_string(json_object_get(c, "statement")))
        ok = bad("conditions[%zu].statement is not a string", i);
    if (!json_is_boolean(json_object_get(c, "holds")))
        ok = bad("conditions[%zu].holds is not a boolean", i);
    if (!json_is_number(json_object_get(c, "lhs")))
        ok = bad("conditions[%zu].lhs is not a number", i);
    if (!json_is_number(json_object_get(c, "rhs")))
        ok = bad("conditions[%zu].rhs is not a number", i);
    return ok;
}

int is_compute_answer(const api_reply *r)
{
    int ok = 1;
    if (r->status != 200)
        ok = bad("status %ld, want 200; body: %.300s", r->status, r->body ? r->body : "");
    if (!has_prefix(r->content_type, "application/json"))
        ok = bad("Content-Type '%s', want application/json", r->content_type);
    const json_t *o = r->json;
    if (!json_is_object(o)) {
        return bad("the body is not a JSON object");
    }
    if (!json_is_string(json_object_get(o, "accountant")))
        ok = bad("'accountant' is not a string");
    const char *g = jstr(o, "guarantee");
    if (g == NULL || (strcmp(g, "upper_bound") != 0 && strcmp(g, "estimate") != 0 &&
                      strcmp(g, "lower_bound") != 0))
        ok =
            bad("'guarantee' is '%s', want upper_bound, estimate or lower_bound", g ? g : "(none)");
    if (!json_is_boolean(json_object_get(o, "valid")))
        ok = bad("'valid' is not a boolean");
    json_t *conds = json_object_get(o, "conditions");
    if (!json_is_array(conds)) {
        ok = bad("'conditions' is not an array");
    } else {
        size_t i;
        json_t *c;
        json_array_foreach(conds, i, c) ok &= condition_ok(c, i);
    }
    json_t *w = json_object_get(o, "warnings");
    if (!json_is_array(w)) {
        ok = bad("'warnings' is not an array");
    } else {
        size_t i;
        json_t *s;
        json_array_foreach(w, i, s)
        {
            if (!json_is_string(s))
                ok = bad("warnings[%zu] is not a string", i);
        }
    }
    if (!all_finite(o))
        ok = bad("the answer holds a non-finite number or a null");
    return ok;
}

int is_problem(const api_reply *r, int status, const char *code, const char *field)
{
    int ok = 1;
    if (r->status != status)
        ok = bad("status %ld, want %d; body: %.300s", r->status, status, r->body ? r->body : "");
    if (!has_prefix(r->content_type, "application/problem+json"))
        ok = bad("Content-Type '%s', want application/problem+json", r->content_type);
    const json_t *o = r->json;
    if (!json_is_object(o)) {
        return bad("the body is not a JSON object");
    }
    static const char *const strings[] = {"type", "title", "code", "detail"};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        const char *s = jstr(o, strings[i]);
        if (s == NULL || s[0] == '\0')
            ok = bad("'%s' is not a non-empty string", strings[i]);
    }
    json_t *st = json_object_get(o, "status");
    if (!json_is_integer(st) || json_integer_value(st) != r->status)
        ok = bad("'status' member does not equal the HTTP status %ld", r->status);
    const char *c = jstr(o, "code");
    if (code && (c == NULL || strcmp(c, code) != 0))
        ok = bad("code '%s', want '%s'", c ? c : "(none)", code);
    const char *t = jstr(o, "type");
    if (c && t &&
        (!has_prefix(t, "urn:dpbudget:problem:") ||
         strcmp(t + strlen("urn:dpbudget:problem:"), c) != 0))
        ok = bad("type '%s' does not name code '%s'", t, c);
    if (field) {
        const char *f = jstr(o, "field");
        if (f == NULL || strcmp(f, field) != 0)
            ok = bad("field '%s', want '%s'", f ? f : "(none)", field);
    }
    if (!all_finite(o))
        ok = bad("the problem holds a non-finite number or a null");
    return ok;
}

json_t *find_condition(const json_t *root, const char *path, const char *name)
{
    json_t *arr = jget(root, path);
    size_t i;
    json_t *c;
    json_array_foreach(arr, i, c)
    {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (n && strcmp(n, name) == 0)
            return c;
    }
    return NULL;
}
