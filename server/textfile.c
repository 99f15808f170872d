/* textfile.c - operator files read whole and split into lines (see textfile.h). */
#include "textfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int textfile_read(textfile *f, const char *path, size_t cap, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    FILE *in = fopen(path, "rb");
    if (in == NULL) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    size_t size = 0, alloc = 4096;
    char *buf = malloc(alloc);
    int rc = buf ? 0 : -1;
    if (buf == NULL)
        snprintf(err, errlen, "cannot read %s: out of memory", path);
    while (rc == 0) {
        if (size + 1 >= alloc) {
            size_t nalloc = alloc * 2;
            char *nb = nalloc > alloc ? realloc(buf, nalloc) : NULL;
            if (nb == NULL) {
                snprintf(err, errlen, "cannot read %s: out of memory", path);
                rc = -1;
                break;
            }
            buf = nb;
            alloc = nalloc;
        }
        size_t got = fread(buf + size, 1, alloc - 1 - size, in);
        size += got;
        if (size > cap) {
            snprintf(err, errlen, "%s is larger than %zu bytes: refused", path, cap);
            rc = -1;
        } else if (got == 0) {
            if (ferror(in)) {
                snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
                rc = -1;
            }
            break;
        }
    }
    fclose(in);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    buf[size] = '\0';
    f->buf = buf;
    f->len = size;
    return 0;
}

int textfile_lines(textfile *f, const char *path, char *err, size_t errlen)
{
    size_t n = 1;
    for (size_t i = 0; i < f->len; i++)
        n += f->buf[i] == '\n';
    free(f->line);
    f->n = 0;
    f->line = malloc(n * sizeof *f->line);
    if (f->line == NULL) {
        snprintf(err, errlen, "cannot read %s: out of memory", path);
        return -1;
    }
    char *p = f->buf, *end = f->buf + f->len;
    size_t lineno = 0;
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl ? nl : end;
        lineno++;
        if (stop > p && stop[-1] == '\r')
            stop--; /* CRLF */
        for (char *c = p; c < stop; c++) {
            unsigned char u = (unsigned char)*c;
            if (u == '\0' || u == '\r' || u == 0x7f || (u < 0x20 && u != '\t')) {
                snprintf(err, errlen, "%s line %zu: %s at byte %zu: not a text line", path, lineno,
                         u == '\0'   ? "a NUL byte"
                         : u == '\r' ? "a carriage return inside the line"
                                     : "a control character",
                         (size_t)(c - p) + 1);
                return -1;
            }
        }
        *stop = '\0';
        f->line[f->n++] = p;
        p = nl ? nl + 1 : end;
    }
    return 0;
}

void textfile_release(textfile *f)
{
    free(f->buf);
    free(f->line);
    memset(f, 0, sizeof *f);
}
