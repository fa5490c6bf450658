/*
 * What the JSONL readers of traces/ share (traces/trace_jsonl.c defines them;
 * traces/reward.c uses them too): how a JSON value's kind reads in a
 * message, and the one report of a line jansson could not parse.  Internal
 * to traces/.
 */
#ifndef TS_JSONL_H
#define TS_JSONL_H

#include <jansson.h>

#include "common/err.h"
#include "common/lines.h"

/* "an object", "an integer", ... for messages.  Cannot fail. */
const char *jsonl_kind(const json_t *v);

/* Reports line r->buf that jansson could not parse: the file's line,
 * jansson's column and reason, and the field only when the error lies in
 * its value or the key is given twice; never the offending token.  Returns
 * -1. */
int jsonl_syntax_error(const ts_lines *r, const json_error_t *jerr, ts_err *e);

/* Reads integer field key of obj in [lo, hi] into *out.  Returns 0 (stored),
 * 1 (absent or null, only when !required) or -1 with "file:line: field
 * 'key': ..." in e. */
int jsonl_int_field(const json_t *obj, const char *key, int required, json_int_t lo,
                    json_int_t hi, json_int_t *out, const ts_lines *r, ts_err *e);

#endif
