/*
 * Collective communication times over a two-level topology: NVLink inside a
 * node (nvlink_bw per GPU per direction through the NVSwitches), one NIC per
 * GPU across nodes (nic_bw).  Each collective is latency + bytes / bandwidth
 * (alpha-beta) with the byte counts of NCCL's ring algorithms:
 *
 *   all-reduce      2 (n-1) steps, 2 (n-1)/n * bytes through each GPU's link
 *   all-gather      (n-1) steps,   (n-1)/n * output bytes
 *   reduce-scatter  (n-1) steps,   (n-1)/n * input bytes
 *   all-to-all      one round,     (n-1)/n * bytes (the off-node share on the NIC)
 *
 * A group of n <= gpus_per_node GPUs stays on NVLink.  A larger group crosses
 * nodes: with one NIC per GPU (rail-optimized, as on DGX H100) every ring
 * channel crosses the NIC, so the NIC is the bottleneck for the bandwidth
 * term, while the latency term counts the intra-node steps at nvlink_lat and
 * the inter-node ones at nic_lat, and every call pays coll_lat_s once (kernel
 * launch and the peers' synchronization; Vidur's all-reduce times, taken
 * through torch.distributed, show ~20 us of it at every size).  Bandwidth
 * terms are scaled by ar_eff, the bus efficiency NCCL reaches.  ar_eff,
 * nvlink_lat and coll_lat_s are fitted to Vidur's H100 DGX all-reduce
 * measurements (models/hw/h100.ini).
 *
 * Inside an inference engine's CUDA graph (comm_*_graph) the per-call cost
 * is smaller: NCCL's host-side launch and the peers' handshake through
 * torch.distributed are captured once (coll_lat_graph_s), and messages up to
 * car_max_bytes inside a node take the engine's custom all-reduce (vLLM's
 * and SGLang's one/two-shot kernels over NVLink peer memory: car_lat_s, no
 * ring hops).  Outside a graph the same engine still takes its custom
 * all-reduce for small messages (comm_allreduce_eager_car): SGLang's
 * GroupCoordinator.all_reduce picks it whenever should_custom_ar() accepts
 * the message, captured or not, and the uncaptured call first copies the
 * input into the registered buffer (custom_all_reduce.py: "outside of cuda
 * graph context, custom allreduce incurs a cost of cudaMemcpy"; vLLM's has
 * the same path).  The copy is priced as one streaming kernel (launch_s +
 * read and write at mem_eff x HBM); NCCL's eager call (coll_lat_s) stays
 * for larger messages and for the logits all-gather.
 * Sources are in models/hw/h100.ini.  Pure functions of their arguments,
 * seconds, cannot fail; 0 for n <= 1 or no bytes.
 */
#include "models/comm.h"

typedef struct topo {
    double bw;     /* bottleneck link bytes/s, after ar_eff */
    double lat_intra, lat_inter;
    int local;     /* GPUs per node in the group */
    int nodes;
} topo;

static topo topo_of(const hw_desc *hw, int n)
{
    topo t;
    int gpn = hw->gpus_per_node > 0 ? hw->gpus_per_node : 1;
    if (n <= gpn) {
        t.bw = hw->nvlink_bw * hw->ar_eff;
        t.local = n;
        t.nodes = 1;
    } else {
        t.bw = hw->nic_bw * hw->ar_eff;
        t.local = gpn;
        t.nodes = (n + gpn - 1) / gpn;
    }
    t.lat_intra = hw->nvlink_lat;
    t.lat_inter = hw->nic_lat;
    return t;
}

/* Latency of a ring pass over the group: (local-1) NVLink hops per node and
 * (nodes-1) NIC hops, or n-1 hops in all. */
static double ring_lat(const topo *t)
{
    return (t->local - 1) * t->lat_intra + (t->nodes - 1) * t->lat_inter;
}

double comm_allreduce(const hw_desc *hw, double bytes, int n)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    topo t = topo_of(hw, n);
    return hw->coll_lat_s + 2.0 * ring_lat(&t) + 2.0 * (n - 1) / n * bytes / t.bw;
}

double comm_allreduce_spread(const hw_desc *hw, double bytes, int n, int nodes)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    if (nodes < 1)
        nodes = 1;
    if (nodes > n)
        nodes = n;
    topo t;
    t.bw = (nodes > 1 ? hw->nic_bw : hw->nvlink_bw) * hw->ar_eff;
    t.local = (n + nodes - 1) / nodes;
    t.nodes = nodes;
    t.lat_intra = hw->nvlink_lat;
    t.lat_inter = hw->nic_lat;
    return hw->coll_lat_s + 2.0 * ring_lat(&t) + 2.0 * (n - 1) / n * bytes / t.bw;
}

double comm_allgather(const hw_desc *hw, double bytes_out, int n)
{
    if (n <= 1 || bytes_out <= 0)
        return 0.0;
    topo t = topo_of(hw, n);
    return hw->coll_lat_s + ring_lat(&t) + (double)(n - 1) / n * bytes_out / t.bw;
}

/* Per-call latency of NCCL inside a CUDA graph. */
static double graph_lat(const hw_desc *hw)
{
    return hw->coll_lat_graph_s >= 0 ? hw->coll_lat_graph_s : hw->coll_lat_s;
}

/* 1 when a message of `bytes` over n GPUs takes the custom all-reduce. */
static int custom_ar(const hw_desc *hw, double bytes, int n)
{
    return hw->car_max_bytes > 0 && bytes <= hw->car_max_bytes && n <= hw->gpus_per_node;
}

double comm_allreduce_graph(const hw_desc *hw, double bytes, int n)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    topo t = topo_of(hw, n);
    double bw = 2.0 * (n - 1) / n * bytes / t.bw;
    if (custom_ar(hw, bytes, n))
        return hw->car_lat_s + bw;
    return graph_lat(hw) + 2.0 * ring_lat(&t) + bw;
}

double comm_allreduce_eager_car(const hw_desc *hw, double bytes, int n)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    if (!custom_ar(hw, bytes, n))
        return comm_allreduce(hw, bytes, n);
    topo t = topo_of(hw, n);
    double copy = hw->launch_s + 2.0 * bytes / (hw->hbm_bw * hw->mem_eff);
    return copy + hw->car_lat_s + 2.0 * (n - 1) / n * bytes / t.bw;
}

double comm_allgather_graph(const hw_desc *hw, double bytes_out, int n)
{
    if (n <= 1 || bytes_out <= 0)
        return 0.0;
    topo t = topo_of(hw, n);
    return graph_lat(hw) + ring_lat(&t) + (double)(n - 1) / n * bytes_out / t.bw;
}

double comm_reduce_scatter(const hw_desc *hw, double bytes_in, int n)
{
    return comm_allgather(hw, bytes_in, n);
}

double comm_alltoall(const hw_desc *hw, double bytes, int n)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    topo t = topo_of(hw, n);
    if (t.nodes == 1)
        return hw->coll_lat_s + t.lat_intra + (double)(n - 1) / n * bytes / t.bw;
    /* off-node share through the NIC, on-node share over NVLink, concurrently */
    double off = (double)(n - t.local) / n * bytes / t.bw;
    double on = (double)(t.local - 1) / n * bytes / (hw->nvlink_bw * hw->ar_eff);
    return hw->coll_lat_s + t.lat_inter + (off > on ? off : on);
}

double comm_p2p(const hw_desc *hw, double bytes, int intra)
{
    if (bytes <= 0)
        return 0.0;
    if (intra)
        return hw->coll_lat_s + hw->nvlink_lat + bytes / (hw->nvlink_bw * hw->ar_eff);
    return hw->coll_lat_s + hw->nic_lat + bytes / (hw->nic_bw * hw->ar_eff);
}

double comm_broadcast(const hw_desc *hw, double bytes, int n)
{
    if (n <= 1 || bytes <= 0)
        return 0.0;
    /* pipelined ring broadcast: every byte crosses each link once */
    topo t = topo_of(hw, n);
    return hw->coll_lat_s + ring_lat(&t) + bytes / t.bw;
}
