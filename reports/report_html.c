/*
 * The HTML pieces every report page shares (see report_html.h): escaped
 * text, and images embedded as data: URIs.  A page's images are read whole
 * (a report PNG is tens to hundreds of KB; one over REPORT_EMBED_MAX is
 * linked instead) and streamed to the page as base64 (common/base64.c), so
 * the page opens alone, e-mailed or moved, with every figure in it.  A
 * file's relative name still reaches the page as a link target
 * (report_put_url(): percent-encoded), never as an img src.
 * Nothing here prints or exits.
 */
#include "reports/report_html.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/base64.h"
#include "reports/report.h"

#define HPATH 4096

void report_put_html(FILE *f, const char *s, int attr)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '&')
            fputs("&amp;", f);
        else if (c == '<')
            fputs("&lt;", f);
        else if (c == '>')
            fputs("&gt;", f);
        else if (c == '"' && attr)
            fputs("&quot;", f);
        else
            fputc((c < 0x20 && (attr || (c != '\n' && c != '\t'))) || c == 0x7f ? ' ' : c, f);
    }
}

/* Reads the regular file path whole into *buf (*n bytes; free it), unless
 * it is larger than max: then *buf is NULL and *n its size.  Returns 0, or
 * -1 naming path. */
static int read_small(const char *path, long max, unsigned char **buf, size_t *n, ts_err *e)
{
    struct stat st;
    *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return ts_errf(e, "%s: cannot read the image: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return ts_errf(e, "%s: not a regular file", path);
    }
    *n = (size_t)st.st_size;
    if (st.st_size > max) {
        fclose(f);
        return 0;
    }
    if (!(*buf = malloc(*n ? *n : 1))) {
        fclose(f);
        return ts_errf(e, "%s: out of memory reading %zu bytes", path, *n);
    }
    size_t got = fread(*buf, 1, *n, f);
    int bad = ferror(f) || got != *n;
    fclose(f);
    if (bad) {
        free(*buf);
        *buf = NULL;
        return ts_errf(e, "%s: short read of the image", path);
    }
    return 0;
}

int report_html_img(FILE *f, const char *dir, const char *rel, const char *alt, int flags,
                    ts_err *e)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    char path[HPATH];
    unsigned char *png = NULL;
    size_t n = 0;
    if (snprintf(path, sizeof path, "%s/%s", dir, rel) >= (int)sizeof path)
        return ts_errf(e, "%s: image path too long", dir);
    if (read_small(path, REPORT_EMBED_MAX, &png, &n, e))
        return -1;
    if (!png) {
        fputs("<a href=\"", f);
        report_put_url(f, rel, strlen(rel));
        fputs("\">", f);
        report_put_html(f, rel, 0);
        fprintf(f, "</a> <i>(an image of %.1f MB: linked, not embedded, over the %ld MB "
                   "bound)</i>",
                (double)n / (1024.0 * 1024.0), REPORT_EMBED_MAX / (1024 * 1024));
        return 0;
    }
    if (n < sizeof sig || memcmp(png, sig, sizeof sig)) {
        free(png);
        return ts_errf(e, "%s: not a PNG image", path);
    }
    if (flags & REPORT_IMG_LINK) {
        fputs("<a href=\"", f);
        report_put_url(f, rel, strlen(rel));
        fputs("\" title=\"full size\">", f);
    }
    fputs("<img src=\"data:image/png;base64,", f);
    int bad = ts_base64_write(f, png, n);
    free(png);
    fputs("\" alt=\"", f);
    report_put_html(f, alt, 1);
    fputs("\">", f);
    if (flags & REPORT_IMG_LINK)
        fputs("</a>", f);
    return bad ? ts_errf(e, "%s: cannot write it into the page", path) : 0;
}
