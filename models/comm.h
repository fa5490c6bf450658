/*
 * Collective communication over a two-level topology: NVLink inside a node,
 * the NIC across nodes.  Latency + size/bandwidth (alpha-beta) with the ring
 * algorithms' byte counts.  Pure functions, s.
 */
#ifndef TS_COMM_H
#define TS_COMM_H

#include "models/hw.h"

/* Ring all-reduce of `bytes` per GPU over n GPUs (n <= gpus_per_node stays on
 * NVLink).  0 for n <= 1. */
double comm_allreduce(const hw_desc *hw, double bytes, int n);
/* The same over n GPUs spread evenly over `nodes` nodes (a strided group,
 * e.g. one GPU per node: HSDP's replicas of one shard); over the NICs when
 * nodes > 1.  0 for n <= 1. */
double comm_allreduce_spread(const hw_desc *hw, double bytes, int n, int nodes);
double comm_allgather(const hw_desc *hw, double bytes_out, int n);
/* The all-reduce and all-gather of an inference engine's step replayed from
 * a CUDA graph: a message of at most car_max_bytes inside one node takes the
 * engine's custom all-reduce (one kernel reading the peers' buffers over
 * NVLink: car_lat_s + the ring's bytes, no per-hop latency); anything else
 * is NCCL inside the graph (coll_lat_graph_s instead of coll_lat_s).  Keys
 * left out of the INI (car_max_bytes 0, coll_lat_graph_s < 0) give the eager
 * functions above exactly.  0 for n <= 1 or no bytes; cannot fail. */
double comm_allreduce_graph(const hw_desc *hw, double bytes, int n);
double comm_allgather_graph(const hw_desc *hw, double bytes_out, int n);
/* The all-reduce of an engine step run eagerly by an engine that has its
 * custom all-reduce (SGLang's and vLLM's take it outside CUDA graphs too):
 * a message the custom all-reduce takes (as comm_allreduce_graph) costs a
 * copy into its registered buffer (launch_s + 2 x bytes at mem_eff x
 * hbm_bw) plus car_lat_s and the ring's bytes; anything else is
 * comm_allreduce() (eager NCCL).  Without the car_* keys it is
 * comm_allreduce() exactly.  0 for n <= 1 or no bytes; cannot fail. */
double comm_allreduce_eager_car(const hw_desc *hw, double bytes, int n);
double comm_reduce_scatter(const hw_desc *hw, double bytes_in, int n);
/* All-to-all where every GPU holds `bytes` and sends (n-1)/n of it. */
double comm_alltoall(const hw_desc *hw, double bytes, int n);
/* Point-to-point send of `bytes` (same node when intra != 0). */
double comm_p2p(const hw_desc *hw, double bytes, int intra);
/* Broadcast of `bytes` from one GPU to n GPUs (weight sync). */
double comm_broadcast(const hw_desc *hw, double bytes, int n);

#endif
