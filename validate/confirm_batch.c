/*
 * confirm's record of the simulator's plan and the batch each recorded
 * iteration replays (plain C, no CUDA: tests/test_confirm.c checks it on the
 * CPU).
 *
 * The record: rollout_run()'s on_iter callback appends every planned
 * iteration (predicted duration, decoding sequences with their contexts and
 * accepted counts, prefill chunks) to an it_log: one it_rec each, the
 * integers in one growing pool.
 *
 * The batch (conf_batch_build): what the GPU runs for one record, chosen to
 * be what the cost model prices, so that measured and predicted times
 * compare the same work.  A plain iteration without chunks is a decode step
 * (q_len NULL: the decode attention kernel calibrate timed, not the chunk
 * kernel's 16-row blocks).  Logit rows are the cost model's: one per
 * sequence in a plain step (cost_iter's n_decode + n_prefill_seqs rows), V
 * per verified sequence plus one per chunk in a speculative one
 * (cost_verify), never one per prefill token.  The draft extend runs
 * CONF_DEPTH + 1 tokens per sequence (cost_draft_extend's padded shape).
 *
 * The largest shapes (conf_log_max): one walk over the record, building
 * every batch, gives the most target tokens, logit rows and draft sequences
 * of any iteration; the replay reserves the models' workspaces for them.
 */
#include "validate/confirm_impl.h"

#include <stdlib.h>
#include <string.h>

static int push_ints(it_log *l, const int32_t *x, size_t n)
{
    if (l->np + n > l->capp) {
        size_t nc = l->capp ? l->capp : 1 << 16;
        while (nc < l->np + n)
            nc *= 2;
        int32_t *p = realloc(l->pool, nc * sizeof *p);
        if (!p)
            return -1;
        l->pool = p;
        l->capp = nc;
    }
    if (n)
        memcpy(l->pool + l->np, x, n * sizeof *x);
    l->np += n;
    return 0;
}

void conf_record_iter(void *ctx, const rollout_iter *it)
{
    it_log *l = ctx;
    if (l->oom)
        return;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 4096;
        it_rec *p = realloc(l->it, nc * sizeof *p);
        if (!p) {
            l->oom = 1;
            return;
        }
        l->it = p;
        l->cap = nc;
    }
    it_rec r = {it->dt, it->n_dec, it->spec_budget, it->n_chunks, l->np};
    int32_t ones[1] = {1};
    int bad = push_ints(l, it->dec_seq, (size_t)it->n_dec) || push_ints(l, it->dec_ctx, (size_t)it->n_dec);
    if (it->dec_acc)
        bad |= push_ints(l, it->dec_acc, (size_t)it->n_dec);
    else
        for (int k = 0; k < it->n_dec && !bad; k++)
            bad |= push_ints(l, ones, 1);
    bad |= push_ints(l, it->chunk_seq, (size_t)it->n_chunks) ||
           push_ints(l, it->chunk_len, (size_t)it->n_chunks) ||
           push_ints(l, it->chunk_done, (size_t)it->n_chunks);
    if (bad) {
        l->oom = 1;
        return;
    }
    l->it[l->n++] = r;
}

void conf_log_free(it_log *l)
{
    free(l->it);
    free(l->pool);
    memset(l, 0, sizeof *l);
}

int conf_iter_kind(const it_rec *r)
{
    /* a speculative iteration with no decoding sequence (prefill chunks
     * only) drafts nothing: it is a plain prefill step */
    return r->V > 0 && r->n_dec > 0 ? 2 : r->n_chunks > 0 ? 1 : 0;
}

void conf_batch_free(conf_batch *bt)
{
    free(bt->seqs);
    free(bt->qlen);
    free(bt->nlog);
    free(bt->ext_q);
    memset(bt, 0, sizeof *bt);
}

/* Makes room for n entries in each array of bt. */
static int batch_grow(conf_batch *bt, int n, ts_err *e)
{
    if (n <= bt->cap)
        return 0;
    int nc = bt->cap ? bt->cap : 256;
    while (nc < n)
        nc *= 2;
    int *a[4] = {bt->seqs, bt->qlen, bt->nlog, bt->ext_q};
    for (int i = 0; i < 4; i++) {
        int *p = realloc(a[i], (size_t)nc * sizeof *p);
        if (!p) {
            bt->seqs = a[0], bt->qlen = a[1], bt->nlog = a[2], bt->ext_q = a[3];
            return ts_errf(e, "out of memory for a batch of %d sequences", n);
        }
        a[i] = p;
    }
    bt->seqs = a[0], bt->qlen = a[1], bt->nlog = a[2], bt->ext_q = a[3];
    bt->cap = nc;
    return 0;
}

int conf_batch_build(const it_log *l, const it_rec *r, conf_batch *bt, ts_err *e)
{
    const int32_t *p = l->pool + r->off;
    const int32_t *dseq = p, *cseq = p + 3 * r->n_dec, *clen = cseq + r->n_chunks;
    if (batch_grow(bt, r->n_dec + r->n_chunks, e))
        return -1;
    bt->spec = r->V > 0 && r->n_dec > 0;
    bt->decode = r->V == 0 && r->n_chunks == 0;
    bt->n_dec = r->n_dec;
    bt->b = 0;
    bt->T = bt->R = 0;
    for (int k = 0; k < r->n_dec; k++, bt->b++) {
        bt->seqs[bt->b] = dseq[k];
        bt->qlen[bt->b] = r->V > 0 ? r->V : 1;
        bt->nlog[bt->b] = bt->qlen[bt->b]; /* verify: every token; decode: the one */
        bt->ext_q[k] = CONF_DEPTH + 1;
    }
    for (int k = 0; k < r->n_chunks; k++, bt->b++) {
        bt->seqs[bt->b] = cseq[k];
        bt->qlen[bt->b] = clen[k];
        bt->nlog[bt->b] = clen[k] > 0 ? 1 : 0; /* the chunk's last token only */
    }
    for (int i = 0; i < bt->b; i++) {
        bt->T += bt->qlen[i];
        bt->R += bt->nlog[i];
    }
    return 0;
}

int conf_log_max(const it_log *l, conf_batch *bt, conf_max *mx, ts_err *e)
{
    memset(mx, 0, sizeof *mx);
    for (size_t i = 0; i < l->n; i++) {
        if (conf_batch_build(l, &l->it[i], bt, e))
            return -1;
        mx->T = bt->T > mx->T ? bt->T : mx->T;
        mx->R = bt->R > mx->R ? bt->R : mx->R;
        if (bt->spec && bt->n_dec > mx->draft_seqs)
            mx->draft_seqs = bt->n_dec;
    }
    mx->ext_T = (long long)mx->draft_seqs * (CONF_DEPTH + 1);
    return 0;
}
