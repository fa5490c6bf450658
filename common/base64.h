/*
 * Base64 (RFC 4648, standard alphabet, '=' padding, no line breaks): the
 * encoding of the report pages' embedded images (data: URIs).
 */
#ifndef TS_BASE64_H
#define TS_BASE64_H

#include <stddef.h>
#include <stdio.h>

/* Length of n bytes encoded: 4 * ceil(n / 3).  Cannot fail. */
size_t ts_base64_len(size_t n);

/* Writes the base64 encoding of the n bytes at p to f.  Returns 0, or -1
 * when a write fails (f's error indicator set; the caller names the file). */
int ts_base64_write(FILE *f, const unsigned char *p, size_t n);

#endif
