"""GPU kernels through torch CUDA tensors. Skipped with the reason when there is no GPU, and
per test when the build has no kernel for a case (NotImplementedError names what is missing)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: CUDA tests skipped")
import fastattn  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch: CUDA tests skipped", allow_module_level=True)
if not fastattn.cuda_available():
    pytest.skip("fastattn was built without CUDA kernels (or sees no device): CUDA tests skipped",
                allow_module_level=True)

import attn_reference as ref  # noqa: E402
from checks import assert_close, assert_lse_close  # noqa: E402

DTYPES = {"bf16": (torch.bfloat16, "bfloat16"), "f16": (torch.float16, np.float16)}


def kernel_or_skip(fn, *args, **kw):
    """fn(*args, **kw), or skip the test naming the kernel this build lacks."""
    try:
        return fn(*args, **kw)
    except NotImplementedError as e:
        pytest.skip(f"no GPU kernel for this case: {e}")


def rand(rng, shape, dtype, requires_grad=False):
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to("cuda", dtype)
    return x.requires_grad_(requires_grad)


def np64(x):
    return x.detach().to("cpu", torch.float64).numpy()


# (b, s_q, s_k, h, h_kv, d, causal, window, softcap[, d_v: when it is not d])
CASES = {
    "dense_d64": (2, 256, 256, 4, 4, 64, False, (-1, -1), 0.0),
    "causal_d128_odd": (1, 113, 113, 4, 4, 128, True, (-1, -1), 0.0),
    "gqa_d128": (2, 300, 300, 8, 2, 128, False, (-1, -1), 0.0),
    "causal_sq_lt_sk": (2, 77, 333, 4, 1, 128, True, (-1, -1), 0.0),
    "causal_sq_gt_sk": (1, 257, 129, 2, 2, 64, True, (-1, -1), 0.0),
    "local_d64": (2, 512, 512, 2, 2, 64, False, (64, 0), 0.0),
    "local_two_sided": (1, 200, 260, 2, 1, 128, False, (17, 33), 0.0),
    "softcap_d256": (1, 150, 150, 2, 2, 256, True, (-1, -1), 30.0),
    "d96": (1, 129, 129, 2, 2, 96, False, (-1, -1), 0.0),
    "d192": (1, 129, 200, 2, 2, 192, True, (-1, -1), 0.0),
    "one_row": (4, 1, 1000, 4, 2, 128, True, (-1, -1), 0.0),
    "d192_v128": (2, 200, 300, 8, 2, 192, True, (-1, -1), 0.0, 128),
    # the split-D forward (d_qk or d_v above 256: docs/notes/splitd-sm90.md)
    "splitd_d512_gqa": (1, 150, 170, 4, 2, 512, True, (-1, -1), 0.0),
    "splitd_d1024": (1, 70, 90, 2, 2, 1024, False, (-1, -1), 0.0),
    "splitd_576_512_local": (1, 100, 130, 2, 1, 576, False, (20, 5), 0.0, 512),
    # MLA-style decode: 128 heads packed over one KV head, split-KV at the heuristic's count
    "splitd_mla_decode": (2, 1, 3000, 128, 1, 576, False, (-1, -1), 0.0, 512),
    "splitd_mla_decode4_causal": (1, 4, 1000, 128, 1, 576, True, (-1, -1), 0.0, 512),
}


def unpack(case):
    """A case's fields, with d_v (d where the case has none) last."""
    b, s_q, s_k, h, h_kv, d, causal, window, softcap, *dv = CASES[case]
    return b, s_q, s_k, h, h_kv, d, causal, window, softcap, (dv[0] if dv else d)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_forward(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, softcap, dv = unpack(case)
    tdt, rdt = DTYPES[dtype]
    q, k = (rand(rng, (b, s, hh, d), tdt) for s, hh in ((s_q, h), (s_k, h_kv)))
    v = rand(rng, (b, s_k, h_kv, dv), tdt)
    out, lse = kernel_or_skip(fastattn.flash_attn_func, q, k, v, causal=causal, window_size=window,
                              softcap=softcap, return_attn_probs=True)
    torch.cuda.synchronize()
    kw = dict(causal=causal, window=window, softcap=softcap)
    arrays = [np64(x) for x in (q, k, v)]
    ref64, lse64 = ref.forward(*arrays, **kw)
    lowp, _ = ref.forward(*arrays, dtype=rdt, **kw)
    assert_close("out", np64(out), ref64, lowp, rdt)
    assert_lse_close(np64(lse), lse64, rtol=1e-4)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_forward(rng, dtype):
    tdt, rdt = DTYPES[dtype]
    lens_q, lens_k = [0, 130, 1, 257, 64], [10, 130, 0, 300, 64]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lens_k)]), dtype=torch.int32, device="cuda")
    q = rand(rng, (sum(lens_q), 8, 128), tdt)
    k, v = (rand(rng, (sum(lens_k), 2, 128), tdt) for _ in range(2))
    out, lse = kernel_or_skip(fastattn.flash_attn_varlen_func, q, k, v, cu_q, cu_k, max(lens_q),
                              max(lens_k), causal=True, return_attn_probs=True)
    arrays = [np64(x) for x in (q, k, v)]
    ref64, lse64 = ref.varlen_forward(*arrays, cu_q.cpu().numpy(), cu_k.cpu().numpy(), causal=True)
    lowp, _ = ref.varlen_forward(*arrays, cu_q.cpu().numpy(), cu_k.cpu().numpy(), causal=True, dtype=rdt)
    assert_close("out", np64(out), ref64, lowp, rdt)
    assert_lse_close(np64(lse), lse64, rtol=1e-4)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", ["gqa_d128", "causal_sq_lt_sk", "local_d64", "softcap_d256", "d192_v128"])
def test_backward(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, softcap, dv = unpack(case)
    tdt, rdt = DTYPES[dtype]
    q, k = (rand(rng, (b, s, hh, d), tdt, True) for s, hh in ((s_q, h), (s_k, h_kv)))
    v = rand(rng, (b, s_k, h_kv, dv), tdt, True)
    dout = rand(rng, (b, s_q, h, dv), tdt)
    out = kernel_or_skip(fastattn.flash_attn_func, q, k, v, causal=causal, window_size=window,
                         softcap=softcap)
    kernel_or_skip(out.backward, dout)
    kw = dict(causal=causal, window=window, softcap=softcap)
    arrays = [np64(x) for x in (q, k, v)]
    exact = ref.backward(*arrays, np64(dout), **kw)
    lowp = ref.backward(*arrays, np64(dout), dtype=rdt, **kw)
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), exact, lowp):
        assert_close(name, np64(got), r64, rlp, rdt)


def test_broadcast_kv_forward_backward(rng):
    """k / v expanded over their heads (stride 0, as MQA code writes it): the CUDA kernels load by TMA,
    which takes positive strides only, so the Python layer reads them from a contiguous copy; the
    answer and the gradients (summed over the expanded heads by autograd) match the reference."""
    b, s_q, s_k, h, d = 2, 113, 200, 4, 128
    tdt, rdt = DTYPES["bf16"]
    q = rand(rng, (b, s_q, h, d), tdt, True)
    k1, v1 = (rand(rng, (b, s_k, 1, d), tdt, True) for _ in range(2))
    k, v = k1.expand(b, s_k, h, d), v1.expand(b, s_k, h, d)
    assert k.stride(2) == 0
    dout = rand(rng, (b, s_q, h, d), tdt)
    out = kernel_or_skip(fastattn.flash_attn_func, q, k, v, causal=True)
    arrays = [np64(x) for x in (q, k, v)]
    assert_close("out", np64(out), ref.forward(*arrays, causal=True)[0],
                 ref.forward(*arrays, causal=True, dtype=rdt)[0], rdt)
    out.backward(dout)
    exact = ref.backward(*arrays, np64(dout), causal=True)
    lowp = ref.backward(*arrays, np64(dout), dtype=rdt, causal=True)
    assert_close("dq", np64(q.grad), exact[0], lowp[0], rdt)
    for name, got, r64, rlp in (("dk", k1.grad, exact[1], lowp[1]), ("dv", v1.grad, exact[2], lowp[2])):
        assert_close(name, np64(got), r64.sum(axis=2, keepdims=True), rlp.sum(axis=2, keepdims=True), rdt)


def test_broadcast_kv_generic_api(rng):
    """fastattn.forward / fastattn.backward (DLPack, no custom op) with k / v expanded over their
    heads: the torch adapter copies them dense as the custom op's views do (they were refused by
    name before: TMA takes positive strides only)."""
    b, s_q, s_k, h, d = 1, 65, 130, 4, 128
    tdt, rdt = DTYPES["bf16"]
    q = rand(rng, (b, s_q, h, d), tdt)
    k1, v1 = (rand(rng, (b, s_k, 1, d), tdt) for _ in range(2))
    k, v = k1.expand(b, s_k, h, d), v1.expand(b, s_k, h, d)
    dout = rand(rng, (b, s_q, 1, d), tdt).expand(b, s_q, h, d)  # broadcast too (dout goes by TMA)
    out, lse = kernel_or_skip(fastattn.forward, q, k, v, causal=True)
    arrays = [np64(x) for x in (q, k, v)]
    assert_close("out", np64(out), ref.forward(*arrays, causal=True)[0],
                 ref.forward(*arrays, causal=True, dtype=rdt)[0], rdt)
    dq, dk, dv = kernel_or_skip(fastattn.backward, dout, q, k, v, out, lse, causal=True)
    exact = ref.backward(*arrays, np64(dout), causal=True)
    lowp = ref.backward(*arrays, np64(dout), dtype=rdt, causal=True)
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), (dq, dk, dv), exact, lowp):
        assert_close(name, np64(got), r64, rlp, rdt)


def test_side_stream_and_cuda_graph(rng):
    """Runs on the caller's stream, and replays inside a CUDA graph (no sync, no allocation)."""
    q, k, v = (rand(rng, (2, 256, 4, 128), torch.bfloat16) for _ in range(3))
    expect = kernel_or_skip(fastattn.flash_attn_func, q, k, v, causal=True)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):  # warm-up on a side stream, as graph capture requires
            got = fastattn.flash_attn_func(q, k, v, causal=True)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(got, expect, rtol=0, atol=0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fastattn.flash_attn_func(q, k, v, causal=True)
    for _ in range(2):
        for x in (q, k, v):
            x.copy_(torch.randn_like(x))
        graph.replay()
        torch.testing.assert_close(static_out, fastattn.flash_attn_func(q, k, v, causal=True),
                                   rtol=0, atol=0)


def test_opcheck_cuda(rng):
    q = rand(rng, (2, 128, 4, 128), torch.bfloat16)
    k, v = (rand(rng, (2, 128, 2, 128), torch.bfloat16) for _ in range(2))
    args = (q, k, v, None, None, None, None, 0, 0, 128 ** -0.5, True, -1, -1, 0.0)
    kernel_or_skip(torch.ops.fastattn.fwd, *args)
    torch.library.opcheck(torch.ops.fastattn.fwd.default, args,
                          test_utils=("test_schema", "test_faketensor"))


def test_compile_cuda(rng):
    q = rand(rng, (2, 256, 8, 128), torch.bfloat16)
    k, v = (rand(rng, (2, 256, 2, 128), torch.bfloat16) for _ in range(2))
    expect = kernel_or_skip(fastattn.flash_attn_func, q, k, v, causal=True)

    def fn(q, k, v):
        return fastattn.flash_attn_func(q * 2, k, v, causal=True) + 1

    torch._dynamo.reset()
    got = torch.compile(fn, fullgraph=True)(q, k, v)
    torch.testing.assert_close(got, fastattn.flash_attn_func(q * 2, k, v, causal=True) + 1)
    assert expect.shape == got.shape


def test_sdpa_matches_torch_cuda(rng):
    q = rand(rng, (2, 8, 256, 128), torch.float16)
    k, v = (rand(rng, (2, 2, 256, 128), torch.float16) for _ in range(2))
    ours = kernel_or_skip(fastattn.scaled_dot_product_attention, q, k, v, is_causal=True,
                          enable_gqa=True)
    theirs = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=True, enable_gqa=True)
    torch.testing.assert_close(ours.double(), theirs, rtol=2e-3, atol=2e-3)


# Block-sparse masks on the GPU forward (docs/masks.md, CUDA section): (b, s_q, s_k, h, h_kv, d, causal,
# window, mask heads, density); blocks of 128 x 128 (the CUDA limit), odd lengths, GQA packed (mask heads
# 1 / h_kv) and unpacked (h).
BLOCK_CASES = {
    "gqa_per_kv_head": (2, 300, 300, 8, 2, 128, False, (-1, -1), 2, 0.5),
    "causal_shared_d64": (1, 517, 517, 4, 4, 64, True, (-1, -1), 1, 0.6),
    "per_q_head_window_d96": (2, 260, 390, 4, 1, 96, False, (100, 40), 4, 0.5),
}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(BLOCK_CASES))
def test_block_mask_forward(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, mask_heads, density = BLOCK_CASES[case]
    tdt, rdt = DTYPES[dtype]
    q = rand(rng, (b, s_q, h, d), tdt)
    k, v = (rand(rng, (b, s_k, h_kv, d), tdt) for _ in range(2))
    nq, nk = -(-s_q // 128), -(-s_k // 128)
    mask = torch.from_numpy(rng.random((b, mask_heads, nq, nk)) < density)
    mask[0, 0, 0, :] = False  # a q block that keeps no key: out 0, lse -inf
    out, lse = kernel_or_skip(fastattn.flash_attn_func, q, k, v, causal=causal, window_size=window,
                              return_attn_probs=True, block_mask=mask.cuda())
    torch.cuda.synchronize()
    kw = dict(causal=causal, window=window, blocks=(mask.numpy(), 128, 128))
    arrays = [np64(x) for x in (q, k, v)]
    ref64, lse64 = ref.forward(*arrays, **kw)
    lowp, _ = ref.forward(*arrays, dtype=rdt, **kw)
    assert_close("out", np64(out), ref64, lowp, rdt)
    assert_lse_close(np64(lse), lse64, rtol=1e-4)
    assert bool(torch.isneginf(lse[0, 0, :128]).all()) and not bool(out[0, :128, 0].any())


# Block-sparse masks on the GPU backward (default mode): (b, s_q, s_k, h, h_kv, d, causal, window, mask
# heads, density); mask heads 1 or h_kv (a KV head's q heads share one mask head: the CUDA limit).
BLOCK_BWD_CASES = {
    "gqa_per_kv_head": (2, 300, 300, 8, 2, 128, False, (-1, -1), 2, 0.5),
    "causal_shared_d64": (1, 517, 517, 4, 4, 64, True, (-1, -1), 1, 0.6),
    "window_d96": (2, 260, 390, 4, 1, 96, False, (100, 40), 1, 0.5),
}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(BLOCK_BWD_CASES))
def test_block_mask_backward(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, mask_heads, density = BLOCK_BWD_CASES[case]
    tdt, rdt = DTYPES[dtype]
    q = rand(rng, (b, s_q, h, d), tdt, True)
    k, v = (rand(rng, (b, s_k, h_kv, d), tdt, True) for _ in range(2))
    dout = rand(rng, (b, s_q, h, d), tdt)
    nq, nk = -(-s_q // 128), -(-s_k // 128)
    mask = torch.from_numpy(rng.random((b, mask_heads, nq, nk)) < density)
    mask[0, 0, 0, :] = False  # a q block that keeps no key: dq 0 on its rows
    mask[0, :, :, 1] = False  # a key block that no row of batch 0 keeps: dk = dv = 0 there
    out = kernel_or_skip(fastattn.flash_attn_func, q, k, v, causal=causal, window_size=window,
                         block_mask=mask.cuda())
    kernel_or_skip(out.backward, dout)
    kw = dict(causal=causal, window=window, blocks=(mask.numpy(), 128, 128))
    arrays = [np64(x) for x in (q, k, v)]
    exact = ref.backward(*arrays, np64(dout), **kw)
    lowp = ref.backward(*arrays, np64(dout), dtype=rdt, **kw)
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), exact, lowp):
        assert_close(name, np64(got), r64, rlp, rdt)
    assert not bool(q.grad[0, :128, :h // mask_heads].any()) and not bool(k.grad[0, 128:256].any())


def test_block_mask_cuda_limits(rng):
    """What the CUDA block-sparse calls refuse is named (NotImplementedError), never run unmasked; the
    backward runs (default mode) and matches the float64 reference."""
    q, k, v = (rand(rng, (1, 256, 2, 128), torch.bfloat16, requires_grad=True) for _ in range(3))
    mask = torch.ones(1, 1, 4, 4, dtype=torch.bool, device="cuda")
    with pytest.raises(NotImplementedError, match="multiples of 128"):
        fastattn.flash_attn_func(q, k, v, block_mask=mask, block_size=(64, 64))
    mask2 = mask[:, :, :2, :2].clone()
    mask2[0, 0, 1, 0] = False
    out = fastattn.flash_attn_func(q, k, v, block_mask=mask2)  # the forward runs
    dout = torch.randn_like(out)
    out.backward(dout)  # and so does the backward
    kw = dict(blocks=(mask2.cpu().numpy(), 128, 128))
    arrays = [np64(x) for x in (q, k, v)]
    exact = ref.backward(*arrays, np64(dout), **kw)
    lowp = ref.backward(*arrays, np64(dout), dtype=DTYPES["bf16"][1], **kw)
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), exact, lowp):
        assert_close(name, np64(got), r64, rlp, DTYPES["bf16"][1])
    out = fastattn.flash_attn_func(q, k, v, block_mask=mask2, deterministic=True)
    with pytest.raises(NotImplementedError, match="block-sparse deterministic backward"):
        out.sum().backward()


def test_splitd_backward_refused_by_name(rng):
    """Head dims above 256 have a forward (the split-D kernel) but no backward yet: autograd's
    backward raises, naming it, instead of computing anything."""
    q, k, v = (rand(rng, (1, 64, 2, 512), torch.bfloat16, requires_grad=True) for _ in range(3))
    out = kernel_or_skip(fastattn.flash_attn_func, q, k, v, causal=True)
    with pytest.raises(NotImplementedError, match="split-D"):
        out.float().sum().backward()
