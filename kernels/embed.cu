/*
 * Embedding gather: out[t] = table[ids[t]], bf16 rows of the hidden size
 * (kref_embed).  Ids outside [0, vocab) produce a zero row rather than a
 * wild read (the reference rejects them; callers validate ids first).
 *
 * Build: make validate (nvcc -O3 -gencode=arch=compute_90,code=sm_90
 *        -gencode=arch=compute_90,code=compute_90); run:
 *        build/tailsim-validate selftest
 *
 * Versions:
 *   1  embed_kernel: one block per token, 16-byte copies of the row.
 *
 * Roofline: bytes = 4 * n * dim (+ 4 n for ids), no arithmetic: a gather of
 * 7-10 KB rows.  Target: >= 70% of measured copy bandwidth at >= 1024
 * tokens; launch-bound for decode batches.
 * NOT YET MEASURED: no GPU was lent to the session that wrote this.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda_common.cuh"
#include "kernels/ref/kref.h"

/* ---- C reference --------------------------------------------------------- */

extern "C" int kt_embed_selftest(uint64_t seed, FILE *log)
{
    const int vocab = 1000, dim = 3584, n = 10;
    int ids[n] = {0, 999, 5, 5, 123, 998, 1, 0, 500, 1000 /* out of range */};
    size_t nt = (size_t)vocab * dim, no = (size_t)n * dim;
    kt_rng rng;
    kt_rng_seed(&rng, seed);
    float *table = (float *)malloc(nt * sizeof(float));
    float *ref = (float *)malloc(no * sizeof(float)), *got = (float *)malloc(no * sizeof(float));
    kt_bf16 *dt = (kt_bf16 *)kt_malloc(nt * 2), *dout = (kt_bf16 *)kt_malloc(no * 2);
    int *dids = (int *)kt_malloc(sizeof ids);
    int rc = -1;
    if (!table || !ref || !got) {
        kt_seterr(__FILE__, __LINE__, "out of host memory");
    } else if (dt && dout && dids) {
        kt_rand_bf16(&rng, table, nt, 1.0f);
        if (!kt_upload_bf16(dt, table, nt) && !kt_upload(dids, ids, sizeof ids) &&
            !kt_fill_bf16(dout, no, 6, 1e30f) && !kt_embed(dt, vocab, dim, dids, n, dout) &&
            !kt_sync() && !kt_download_bf16(got, dout, no)) {
            /* the reference covers the valid ids; the last row must be zero */
            if (kref_embed(table, vocab, dim, ids, n - 1, ref)) {
                kt_seterr(__FILE__, __LINE__, "kref_embed rejected valid ids");
            } else {
                memset(ref + (size_t)(n - 1) * dim, 0, (size_t)dim * sizeof(float));
                rc = kt_compare(log, "embed vocab=1000 dim=3584", ref, got, no, 0.0, 0.0)
                         ? 1 : 0;
            }
        }
    }
    kt_free(dt); kt_free(dout); kt_free(dids);
    free(table); free(ref); free(got);
    return rc;
}

/* ---- kernels ------------------------------------------------------------- */

__global__ void embed_kernel(const uint4 *table, int vocab, int dvec, const int *ids,
                             uint4 *out)
{
    const int t = blockIdx.x;
    const int id = ids[t];
    uint4 *o = out + (size_t)t * dvec;
    if (id < 0 || id >= vocab) {
        for (int c = threadIdx.x; c < dvec; c += blockDim.x)
            o[c] = make_uint4(0, 0, 0, 0);
        return;
    }
    const uint4 *src = table + (size_t)id * dvec;
    for (int c = threadIdx.x; c < dvec; c += blockDim.x)
        o[c] = src[c];
}

/* ---- launchers ----------------------------------------------------------- */

extern "C" int kt_embed(const kt_bf16 *d_table, int vocab, int dim, const int *d_ids,
                        int n, kt_bf16 *d_out)
{
    KT_REQUIRE(vocab > 0 && n >= 0 && dim > 0 && dim % 8 == 0,
               "kt_embed: vocab %d, n %d, dim %d (need a multiple of 8)", vocab, n, dim);
    if (n == 0)
        return 0;
    embed_kernel<<<n, 128>>>((const uint4 *)d_table, vocab, dim / 8, d_ids, (uint4 *)d_out);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
