/*
 * Strict INI lines.  libinih (as Debian builds it: INI_MAX_LINE 200,
 * INI_ALLOW_MULTILINE, no INI_HANDLER_LINENO) splits a line longer than its
 * buffer and parses the tail as a line of its own, treats an indented line
 * after a key as more of that key's value, and stops a line at a NUL byte.
 * This reader is the only line source the INI readers give it: it reads
 * each physical line byte by byte (so it sees NULs and lengths), counts it,
 * and classifies it exactly as libinih will (BOM on line 1, blank and
 * comment lines, continuation before section, "key = value" or "key: value"
 * before an inline " ;" comment), so that every line libinih acts on has
 * passed here first and every message carries the right line number.  Only
 * the first error is kept; after it every read returns NULL, which libinih
 * takes as the end of the file.  Messages never quote the line itself.
 * Runs once per file read, never on the simulator's hot path; O(line).
 */
#include "common/ini_lines.h"

#include <ctype.h>
#include <string.h>

static char *refuse(ts_ini_lines *c, const char *what)
{
    ts_errf(c->e, "%s:%d: %s", c->path, c->line, what);
    c->failed = 1;
    return NULL;
}

/* libinih's ini_find_chars_or_comment(): the first of chars in s, or the
 * start of an inline comment (';' after a blank), or the end. */
static const char *find_or_comment(const char *s, const char *chars)
{
    int was_space = 0;
    while (*s && !strchr(chars, *s) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

char *ts_ini_read(char *str, int num, void *stream)
{
    ts_ini_lines *c = stream;
    if (c->failed || num < 3)
        return NULL;
    int n = 0, ch, max = num - 2; /* characters of a line, its newline aside */
    c->line++;
    c->cont = 0;
    while ((ch = getc(c->f)) != EOF && ch != '\n') {
        if (ch == 0)
            return refuse(c, "NUL byte in the line (not a text file?)");
        if (n == max) {
            char what[64];
            snprintf(what, sizeof what, "line longer than %d characters", max);
            return refuse(c, what);
        }
        str[n++] = (char)ch;
    }
    if (ferror(c->f))
        return refuse(c, "read error");
    if (ch == EOF && n == 0) {
        c->line--;
        return NULL;
    }
    if (ch == '\n')
        str[n++] = '\n';
    str[n] = 0;
    const char *p = str;
    if (c->line == 1 && !strncmp(p, "\xEF\xBB\xBF", 3))
        p += 3;
    const char *q = p;
    while (*q && isspace((unsigned char)*q))
        q++;
    if (!*q || *q == ';' || *q == '#')
        return str; /* blank or comment */
    if (q != str && c->in_key) {
        if (!c->allow_cont)
            return refuse(c, "indented line (it would continue the value of the key above): "
                             "start every key in column 1, one value per key");
        c->cont = 1;
        return str;
    }
    if (*q == '[') {
        if (*find_or_comment(q + 1, "]") != ']')
            return refuse(c, "section name not closed with ']'");
        c->in_key = 0;
        return str;
    }
    const char *sep = find_or_comment(q, "=:");
    if (*sep != '=' && *sep != ':')
        return refuse(c, "syntax error (expected [section] or key = value)");
    c->in_key = 1;
    return str;
}

int ts_ini_fail(ts_ini_lines *c)
{
    c->failed = 1;
    return 0;
}
