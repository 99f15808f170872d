/*
 * textfile.h - the operator's files (API keys, --config, TLS PEM): read whole, never in
 * fixed-size pieces, so a long line is never split into two (the tail of a long comment
 * must not become a line of its own).
 *
 * textfile_read loads a whole file up to a cap (over it: an error, never a truncation).
 * textfile_lines then checks it is text and splits it in place into lines: '\n' ends a
 * line, one '\r' before it is dropped (CRLF files are accepted), a NUL byte, any other '\r'
 * or another control character but tab is an error naming the line. Messages name the file.
 */
#ifndef HTTP_TEXTFILE_H
#define HTTP_TEXTFILE_H

#include <stddef.h>

typedef struct {
    char *buf;   /* owned: the file's bytes, NUL-terminated (lines are split in place) */
    size_t len;  /* bytes read */
    char **line; /* owned array of n pointers into buf (after textfile_lines) */
    size_t n;
} textfile;

/* Read path whole (at most cap bytes, else an error) into f. 0, or -1 with a message in err
 * ("cannot read PATH: reason" / "PATH is larger than CAP bytes"). */
int textfile_read(textfile *f, const char *path, size_t cap, char *err, size_t errlen);

/* Split f (read by textfile_read) into lines. 0, or -1 with "PATH line N: reason". */
int textfile_lines(textfile *f, const char *path, char *err, size_t errlen);

/* Release what f owns (f may be zeroed). */
void textfile_release(textfile *f);

#endif
