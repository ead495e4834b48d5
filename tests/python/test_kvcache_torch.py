"""flash_attn_with_kvcache with torch tensors: the CPU backend always, the CUDA backend when a
GPU is present (contiguous cache, rotary, cache_seqlens edges, CUDA-graph capture + replay, ALiBi over
the cache)."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: torch KV-cache tests skipped")

import fastattn  # noqa: E402
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close  # noqa: E402
from kvcache_model import alibi_kvcache_reference, model, rotary_angles  # noqa: E402

CUDA = torch.cuda.is_available() and fastattn.cuda_available()


def np64(x):
    return x.detach().to("cpu", torch.float64).numpy()


def _inputs(rng, device, dtype, b=3, s_q=1, h=8, h_kv=2, d=128, s_cache=256, s_new=1, rot=0):
    def rand(*shape):
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(device, dtype)
    q, k, v = rand(b, s_q, h, d), rand(b, s_new, h_kv, d), rand(b, s_new, h_kv, d)
    kc, vc = rand(b, s_cache, h_kv, d), rand(b, s_cache, h_kv, d)
    cos = sin = None
    if rot:
        cos, sin = (torch.from_numpy(x).to(device, dtype) for x in rotary_angles(s_cache, rot))
    return q, kc, vc, k, v, cos, sin


def _check(inputs, seqlens, np_dtype, causal, out, lse, before):
    q, kc, vc, k, v, cos, sin = inputs
    kc0, vc0 = before
    want = model(np64(q), kc0, vc0, np64(k), np64(v), None if cos is None else np64(cos),
                 None if sin is None else np64(sin), seqlens, causal=causal, dtype=np_dtype)
    kc_want, vc_want, out64, lse64, outlp = want
    np.testing.assert_allclose(np64(kc), kc_want, rtol=2 ** -7, atol=2 ** -14)
    np.testing.assert_array_equal(np64(vc), vc_want)
    assert_close("out", np64(out), out64, outlp, np_dtype, FLOAT32_FLOOR if np_dtype == np.float32 else 0)
    assert_lse_close(np64(lse), lse64, rtol=1e-4)


def test_cpu_float32(rng):
    inputs = _inputs(rng, "cpu", torch.float32, d=32, s_cache=64, s_new=2, s_q=2, rot=16)
    seqlens = np.array([0, 1, 62], np.int32)
    before = (np64(inputs[1]), np64(inputs[2]))
    q, kc, vc, k, v, cos, sin = inputs
    out, lse = fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cos, sin, torch.from_numpy(seqlens),
                                                causal=True, return_softmax_lse=True)
    _check(inputs, seqlens, np.float32, True, out, lse, before)


@pytest.mark.parametrize("name", ["cache_seqlens", "cache_batch_idx", "cache_leftpad", "seqused_q", "seqused_k"])
def test_empty_index_tensor_is_given(rng, name):
    """An empty int32 tensor (torch gives it a null data pointer) is an index array of 0 entries, refused for a
    batch of 3 (2 for varlen), not taken for an absent one (which would mean the whole cache, every key)."""
    empty = torch.empty(0, dtype=torch.int32)
    with pytest.raises(ValueError, match=rf"^{name}: has 0 entries but batch is"):
        if name.startswith("seqused"):
            x = torch.randn(5, 2, 32)
            cu = torch.tensor([0, 2, 5], dtype=torch.int32)
            fastattn.flash_attn_varlen_func(x, x, x, cu, cu, 3, 3, **{name: empty})
        else:
            q, kc, vc = (torch.randn(3, s, 2, 32) for s in (1, 64, 64))
            fastattn.flash_attn_with_kvcache(q, kc, vc, **{name: empty})
    q, kc = torch.randn(0, 1, 2, 32), torch.randn(0, 64, 2, 32)  # batch 0: 0 entries is every entry
    assert fastattn.flash_attn_with_kvcache(q, kc, kc, cache_seqlens=empty).shape == (0, 1, 2, 32)


@pytest.mark.skipif(not CUDA, reason="no CUDA device or no CUDA kernels in this build")
@pytest.mark.parametrize("rot", [0, 64], ids=["plain", "rotary"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_cuda_decode(rng, rot, causal):
    inputs = _inputs(rng, "cuda", torch.bfloat16, s_new=1, rot=rot)
    seqlens = np.array([0, 1, 255], np.int32)
    before = (np64(inputs[1]), np64(inputs[2]))
    q, kc, vc, k, v, cos, sin = inputs
    out, lse = fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cos, sin,
                                                torch.from_numpy(seqlens).cuda(), causal=causal,
                                                return_softmax_lse=True)
    _check(inputs, seqlens, "bfloat16", causal, out, lse, before)


@pytest.mark.skipif(not CUDA, reason="no CUDA device or no CUDA kernels in this build")
def test_cuda_graph_decode_step(rng):
    """A decode step captured once and replayed: the cache grows by one token per replay."""
    inputs = _inputs(rng, "cuda", torch.bfloat16, s_new=1, rot=64)
    q, kc, vc, k, v, cos, sin = inputs
    seqlens = torch.tensor([3, 10, 100], dtype=torch.int32, device="cuda")
    before = (np64(kc), np64(vc))
    first = seqlens.cpu().numpy().copy()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the graph
        fastattn.flash_attn_with_kvcache(q, kc.clone(), vc.clone(), k, v, cos, sin, seqlens, causal=True)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cos, sin, seqlens, causal=True,
                                                    return_softmax_lse=True)
    kc.copy_(torch.from_numpy(before[0]).to(kc))  # capture does not run the kernels: start clean
    vc.copy_(torch.from_numpy(before[1]).to(vc))
    graph.replay()
    torch.cuda.synchronize()
    _check(inputs, first, "bfloat16", True, out, lse, before)
    # Second step: one more token cached, new k/v written at the next position.
    before2 = (np64(kc), np64(vc))
    seqlens += 1
    graph.replay()
    torch.cuda.synchronize()
    _check(inputs, first + 1, "bfloat16", True, out, lse, before2)


DEVICES = ["cpu"] + (["cuda"] if CUDA else [])


@pytest.mark.parametrize("seqlens_kind", ["tensor", "whole_cache"])
@pytest.mark.parametrize("device", DEVICES)
def test_cache_filled_by_the_caller(rng, device, seqlens_kind):
    """No k/v, no rotary, no leftpad (transformers' StaticCache: the new keys are already in the
    cache): cache_seqlens are the key counts as they are (on CUDA: no preparing launch)."""
    dtype, np_dtype, d = (torch.float32, np.float32, 32) if device == "cpu" else (torch.bfloat16, "bfloat16", 128)
    q, kc, vc, _, _, _, _ = _inputs(rng, device, dtype, b=4, s_q=3, d=d, s_cache=113)
    if seqlens_kind == "tensor":
        seqlens = np.array([1, 2, 17, 113], np.int32)
        arg = torch.from_numpy(seqlens).to(device)
    else:
        seqlens = arg = None
    before = (np64(kc), np64(vc))
    out, lse = fastattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=arg, causal=True,
                                                return_softmax_lse=True)
    kc_want, vc_want, out64, lse64, outlp = model(np64(q), *before, seqlens=seqlens, causal=True,
                                                  dtype=np_dtype)
    assert np.array_equal(np64(kc), before[0]) and np.array_equal(np64(vc), before[1])  # untouched
    assert_close("out", np64(out), out64, outlp, np_dtype, FLOAT32_FLOOR if device == "cpu" else 0)
    assert_lse_close(np64(lse), lse64, rtol=1e-4)


@pytest.mark.skipif(not CUDA, reason="no CUDA device or no CUDA kernels in this build")
def test_cuda_graph_over_a_cache_filled_by_the_caller(rng):
    """The StaticCache decode step in a graph: the caller writes the new token's k/v and advances
    cache_seqlens on the device; each replay attends to one more key."""
    q, kc, vc, k, v, _, _ = _inputs(rng, "cuda", torch.bfloat16, b=2, d=128, s_cache=300)
    seqlens = torch.tensor([5, 200], dtype=torch.int32, device="cuda")
    pos = seqlens.long() - 1

    def step():
        kc[torch.arange(2, device="cuda"), pos] = k[:, 0]
        vc[torch.arange(2, device="cuda"), pos] = v[:, 0]
        return fastattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True,
                                                return_softmax_lse=True)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, lse = step()
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        want = model(np64(q), np64(kc), np64(vc), seqlens=seqlens.cpu().numpy(), causal=True, dtype="bfloat16")
        assert_close("out", np64(out), want[2], want[4], "bfloat16")
        assert_lse_close(np64(lse), want[3], rtol=1e-4)
        seqlens += 1
        pos += 1


# ---- ALiBi over the cache (alibi_slopes=) on CUDA --------------------------------------------------------

def _alibi_runs_here():
    """ALiBi over a KV cache runs on the sm90 (Hopper) path, unsplit; the sm80 path (Ampere / Ada, or a Hopper
    GPU under FASTATTN_FORCE_ARCH=80 / 86 / 89 / 8: docs/build.md) refuses it by name."""
    forced = os.environ.get("FASTATTN_FORCE_ARCH", "")
    return torch.cuda.get_device_capability()[0] == 9 and not forced.startswith("8")


def _assert_cache_unchanged(kc, vc, before):
    torch.cuda.synchronize()
    np.testing.assert_array_equal(np64(kc), before[0])
    np.testing.assert_array_equal(np64(vc), before[1])


@pytest.mark.skipif(not CUDA, reason="no CUDA device or no CUDA kernels in this build")
@pytest.mark.parametrize("dims", [1, 2], ids=["slopes_h", "slopes_bh"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("s_new", [1, 4], ids=["decode", "chunk"])
def test_cuda_alibi(rng, s_new, causal, dims):
    """bf16, d 128, GQA 8 / 2, a 256-token cache: an empty sequence, a short one and one nearly full (perhaps
    full) after appending s_new tokens (s_q = s_new), slopes (h) or (b, h) in [0.01, 1), the heuristic's
    num_splits. out and lse against the float64 reference by FA3's rule (the bf16 estimate: P and out rounded
    to bf16), every element; the appended cache exactly. The sm80 path refuses it by name, the cache untouched."""
    q, kc, vc, k, v, _, _ = _inputs(rng, "cuda", torch.bfloat16, s_q=s_new, s_new=s_new)
    s_cache = kc.shape[1]
    seqlens = np.array([0, rng.integers(1, 32), rng.integers(s_cache - s_new - 8, s_cache - s_new + 1)], np.int32)
    slopes = rng.uniform(0.01, 1.0, (q.shape[2],) if dims == 1 else (q.shape[0], q.shape[2])).astype(np.float32)
    before = (np64(kc), np64(vc))
    kw = dict(cache_seqlens=torch.from_numpy(seqlens).cuda(), alibi_slopes=torch.from_numpy(slopes).cuda(),
              causal=causal, return_softmax_lse=True)
    if not _alibi_runs_here():
        with pytest.raises(NotImplementedError, match="^alibi_slopes: "):
            fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, **kw)
        _assert_cache_unchanged(kc, vc, before)
        return
    out, lse = fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, **kw)
    torch.cuda.synchronize()
    args = (np64(q), *before, np64(k), np64(v), seqlens, None, slopes, causal)
    kc_want, vc_want, out64, lse64 = alibi_kvcache_reference(*args)
    _, _, outlp, _ = alibi_kvcache_reference(*args, dtype="bfloat16")
    np.testing.assert_array_equal(np64(kc), kc_want)  # appended in place
    np.testing.assert_array_equal(np64(vc), vc_want)
    assert_close("out", np64(out), out64, outlp, "bfloat16")
    assert_lse_close(np64(lse), lse64, rtol=1e-4)


@pytest.mark.skipif(not CUDA, reason="no CUDA device or no CUDA kernels in this build")
def test_cuda_alibi_split_kv_refused(rng):
    """The CUDA forward with ALiBi has no split-KV: num_splits=3 with alibi_slopes is refused naming num_splits
    (on the sm80 path alibi_slopes itself), before the cache is written."""
    q, kc, vc, k, v, _, _ = _inputs(rng, "cuda", torch.bfloat16, s_q=4, s_new=4)
    seqlens = torch.tensor([0, 17, 200], dtype=torch.int32, device="cuda")
    slopes = torch.from_numpy(rng.uniform(0.01, 1.0, (q.shape[2],)).astype(np.float32)).cuda()
    before = (np64(kc), np64(vc))
    pattern = "^num_splits: " if _alibi_runs_here() else "^alibi_slopes: "
    for with_lse in (False, True):
        with pytest.raises(NotImplementedError, match=pattern):
            fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=seqlens, alibi_slopes=slopes,
                                             causal=True, num_splits=3, return_softmax_lse=with_lse)
    _assert_cache_unchanged(kc, vc, before)
