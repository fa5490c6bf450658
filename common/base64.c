/*
 * Base64 encoder (RFC 4648 section 4: the standard alphabet, '=' padding,
 * no line breaks), for the data: URIs that embed a report's PNG images in
 * its HTML page.  Three input bytes become four output characters; the last
 * group of one or two bytes is padded with "==" or "=".  Streaming to a
 * FILE keeps no copy of the encoded text (an image is up to a few MB).
 * Nothing here allocates, prints or exits.
 */
#include "common/base64.h"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t ts_base64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

int ts_base64_write(FILE *f, const unsigned char *p, size_t n)
{
    char out[4];
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        out[0] = b64[v >> 18 & 63];
        out[1] = b64[v >> 12 & 63];
        out[2] = b64[v >> 6 & 63];
        out[3] = b64[v & 63];
        if (fwrite(out, 1, 4, f) != 4)
            return -1;
    }
    if (i < n) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0);
        out[0] = b64[v >> 18 & 63];
        out[1] = b64[v >> 12 & 63];
        out[2] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        out[3] = '=';
        if (fwrite(out, 1, 4, f) != 4)
            return -1;
    }
    return ferror(f) ? -1 : 0;
}
