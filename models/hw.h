/*
 * Hardware and LLM descriptions, loaded from INI files under models/hw/ and
 * models/llm/ (libinih).  Pure data: no simulator, no CUDA.
 */
#ifndef TS_HW_H
#define TS_HW_H

#include "common/err.h"

/* One GEMM kernel of hw_desc.gemm_tiles: its output tile and its compute
 * efficiency relative to the base (gemm_eff, or train_eff for training). */
#define HW_GEMM_TILES_MAX 4
typedef struct hw_gemm_tile {
    int m, n;               /* output tile: rows (tokens) x columns */
    double rel;             /* fraction of the base efficiency it reaches, (0, 1] */
} hw_gemm_tile;

typedef struct hw_desc {
    char name[64];
    double peak_flops;      /* dense bf16 FLOP/s per GPU */
    double hbm_bw;          /* HBM bytes/s per GPU (spec) */
    double hbm_bytes;       /* HBM capacity, bytes */
    double nvlink_bw;       /* bytes/s per direction per GPU */
    double nvlink_lat;      /* s, per collective step inside a node */
    double nic_bw;          /* bytes/s per GPU across nodes */
    double nic_lat;         /* s, per collective step across nodes */
    int gpus_per_node;
    /* achieved-efficiency parameters (calibration replaces these) */
    double gemm_eff;        /* fraction of peak_flops reached by a large GEMM */
    double gemm_half_flops; /* FLOPs at which a GEMM reaches half its peak efficiency */
    double gemm_lat_s;      /* s, GEMM pipeline fill/drain on top of launch_s (added field) */
    double train_eff;       /* fraction of peak_flops a training step's GEMMs reach
                             * (cost_train_fwd; 0, absent: gemm_eff) */
    double mem_eff;         /* fraction of hbm_bw reached by streaming kernels */
    double attn_eff;        /* fraction of peak_flops reached by prefill attention */
    int attn_fa_version;    /* 2 or 3: prefill/chunk attention efficiency by length from
                             * FlashAttention-2's or -3's published H100 table
                             * (models/cost.c); 0 (absent): attn_eff for every length;
                             * a rollout engine may run another (rollout.attn) */
    int attn_fa3;           /* 1: FlashAttention-3 runs on this GPU (Hopper), so a rollout
                             * engine may select it (rollout.attn = fa3); 0: it does not;
                             * absent: 1 exactly when attn_fa_version is 3 */
    double launch_s;        /* fixed cost per kernel launch, s */
    /* per-row floor of the elementwise kernels (one thread block works through
     * one row): bytes/s one row streams at, per kernel class in the order of
     * cost_kernel_kind (add, act, rope, norm, gather); 0 (absent): no floor */
    double ew_row_bw[5];
    int tile_m, tile_n;     /* GEMM output tile (rows x columns) of the one kernel priced
                             * when gemm_tiles is absent */
    /* the GEMM kernels cuBLAS picks among (models/cost.c gemm_time): each an
     * output tile of m rows (tokens) x n columns with its compute efficiency
     * relative to gemm_eff (or train_eff); a GEMM costs as much as the fastest
     * of them; n_gemm_tiles 0 (key absent): one tile_m x tile_n kernel at 1 */
    int n_gemm_tiles;
    hw_gemm_tile gemm_tiles[HW_GEMM_TILES_MAX];
    double gemm_splitk_bytes; /* bytes per output element and K slice a split-K kernel moves
                               * through HBM to reduce its partial sums (0: free) */
    double gemm_mix;        /* fraction of the shorter of a GEMM's compute and memory sides
                             * not hidden behind the longer (0: the longer alone) */
    /* memory-bound (skinny, decode-sized) GEMMs stream their operands at
     * hbm_bw * gemm_mem_eff after launch_s + gemm_mem_lat_s + gemm_mem_fill_s *
     * bytes / (bytes + gemm_mem_fill_bytes); defaults (absent keys) give the
     * compute side's terms: gemm_mem_eff 0 (use mem_eff), gemm_mem_lat_s < 0
     * (use gemm_lat_s), gemm_mem_fill_s 0 */
    double gemm_mem_eff;    /* fraction of hbm_bw for GEMM operand streaming (0: mem_eff) */
    double gemm_mem_lat_s;  /* s, fill/drain of a memory-bound GEMM on top of launch_s (< 0: gemm_lat_s) */
    double gemm_mem_fill_s; /* s, extra fill that grows with the bytes streamed, to its limit */
    double gemm_mem_fill_bytes; /* bytes at which half of gemm_mem_fill_s is paid */
    int sms;                /* streaming multiprocessors (waves = tiles / sms) */
    double l2_bytes;        /* L2 cache, bytes (elementwise kernels: working sets that fit
                             * run faster, models/cost.c); 0 (absent): not modelled */
    double ar_eff;          /* fraction of link bandwidth reached by all-reduce */
    double coll_lat_s;      /* s, fixed cost of one collective call (launch, sync) (added field) */
    double coll_lat_graph_s;/* s, the same for NCCL replayed in a CUDA graph (< 0: coll_lat_s) */
    double car_lat_s;       /* s, one custom all-reduce of a small message (vLLM/SGLang) */
    double car_max_bytes;   /* bytes, largest message the custom all-reduce takes (0: none) */
    /* host side of an inference engine (models/cost_host.c) */
    double eager_launch_s;  /* s, host time to launch one kernel outside a CUDA graph */
    double sched_s;         /* s, scheduler CPU time per engine step */
    double sched_req_s;     /* s, scheduler CPU time per running request per step */
    /* host of a node, for a trainer that offloads its states (sim/rlstep_mem.c) */
    double pcie_bw;         /* bytes/s per direction between one GPU and host memory */
    double host_mem_bw;     /* bytes/s, a node's CPU memory bandwidth (CPU optimizer step) */
    double host_bytes;      /* bytes of host memory per node */
    char calibration[128];  /* where the efficiency values came from */
} hw_desc;

/* Loads "h100", "h200" (models/hw/<name>.ini) or a path: the INI's own
 * parameters, no calibration (hw_load() in models/hw_calib.h applies one).
 * Every key is required except the efficiency ones, which have defaults;
 * unknown keys and out-of-range values are errors naming file, line and key.
 * Returns 0 or -1. */
int hw_load_ini(const char *name, hw_desc *hw, ts_err *e);

/* hw_load_ini(), also copying the path of the INI read into path (n bytes;
 * HW_PATH_SZ is always enough).  Returns 0 or -1. */
#define HW_PATH_SZ 4096
int hw_load_ini_path(const char *name, hw_desc *hw, char *path, size_t n, ts_err *e);

/* Stem of a path into buf (n bytes, cut to fit): "models/hw/h100.ini" ->
 * "h100".  Cannot fail. */
void hw_path_stem(const char *path, char *buf, size_t n);

typedef struct llm_desc {
    char name[64];
    int layers;
    int hidden;             /* d_model */
    int heads;              /* query heads */
    int kv_heads;           /* key/value heads (GQA) */
    int head_dim;
    int ffn;                /* intermediate size */
    int vocab;
    int tied;               /* 1: LM head shares the embedding */
    int gated;              /* 1: SwiGLU (gate+up), 0: plain MLP */
    int qkv_bias;           /* 1: QKV projections have bias (Qwen2) */
} llm_desc;

/* Loads "qwen2.5-7b" (models/llm/<name>.ini) or a path.  Same error rules. */
int llm_load(const char *name, llm_desc *m, ts_err *e);

/* Parameter count (embedding counted once when tied). */
double llm_params(const llm_desc *m);

#endif
