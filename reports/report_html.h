/*
 * What every HTML page the report writers produce shares: escaped text and
 * images embedded as data: URIs, so that a page is one self-contained file
 * (the PNGs are still written beside it).  Used by reports/paper_report.c,
 * whose HTML writer serves the paper report, a comparison's report, several
 * stored runs side by side (reports/runs_report.c) and one run's page
 * (reports/report_md.c).
 */
#ifndef TS_REPORT_HTML_H
#define TS_REPORT_HTML_H

#include <stdio.h>

#include "common/err.h"

/* An image larger than this (bytes) is linked, not embedded, and the page
 * says so. */
#define REPORT_EMBED_MAX (4L * 1024 * 1024)

/* report_html_img() flags. */
enum {
    REPORT_IMG_LINK = 1, /* wrap the image in a link to the PNG file beside the page */
};

/* Writes s as HTML text: &, <, > escaped, control characters but newline
 * and tab as spaces; in an attribute (attr 1) also '"' as &quot; and newline
 * and tab as spaces.  Cannot fail (f's error indicator records a failed
 * write). */
void report_put_html(FILE *f, const char *s, int attr);

/* Writes an <img> of the PNG file dir/rel (rel: relative to the page's
 * directory dir) with alt text alt: its bytes base64-encoded in a
 * data:image/png URI, or, over REPORT_EMBED_MAX bytes, a link to rel with a
 * note that it is not embedded.  With REPORT_IMG_LINK the embedded image is
 * also a link to rel (its full-size file).  Returns 0, or -1 naming the
 * file when it cannot be read or is not a PNG. */
int report_html_img(FILE *f, const char *dir, const char *rel, const char *alt, int flags,
                    ts_err *e);

#endif
