/*
 * The one strict line source for tailsim's INI readers (scenarios, sweep
 * grids, hardware and LLM descriptions), given to libinih's
 * ini_parse_stream().  The system libinih is built with multi-line values,
 * a 200-byte line buffer that splits longer lines, and no line numbers for
 * handlers; none of that can be changed at run time, so this reader sees
 * every raw line first and refuses what libinih would quietly accept.
 */
#ifndef TS_INI_LINES_H
#define TS_INI_LINES_H

#include <stdio.h>

#include "common/err.h"

/* State of one parse.  Set f, path, e (and allow_cont) before the parse and
 * leave the rest zero. */
typedef struct ts_ini_lines {
    FILE *f;
    const char *path;  /* for messages */
    ts_err *e;
    int allow_cont;    /* 1: an indented line after a key continues its value
                        * (a sweep grid's long list); 0: it is an error */
    int line;          /* lines read so far: a handler runs right after its line */
    int cont;          /* the line just returned continues the previous key's value */
    int failed;        /* 1: e holds an error (reader or handler); reading stops */
    int in_key;        /* a key line seen since the last [section] (libinih's
                        * condition for a continuation); the reader's own */
} ts_ini_lines;

/* ini_parse_stream() reader over a ts_ini_lines (stream): returns the next
 * whole line (with its newline) in str (num bytes), or NULL at the end of the
 * file or on an error.  A line is refused, with "PATH:LINE: reason" in e and
 * failed set, when it holds a NUL byte, is longer than num - 2 characters,
 * opens a section without closing it, is neither blank, a comment, a
 * [section] nor a key = value (key: value) line, or is indented after a key
 * line (libinih's continuation) and allow_cont is 0; a read error is also
 * refused.  Continuation lines it passes set cont. */
char *ts_ini_read(char *str, int num, void *stream);

/* Marks the parse failed after a handler filled e: further reads return
 * NULL.  Returns 0 (a libinih handler's "stop").  Cannot fail. */
int ts_ini_fail(ts_ini_lines *c);

#endif
