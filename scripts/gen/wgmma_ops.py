#!/usr/bin/env python3
"""Generates src/cuda/sm90/prim/wgmma_ops.inc: one inline-PTX wrapper per wgmma shape we use.

wgmma takes its accumulator as N/2 separate registers, so each (N, A-source, operand majors, dtype)
needs its own asm statement; writing them by hand is error-prone, generating them is not. Run after
changing the use lists, and commit the output (the build does not need Python).

Operand majors (PTX imm-trans-a / imm-trans-b): "K" = the contraction dim is contiguous in smem
(trans 0), "MN" = M (for A) or N (for B) is contiguous (trans 1). RS takes A from registers, so
only B's major is a choice. The forward's wrappers keep their names and text (its SASS must not
change); other majors get a suffix naming them.
"""
import pathlib

K, MN = "K", "MN"

# Per use: (N, major A, major B) for SS, (N, major B) for RS.
SS_USES = {
    "forward S = Q K^T (N = kBlockN)": [(64, K, K), (80, K, K), (128, K, K), (192, K, K)],
    # d > 128 (split shape): each warpgroup takes 32 of the 64 query rows.
    "backward S^T = K Q^T, dP^T = V dO^T (N = query rows)": [(64, K, K), (32, K, K)],
    # A = the dS^T tile (q rows contiguous), B = the K tile (head-dim columns contiguous); N = the
    # warpgroup's share of the head dim (d 64: 32 + 32, d 96: 64 + 32, d 128: 64 + 64, d 192: 64 + 128,
    # d 256: 128 + 128).
    "backward dQ = dS K": [(32, MN, MN), (64, MN, MN), (128, MN, MN)],
    # d 128 with 80-row q-blocks: dQ^T = K^T dS^T, A = the K tile (head-dim rows contiguous: MN), B =
    # the dS tile stored q-major (keys contiguous: K); N = the 80 q rows.
    "backward dQ^T = K^T dS^T": [(80, MN, K)],
    # d 256 with 80 keys per CTA: S = Q K^T, dP = dO V^T not swapped, N = a warpgroup's 40 keys;
    # dV^T += dO^T P^T, dK^T += Q^T dS^T take (80, MN, K) above, dQ^T = K^T dS (64, MN, MN).
    "backward d 256 80-key S = Q K^T, dP = dO V^T": [(40, K, K)],
    # d > 128: A = the P^T / dS^T tile in smem (keys x query rows, K-major), B = dO / Q (N-major); N =
    # the warpgroup's share of the head dim (d 192: 128 + 64, d 256: 128 + 128).
    "backward d > 128 dV += P^T dO, dK += dS^T Q": [(128, K, MN), (64, K, MN)],
    # Narrow decode tiles (fwd/narrow_rows.cuh), swapped: S^T = K Q^T with A = the K tile (keys are M),
    # B = Q's first 8 rows; O^T += V^T P^T with A = the V tile read transposed (head-dim rows
    # contiguous: MN), B = P^T (8 rows x 64 keys, K-major). N = 8 query rows.
    "forward narrow S^T = K Q^T, O^T += V^T P^T (N = 8 query rows)": [(8, K, K), (8, MN, K)],
}
RS_USES = {
    "forward O += P V (N = head dim)": [(64, MN), (96, MN), (128, MN), (192, MN), (256, MN)],
    "backward dV += P^T dO, dK += dS^T Q (N = head dim)": [(64, MN), (96, MN), (128, MN)],
    "K-major B (primitive test; swap-AB variants)": [(64, K)],
    # S^T = K Q^T with K's A fragments in registers (BwdConfig::kKRegSteps; N = query rows: 64, 80, d 64's 128).
    "backward S^T = K Q^T, K from registers (N = query rows)": [(64, K), (80, K), (128, K)],
}
DTYPES = {"bf16": "__nv_bfloat16", "f16": "__half"}


def unique(uses):
    out = []
    for shapes in uses.values():
        for s in shapes:
            if s not in out:
                out.append(s)
    return out


def trans(major):
    return 1 if major == MN else 0


def ss_name(n, ma, mb, ptx_t):
    suffix = "" if (ma, mb) == (K, K) else f"_{ma.lower()}{mb.lower()}"
    return f"wgmma_ss_m64n{n}k16_{ptx_t}{suffix}"


def rs_name(n, mb, ptx_t):
    suffix = "" if mb == MN else "_kb"
    return f"wgmma_rs_m64n{n}k16_{ptx_t}{suffix}"


def acc_operands(n):
    return ", ".join(f'"+f"(d[{i}])' for i in range(n // 2))


def acc_list(n, first=0):
    return "{" + ", ".join(f"%{first + i}" for i in range(n // 2)) + "}"


def ss(n, ma, mb, ptx_t):
    r = n // 2
    name = ss_name(n, ma, mb, ptx_t)
    return f'''__device__ __forceinline__ void {name}(float (&d)[{r}], uint64_t desc_a,
                                                             uint64_t desc_b, int accumulate) {{
  asm volatile(
      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{r + 2}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_t}.{ptx_t} "
      "{acc_list(n)}, %{r}, %{r + 1}, p, 1, 1, {trans(ma)}, {trans(mb)};\\n}}\\n"
      : {acc_operands(n)}
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}}
'''


def rs(n, mb, ptx_t):
    r = n // 2
    name = rs_name(n, mb, ptx_t)
    return f'''__device__ __forceinline__ void {name}(float (&d)[{r}], const uint32_t (&a)[4],
                                                             uint64_t desc_b, int accumulate) {{
  asm volatile(
      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{r + 5}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_t}.{ptx_t} "
      "{acc_list(n)}, {{%{r}, %{r + 1}, %{r + 2}, %{r + 3}}}, %{r + 4}, p, 1, 1, {trans(mb)};\\n}}\\n"
      : {acc_operands(n)}
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(accumulate));
}}
'''


def major_enum(m):
    return "Major::K" if m == K else "Major::MN"


def dispatch_ss(shapes):
    out = []
    for ptx_t, ctype in DTYPES.items():
        for n, ma, mb in shapes:
            tail = "" if (ma, mb) == (K, K) else f", {major_enum(ma)}, {major_enum(mb)}"
            out.append(f"template <> struct WgmmaSS<{ctype}, {n}{tail}> {{\n"
                       f"  static __device__ __forceinline__ void run(float (&d)[{n // 2}], uint64_t a, uint64_t b, int acc) {{\n"
                       f"    {ss_name(n, ma, mb, ptx_t)}(d, a, b, acc);\n  }}\n}};\n")
    return "".join(out)


def dispatch_rs(shapes):
    out = []
    for ptx_t, ctype in DTYPES.items():
        for n, mb in shapes:
            tail = "" if mb == MN else f", {major_enum(mb)}"
            out.append(f"template <> struct WgmmaRS<{ctype}, {n}{tail}> {{\n"
                       f"  static __device__ __forceinline__ void run(float (&d)[{n // 2}], const uint32_t (&a)[4], uint64_t b, int acc) {{\n"
                       f"    {rs_name(n, mb, ptx_t)}(d, a, b, acc);\n  }}\n}};\n")
    return "".join(out)


def main():
    ss_shapes, rs_shapes = unique(SS_USES), unique(RS_USES)
    uses = "".join(f"//   SS {k}: {', '.join(f'N{n} A {a} B {b}' for n, a, b in v)}\n" for k, v in SS_USES.items())
    uses += "".join(f"//   RS {k}: {', '.join(f'N{n} B {b}' for n, b in v)}\n" for k, v in RS_USES.items())
    parts = ["// Generated by scripts/gen/wgmma_ops.py; do not edit by hand.\n"
             "// Each wrapper issues one asynchronous m64nNk16 warpgroup MMA with fp32 accumulators.\n"
             "// SS: A and B from shared memory (K-major unless the name says otherwise: _mnmn = both\n"
             "// MN-major, _kmn = A K-major, B MN-major). RS: A from registers, B N-major (tnspB=1; _kb: K-major).\n"
             "// Uses:\n" + uses + "\n"]
    for ptx_t in DTYPES:
        parts += [ss(n, ma, mb, ptx_t) for n, ma, mb in ss_shapes]
        parts += [rs(n, mb, ptx_t) for n, mb in rs_shapes]
    parts.append("\n// Operand major of a wgmma shared-memory operand: K = contraction dim contiguous.\n"
                 "enum class Major { K, MN };\n"
                 "template <class T, int N, Major A = Major::K, Major B = Major::K> struct WgmmaSS;\n"
                 "template <class T, int N, Major B = Major::MN> struct WgmmaRS;\n\n")
    parts.append(dispatch_ss(ss_shapes))
    parts.append(dispatch_rs(rs_shapes))
    dst = pathlib.Path(__file__).resolve().parents[2] / "src/cuda/sm90/prim/wgmma_ops.inc"
    dst.write_text("".join(parts))
    print("wrote", dst)


if __name__ == "__main__":
    main()
