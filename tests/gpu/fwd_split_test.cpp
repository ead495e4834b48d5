// Split-KV on the Hopper forward (SplitConfig kernels + the combine) vs the float64 reference, in
// fwd_sm90_test.cpp's style (fwd_case.h: inputs drawn fresh, outputs poisoned, every element
// checked with FA3's rule, two runs bitwise equal): forced split counts 2/3/7 and more splits than
// key blocks (splits that see no key), s_q 1/4/17/113 against s_k 1/17/4097 and 16k+, GQA 1/4/8
// (packed and not), causal (bottom-right), local, softcap, varlen with empty sequences, seqused,
// the heuristic (num_splits 0), CUDA-graph capture and replay, and proof that the split path ran;
// the merge inside thread-block clusters against the reference and bitwise against the combine kernel;
// d_qk 192 with d_v 128; narrow (swapped) decode tiles against the 64-row tile's path.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/split_forward.h"
#include "fwd_case.h"
#include "workspace_high_water.h"

namespace fastattn::gputest {
namespace {

class Sm90FwdSplit : public HopperTest {};

FwdCase split_case(int sq, int sk, int hq, int hkv, int splits) {
  FwdCase c;
  c.sq = sq;
  c.sk = sk;
  c.hq = hq;
  c.hkv = hkv;
  c.num_splits = splits;
  return c;
}

TEST_F(Sm90FwdSplit, ForcedCountsAndOddLengths) {
  const int gqa[3][2] = {{2, 2}, {8, 2}, {8, 1}};  // GQA 1, 4 (packed when s_q <= 64), 8
  int i = 0;
  for (int splits : {2, 3, 7, 300})  // 300: more splits than key blocks (4097 keys: 33)
    for (int sq : {1, 4, 17, 113})
      for (int sk : {1, 17, 4097}) {
        FwdCase c = split_case(sq, sk, gqa[i % 3][0], gqa[i % 3][1], splits);
        c.batch = 2;
        ++i;
        run_fwd_case(c);
      }
}

// Decode shapes with 16k+ keys: h 32/8 (packed), s_q 1, 4 and 17, forced and heuristic counts.
TEST_F(Sm90FwdSplit, LongKeys) {
  for (int sq : {1, 4, 17})
    for (int splits : {0, 13}) {
      FwdCase c = split_case(sq, 16411, 32, 8, splits);
      run_fwd_case(c);
    }
  FwdCase f16 = split_case(1, 20000, 32, 8, 0);
  f16.dtype = DType::F16;
  f16.batch = 2;
  run_fwd_case(f16);
}

// Masks: causal (bottom-right; s_q > s_k leaves rows with no key), local windows, softcap; s_q
// above a tile (several m-blocks, unpacked) and short packed rows.
TEST_F(Sm90FwdSplit, MasksAndSoftcap) {
  for (int splits : {3, 7})
    for (auto [sq, sk] : {std::pair{113, 4097}, std::pair{300, 1000}, std::pair{4, 4097}, std::pair{700, 300}}) {
      FwdCase c = split_case(sq, sk, 8, 2, splits);
      c.causal = true;
      run_fwd_case(c);
      c.causal = false;
      c.wl = 100;
      c.wr = 20;
      run_fwd_case(c);
      c.wl = 300;
      c.wr = 0;
      c.softcap = 30.f;
      run_fwd_case(c);
    }
  FwdCase rising = split_case(300, 8193, 1, 1, 5);  // running max rising across blocks and splits
  rising.key_ramp = 20.f;
  rising.causal = true;
  run_fwd_case(rising);
}

TEST_F(Sm90FwdSplit, VarlenAndSeqused) {
  for (int splits : {0, 4, 50}) {
    FwdCase v = split_case(0, 0, 8, 2, splits);
    v.lens_q = {0, 17, 1, 113, 4};
    v.lens_k = {50, 0, 4097, 300, 17};
    run_fwd_case(v);
    v.causal = true;
    run_fwd_case(v);
    v.causal = false;
    v.used_k = {50, 0, 1000, 1, 17};
    v.used_q = {0, 17, 1, 100, 2};
    run_fwd_case(v);
    v.nan_past = NanPast::All;  // NaN past seqused: partial rows the combine never reads
    run_fwd_case(v);

    FwdCase u = split_case(4, 4097, 32, 8, splits);  // the KV-cache layout: fixed length, seqused_k
    u.batch = 3;
    u.used_k = {4097, 0, 17};
    run_fwd_case(u);
    u.causal = true;
    run_fwd_case(u);
    u.nan_past = NanPast::All;
    run_fwd_case(u);
  }
}

// num_splits 0 on decode and short-prefill shapes: the heuristic splits where the grid is small.
TEST_F(Sm90FwdSplit, Heuristic) {
  for (int batch : {1, 3, 16})
    for (int sq : {1, 16}) {
      FwdCase c = split_case(sq, 4097, 32, 8, 0);
      c.batch = batch;
      run_fwd_case(c);
    }
  FwdCase b2 = split_case(1, 8193, 32, 8, 0);  // b2, 65 key blocks (the last one partial)
  b2.batch = 2;
  run_fwd_case(b2);
  FwdCase prefill = split_case(300, 2000, 4, 4, 0);
  prefill.causal = true;
  run_fwd_case(prefill);
}

TEST_F(Sm90FwdSplit, GraphCaptureAndReplay) {
  for (int splits : {0, 5}) {
    FwdCase c = split_case(1, 4097, 32, 8, splits);
    c.batch = 2;
    c.graph = true;
    run_fwd_case(c);
  }
  FwdCase v = split_case(0, 0, 8, 2, 3);
  v.lens_q = {1, 0, 4};
  v.lens_k = {4097, 17, 0};
  v.graph = true;
  run_fwd_case(v);
  cuda_backend::set_cluster_merge_allowed(false);  // varlen rows merge in clusters: the combine kernel's replay too
  run_fwd_case(v);
  cuda_backend::set_cluster_merge_allowed(true);
}

// The merge inside thread-block clusters (sm90/fwd/cluster_merge.cuh; sched/split_plan.h:
// merge_in_cluster): decode shapes with splits <= 8 against the reference and bitwise against the
// combine kernel. GQA packs of 4, 8, 16 heads (at s_q 4: 64 stored rows, the rule's edge at 2 and 8
// splits; at 3 and 5 they round up past 64 and keep the combine kernel) and 3;
// 32 heads at s_q 4 store 128 rows and keep the combine kernel. s_k 1 and 17: splits that see no key.
TEST_F(Sm90FwdSplit, ClusterMergeDecode) {
  const int packs[5][2] = {{32, 8}, {8, 1}, {16, 1}, {6, 2}, {32, 1}};
  int i = 0;
  for (int splits : {2, 3, 5, 8})
    for (int sq : {1, 4})
      for (int sk : {1, 17, 113, 4097}) {
        FwdCase c = split_case(sq, sk, packs[i % 5][0], packs[i % 5][1], splits);
        c.batch = 1 + i % 3;
        c.causal = sq == 4 && i % 2 == 0;
        c.dtype = i % 7 == 3 ? DType::F16 : DType::BF16;
        c.same_bits_as_combine_kernel = true;
        ++i;
        run_fwd_case(c);
      }
}

// NaN in k inside the used keys: a split whose scores meet it has lse NaN, and both merges (the combine kernel,
// the cluster's) make the row NaN, out and lse, as the unsplit call and the reference do; a merge that dropped
// the split (its former max / weight rule) gave the other splits' mix. Decode (GQA 4 packed, cluster merge,
// bitwise the combine kernel's) and s_q 113 (combine kernel), forced counts and the heuristic's.
TEST_F(Sm90FwdSplit, NanInUsedKeys) {
  for (int splits : {0, 3, 8}) {
    FwdCase c = split_case(1, 4097, 32, 8, splits);
    c.batch = 2;
    c.nan_keys = 1;
    c.same_bits_as_combine_kernel = true;
    run_fwd_case(c);
    FwdCase m = split_case(113, 1000, 8, 2, splits == 0 ? 5 : splits);
    m.batch = 2;
    m.nan_keys = 1;
    run_fwd_case(m);
  }
}

// The KV-cache layout (fixed length, seqused_k 0 / 1 / full) and the heuristic's count.
TEST_F(Sm90FwdSplit, ClusterMergeSeqused) {
  for (int splits : {0, 8, 3}) {
    FwdCase u = split_case(1, 4097, 32, 8, splits);
    u.batch = 3;
    u.used_k = {0, 1, 4097};
    u.same_bits_as_combine_kernel = true;
    run_fwd_case(u);
    u.sq = 4;
    u.causal = true;
    run_fwd_case(u);
    u.nan_past = NanPast::All;  // NaN in k, v past seqused_k
    run_fwd_case(u);
  }
}

// The pushes' slots (cluster_partials.cuh: row t to CTA t % splits, slot t - t % splits + split)
// at their edges: GQA 16 at s_q 3 stores 63 rows (3 and 7 splits: the last owner's group ends at
// slot 62; 5 splits would need 65 and keep the combine kernel), s_q 4 stores 64 (2 splits: an owner
// merges 32 rows, 4 a warp; 8 splits), s_q 2 at 5 and 6 splits (32 rows: owners merge 6-7 and 5-6
// rows, the last group partly stored; CTAs with no row to merge: ClusterMergeDecode).
// s_k 1 / 17 / 113 / 4097 (splits that see no key), seqused 0 / 1 / full, f16 and bf16.
TEST_F(Sm90FwdSplit, ClusterMergeSlotGroups) {
  const int shapes[6][2] = {{3, 3}, {3, 7}, {4, 2}, {4, 8}, {2, 5}, {2, 6}};  // s_q, splits
  int i = 0;
  for (const auto& sh : shapes)
    for (int sk : {1, 17, 113, 4097}) {
      FwdCase c = split_case(sh[0], sk, 32, 2, sh[1]);
      c.batch = 1 + i % 3;
      if (sk == 4097 && c.batch == 3) c.used_k = {0, 1, 4097};
      c.causal = i % 2 == 1;
      c.dtype = i % 5 == 2 ? DType::F16 : DType::BF16;
      c.same_bits_as_combine_kernel = true;
      ++i;
      run_fwd_case(c);
    }
}

TEST_F(Sm90FwdSplit, ClusterMergeGraphReplay) {
  for (int splits : {0, 4}) {
    FwdCase c = split_case(1, 16411, 32, 8, splits);
    c.batch = splits == 0 ? 1 : 2;
    c.graph = true;
    run_fwd_case(c);
  }
}

// Head dims other than 128 (each dim's default config as a SplitConfig): 64 (192-key tiles), 256
// (one Q buffer, 80-key tiles); 96 and 192 apart, so that a device run built for 64;128;256 can
// filter them out.
void split_head_dim(int d, int dv = 0) {
  FwdCase c = split_case(17, 1000, 8, 2, 3);
  c.d = d;
  c.dv = dv;
  c.causal = true;
  run_fwd_case(c);
  c = split_case(1, 4097, 4, 4, 7);
  c.d = d;
  c.dv = dv;
  run_fwd_case(c);
  c = split_case(4, 3000, 8, 2, 0);
  c.d = d;
  c.dv = dv;
  c.dtype = DType::F16;
  run_fwd_case(c);
}

TEST_F(Sm90FwdSplit, HeadDims64And256) {
  split_head_dim(64);
  split_head_dim(256);
}

TEST_F(Sm90FwdSplit, HeadDims96And192) {
  split_head_dim(96);
  split_head_dim(192);
}

// d_qk 192 with d_v 128 (partials of 128 columns), and a b1 decode at the heuristic's count with
// an empty split and a graph replay.
TEST_F(Sm90FwdSplit, NarrowV192x128) {
  split_head_dim(192, 128);
  FwdCase c = split_case(1, 8193, 32, 8, 0);
  c.d = 192;
  c.dv = 128;
  c.graph = true;
  run_fwd_case(c);
  c = split_case(1, 100, 8, 2, 5);  // 100 keys: one block, four splits see none
  c.d = 192;
  c.dv = 128;
  run_fwd_case(c);
}

// Varlen q and out with token rows past cu_seqlens_q[batch] (a tensor larger than its sequences):
// checked, the call is refused; unchecked (check_index_arrays off, as under CUDA graphs) no
// sequence owns them, the split kernel writes no partial for them, and the merge must leave them
// as they are (the unsplit kernel never touches them), not merge unwritten partials into them: the
// cluster merge (these unpacked rows start at tile row 0) and the combine kernel.
TEST_F(Sm90FwdSplit, VarlenRowsOutsideEverySequenceUntouched) {
  const int hq = 8, hkv = 2, d = 128, tail = 7;
  const std::vector<int32_t> cu_q = {0, 1, 5}, cu_k = {0, 3000, 4097};
  const int64_t rows_q = cu_q.back() + tail, rows_k = cu_k.back();
  DeviceBuffer q(size_t(rows_q) * hq * d * 2), k(size_t(rows_k) * hkv * d * 2), v(k.bytes()), o(q.bytes());
  DeviceBuffer lse(size_t(hq) * rows_q * 4), cq(cu_q.size() * 4), ck(cu_k.size() * 4);
  for (const DeviceBuffer* x : {&q, &k, &v}) FA_CUDA_OK(cudaMemset(x->get(), 0x3C, x->bytes()));
  cq.upload(cu_q.data());
  ck.upload(cu_k.data());
  for (int run = 0; run < 3; ++run) {
    const int splits = run == 0 ? 1 : 6;
    cuda_backend::set_cluster_merge_allowed(run != 2);
    SCOPED_TRACE("splits " + std::to_string(splits) + (run == 2 ? ", combine kernel" : ""));
    o.poison();
    lse.poison();
    AttnArgs a;
    a.q = make_tensor(q.get(), DType::BF16, {rows_q, hq, d}, Device::CUDA);
    a.k = make_tensor(k.get(), DType::BF16, {rows_k, hkv, d}, Device::CUDA);
    a.v = make_tensor(v.get(), DType::BF16, {rows_k, hkv, d}, Device::CUDA);
    a.out = make_tensor(o.get(), DType::BF16, {rows_q, hq, d}, Device::CUDA);
    a.lse = make_tensor(lse.get(), DType::F32, {hq, rows_q}, Device::CUDA);
    a.cu_seqlens_q = {static_cast<const int32_t*>(cq.get()), int64_t(cu_q.size())};
    a.cu_seqlens_k = {static_cast<const int32_t*>(ck.get()), int64_t(cu_k.size())};
    a.max_seqlen_q = 4;
    a.max_seqlen_k = 3000;
    a.num_splits = splits;
    Status st = forward(a, nullptr);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message.find("cu_seqlens_q"), std::string::npos) << st.message;
    a.check_index_arrays = false;
    st = forward(a, nullptr);
    ASSERT_TRUE(st.ok()) << st.message;
    FA_CUDA_OK(cudaDeviceSynchronize());
    std::vector<uint16_t> out(size_t(rows_q) * hq * d);
    o.download(out.data());
    size_t inside_poisoned = 0, tail_written = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const bool in_tail = int64_t(i / (size_t(hq) * d)) >= cu_q.back();
      (in_tail ? tail_written : inside_poisoned) += in_tail ? out[i] != 0xFFFF : out[i] == 0xFFFF;
    }
    EXPECT_EQ(inside_poisoned, 0u) << "rows of a sequence not written";
    EXPECT_EQ(tail_written, 0u) << "rows outside every sequence were written";
  }
  cuda_backend::set_cluster_merge_allowed(true);
}

// The workspace high-water mark of one split call (b 2, s_k 1000, 1 KV head, d 128 unless given; s_q x hq rows
// a KV head, zero inputs): the combine kernel's partials, or nothing where the splits merge in clusters.
uint64_t split_workspace_high(DType dt, int splits, int sq = 4, int hq = 4, int d = 128, bool causal = false) {
  const int b = 2, sk = 1000, hkv = 1;
  DeviceBuffer q(size_t(b) * sq * hq * d * 2), k(size_t(b) * sk * hkv * d * 2), v(k.bytes()), o(q.bytes());
  for (const DeviceBuffer* x : {&q, &k, &v}) EXPECT_EQ(cudaMemset(x->get(), 0, x->bytes()), cudaSuccess);
  AttnArgs a;
  a.q = make_tensor(q.get(), dt, {b, sq, hq, d}, Device::CUDA);
  a.k = make_tensor(k.get(), dt, {b, sk, hkv, d}, Device::CUDA);
  a.v = make_tensor(v.get(), dt, {b, sk, hkv, d}, Device::CUDA);
  a.out = make_tensor(o.get(), dt, {b, sq, hq, d}, Device::CUDA);
  a.num_splits = splits;
  a.causal = causal;
  return workspace_high_water([&] { return forward(a, nullptr); });
}

// The split path really runs: a split call merged by the combine kernel takes its partials from
// fastattn's workspace pool (its high-water mark covers splits x rows x (d + 1) floats); an
// unsplit one, and one merged in clusters, allocate nothing.
TEST_F(Sm90FwdSplit, SplitCallUsesTheWorkspace) {
  const uint64_t b = 2, d = 128;
  EXPECT_EQ(split_workspace_high(DType::BF16, 1), 0u);
  // This shape's plan merges in clusters (packed tiles of 16 rows, 2 clusters of 4): no workspace;
  // with the combine kernel the partials.
  EXPECT_EQ(split_workspace_high(DType::BF16, 4), 0u);
  // GQA 16: 63 stored rows fit 3 splits' slot groups (clusters); 64 would need 66 slots.
  EXPECT_EQ(split_workspace_high(DType::BF16, 3, 3, 16), 0u);
  EXPECT_GE(split_workspace_high(DType::BF16, 3, 4, 16), 3 * b * 16 * 4 * (d + 1) * 4);
  // Unpacked (MHA: one q head a KV head): s_q rows from tile row 0, clusters up to 64 rows (66 slots at 3 splits).
  EXPECT_EQ(split_workspace_high(DType::BF16, 4, 4, 1), 0u);
  EXPECT_EQ(split_workspace_high(DType::BF16, 4, 64, 1), 0u);
  EXPECT_GE(split_workspace_high(DType::BF16, 3, 64, 1), 3 * b * 64 * (d + 1) * 4);
  EXPECT_GE(split_workspace_high(DType::BF16, 4, 65, 1), 4 * b * 65 * (d + 1) * 4);
  EXPECT_EQ(split_workspace_high(DType::BF16, 4, 4, 1, 128, true), 0u);  // causal
  EXPECT_EQ(split_workspace_high(DType::BF16, 4, 17, 1, 64), 0u);        // d 64
  EXPECT_GE(split_workspace_high(DType::BF16, 4, 4, 1, 256), 4 * b * 4 * 257 * 4);  // one Q buffer: no slots
  cuda_backend::set_cluster_merge_allowed(false);
  const uint64_t rows = b * 4 * 4;
  EXPECT_GE(split_workspace_high(DType::BF16, 4), 4 * rows * (d + 1) * 4);
  cuda_backend::set_cluster_merge_allowed(true);
}

// Unpacked tiles (MHA, varlen) merged in clusters: plan_splits keeps the rows of a tile space of one m-block at
// tile row 0, so tiles of at most 64 query rows (rounded up to the splits) fit the slots. Against the reference
// and bitwise the combine kernel's, at d 64 / 128 (d 128 at s_q <= 8: the narrow tile) and d 256 (one Q buffer:
// the combine kernel either way), s_q 1 / 5 / 17 / 64 (64 at 3 splits: 66 slots, the combine kernel), causal or
// not at each split count, s_k 113 / 4097, varlen with empty sequences and with seqused_q. That the merge ran in
// clusters (no workspace): SplitCallUsesTheWorkspace.
TEST_F(Sm90FwdSplit, ClusterMergeUnpacked) {
  int i = 0;
  for (int d : {64, 128, 256})
    for (int sq : {1, 5, 17, 64})
      for (int splits : {2, 3, 8}) {
        FwdCase c = split_case(sq, i % 2 == 1 ? 4097 : 113, 4, 4, splits);
        c.d = d;
        c.batch = 1 + (i / 2) % 3;
        c.causal = (i / 3) % 2 == 1;
        c.dtype = i % 5 == 2 ? DType::F16 : DType::BF16;
        c.same_bits_as_combine_kernel = true;
        ++i;
        run_fwd_case(c);
      }
  for (bool causal : {false, true}) {
    FwdCase v = split_case(0, 0, 4, 4, 4);
    v.lens_q = {17, 0, 64, 3};
    v.lens_k = {4097, 17, 0, 300};
    v.causal = causal;
    v.same_bits_as_combine_kernel = true;
    run_fwd_case(v);
  }
  FwdCase u = split_case(0, 0, 4, 4, 4);  // seqused_q: rows past it come out exactly 0 from the merge
  u.lens_q = {17, 0, 64, 3};
  u.lens_k = {4097, 17, 0, 300};
  u.used_q = {5, 0, 40, 3};
  u.same_bits_as_combine_kernel = true;
  run_fwd_case(u);
}

// Both dtypes merge in clusters whichever asks first for a split count: the cluster occupancy query is per
// kernel (launch.cuh clusters_at_once). With one flag per config, fp16's query set the smem attribute of
// its own kernel only; bf16's first query of another count then failed and that count stayed on the combine
// kernel for the process. The order matters only in a fresh process (ctest runs each test in its own): fp16
// asks first for 5, bf16 first for 6.
TEST_F(Sm90FwdSplit, ClusterMergeForBothDtypes) {
  EXPECT_EQ(split_workspace_high(DType::F16, 5), 0u);
  EXPECT_EQ(split_workspace_high(DType::BF16, 6), 0u);
  EXPECT_EQ(split_workspace_high(DType::BF16, 5), 0u);
  EXPECT_EQ(split_workspace_high(DType::F16, 6), 0u);
}

// Narrow tiles (sm90/fwd/narrow_rows.cuh; the rule: sched/split_plan.h narrow_rows_fit): split tiles of
// at most 8 stored rows run swapped (keys as the wgmma's M, the 8 rows as N), the two consumer warpgroups on
// alternate 64-key blocks. Every case runs twice against the reference, narrow tiles allowed and turned off
// (the 64-row tile): GQA packs of 4 and 8 heads at s_q 1 and of 2 heads at s_q 3 (7 stored rows), unpacked
// s_q 1-8 (MHA and varlen, causal or not: plan_splits keeps their rows at tile row 0), shapes past the rule
// (s_q 2 x 8 heads, s_q 9), splits of more than
// 2048 keys; keys 1, 17, 113, 4097 (a partial last block), splits that see no key, causal, windows, softcap, a
// rising max, a spike, NaN past seqused, varlen with empty sequences, both dtypes, the cluster merge and the
// combine kernel.
struct NarrowShape {
  int sq, hq, hkv;
};
void narrow_both_ways(FwdCase c) {
  run_fwd_case(c);
  cuda_backend::set_narrow_tiles_allowed(false);
  run_fwd_case(c);
  cuda_backend::set_narrow_tiles_allowed(true);
}

TEST_F(Sm90FwdSplit, NarrowTiles) {
  const NarrowShape shapes[] = {{1, 32, 8}, {1, 8, 1}, {3, 4, 2}, {1, 2, 2},
                                {8, 2, 2}, {5, 3, 3}, {2, 16, 2}, {9, 2, 2}};
  int i = 0;
  for (const NarrowShape& sh : shapes)
    for (int sk : {1, 17, 113, 4097})
      for (int splits : {0, 3, 8, 40}) {
        FwdCase c = split_case(sh.sq, sk, sh.hq, sh.hkv, splits);
        c.batch = 1 + i % 3;
        c.dtype = i % 5 == 2 ? DType::F16 : DType::BF16;
        c.causal = i % 4 == 1;
        if (i % 4 == 2) {
          c.wl = 100;
          c.wr = 0;
        }
        if (i % 4 == 3) c.softcap = 30.f;
        ++i;
        narrow_both_ways(c);
      }
  FwdCase rising = split_case(1, 8193, 32, 8, 4);  // the running max rising across blocks and halves
  rising.key_ramp = 20.f;
  narrow_both_ways(rising);
  FwdCase spike = split_case(1, 8193, 8, 1, 2);
  spike.key_spike = 30.f;
  narrow_both_ways(spike);
  FwdCase used = split_case(1, 4097, 32, 8, 5);  // the KV-cache layout: seqused_k, NaN past it
  used.batch = 3;
  used.used_k = {4097, 0, 65};
  used.nan_past = NanPast::All;
  narrow_both_ways(used);
  for (bool causal : {false, true}) {  // varlen (unpacked), rows from tile row 0
    FwdCase v = split_case(0, 0, 8, 2, 3);
    v.lens_q = {1, 0, 8, 3};
    v.lens_k = {4097, 17, 0, 300};
    v.causal = causal;
    narrow_both_ways(v);
  }
}

// A few small narrow-tile launches for the sanitizers (gpu-check's memcheck and racecheck): the cluster
// merge (GQA-4 pack, 3 splits), the combine kernel (12 splits), unpacked rows and varlen with an empty sequence
// (both merged in clusters, then by the combine kernel).
TEST_F(Sm90FwdSplit, NarrowTilesSmall) {
  FwdCase c = split_case(1, 300, 8, 2, 3);
  run_fwd_case(c);
  c.num_splits = 12;
  c.causal = true;
  run_fwd_case(c);
  FwdCase u = split_case(3, 130, 2, 2, 2);
  u.softcap = 30.f;
  run_fwd_case(u);
  FwdCase v = split_case(0, 0, 4, 2, 2);
  v.lens_q = {1, 2, 0};
  v.lens_k = {200, 0, 65};
  run_fwd_case(v);
  cuda_backend::set_cluster_merge_allowed(false);  // the unpacked rows through the combine kernel too
  run_fwd_case(u);
  run_fwd_case(v);
  cuda_backend::set_cluster_merge_allowed(true);
}

}  // namespace
}  // namespace fastattn::gputest
