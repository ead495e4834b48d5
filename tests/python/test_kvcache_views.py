"""flash_attn_with_kvcache's torch fast path (plain-value views, _C.forward_kvcache_views) against
the DLPack call it replaced (_C.forward_kvcache on the same tensors): the same out, lse and cache
bits for strided, GQA, rotary, paged and indexed inputs, and every argument's rejection by name."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: KV-cache fast-path tests skipped")

import fastattn  # noqa: E402
from fastattn import _C  # noqa: E402
from kvcache_model import rotary_angles  # noqa: E402

CUDA = torch.cuda.is_available() and fastattn.cuda_available()
DEVICES = ["cpu"] + (["cuda"] if CUDA else [])
DTYPE = {"cpu": torch.float32, "cuda": torch.bfloat16}
D = {"cpu": 32, "cuda": 128}  # scripts/gpu-check-inference builds head dim 128 only


def rand(rng, shape, device, dtype=None):
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    return x.to(device, dtype or DTYPE[device])


def laid_out(x, how):
    """x's values in a (b, s, h, d) tensor laid out `how` (the fast path takes strided inputs)."""
    if how == "dense":
        return x
    if how == "transposed":
        return x.transpose(1, 2).contiguous().transpose(1, 2)
    assert how == "last_strided"  # copied by both paths (unit last stride)
    wide = torch.zeros((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype, device=x.device)
    wide[..., ::2] = x
    return wide[..., ::2]


def dlpack_call(q, kc, vc, k=None, v=None, cos=None, sin=None, cache_seqlens=None, cache_batch_idx=None,
                cache_leftpad=None, page_table=None, rotary_interleaved=True, causal=False,
                window_size=(-1, -1), softcap=0.0, alibi_slopes=None):
    """The DLPack path as flash_attn_with_kvcache ran it for torch tensors before the views."""
    unit = lambda x: None if x is None else (x if x.stride(-1) == 1 else x.contiguous())  # noqa: E731
    out = q.new_empty((*q.shape[:-1], vc.shape[-1]))
    lse = q.new_empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32)
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
    stream = torch.cuda.current_stream().cuda_stream if q.is_cuda else 0
    _C.forward_kvcache(unit(q), kc, vc, unit(k), unit(v), out, lse, unit(cos), unit(sin), cache_seqlens,
                       cache_batch_idx, cache_leftpad, page_table, rotary_interleaved, q.shape[-1] ** -0.5,
                       causal, window_size[0], window_size[1], softcap, 0, not q.is_cuda, 0, 0, stream,
                       alibi_slopes=unit(alibi_slopes))
    return out, lse


def same_as_dlpack(q, kc, vc, *args, **kw):
    """Both paths on fresh copies of the caches: the same bits, or the same NotImplementedError
    (a CUDA build without paged / indexed caches yet)."""
    kc2, vc2 = kc.clone(), vc.clone()
    try:
        want_out, want_lse = dlpack_call(q, kc2, vc2, *args, **kw)
    except NotImplementedError as e:
        with pytest.raises(NotImplementedError, match=f"^{str(e)[:40]}"):
            fastattn.flash_attn_with_kvcache(q, kc, vc, *args, **kw)
        return
    out, lse = fastattn.flash_attn_with_kvcache(q, kc, vc, *args, return_softmax_lse=True, **kw)
    assert torch.isfinite(out).all()
    assert torch.equal(out, want_out) and torch.equal(lse, want_lse)
    assert torch.equal(kc, kc2) and torch.equal(vc, vc2)
    # out alone (no lse allocated): the same out; appending the same k/v again changes no bit
    assert torch.equal(fastattn.flash_attn_with_kvcache(q, kc2, vc2, *args, **kw), out)
    assert torch.equal(kc, kc2) and torch.equal(vc, vc2)


@pytest.mark.parametrize("how", ["dense", "transposed", "last_strided"])
@pytest.mark.parametrize("device", DEVICES)
def test_decode_same_bits(rng, device, how):
    b, h, h_kv, d, s_cache = 3, 8, 2, D[device], 113
    q = laid_out(rand(rng, (b, 1, h, d), device), how)
    k, v = (laid_out(rand(rng, (b, 1, h_kv, d), device), how) for _ in range(2))
    kc, vc = rand(rng, (b, s_cache, h_kv, d), device), rand(rng, (b, s_cache, h_kv, d), device)
    seqlens = torch.tensor([0, 1, s_cache - 1], dtype=torch.int32, device=device)
    same_as_dlpack(q, kc, vc, k, v, cache_seqlens=seqlens, causal=True)


@pytest.mark.parametrize("interleaved", [True, False], ids=["interleaved", "neox"])
@pytest.mark.parametrize("device", DEVICES)
def test_rotary_local_softcap_same_bits(rng, device, interleaved):
    b, s_q, h, h_kv, d, s_cache = 2, 17, 6, 3, D[device], 4097
    q = rand(rng, (b, s_q, h, d), device)
    k, v = rand(rng, (b, s_q, h_kv, d), device), rand(rng, (b, s_q, h_kv, d), device)
    kc, vc = rand(rng, (b, s_cache, h_kv, d), device), rand(rng, (b, s_cache, h_kv, d), device)
    cos, sin = (torch.from_numpy(x).to(device, DTYPE[device]) for x in rotary_angles(s_cache, d // 2))
    seqlens = torch.tensor([5, s_cache - s_q], dtype=torch.int32, device=device)
    same_as_dlpack(q, kc, vc, k, v, cos, sin, seqlens, rotary_interleaved=interleaved, causal=True,
                   window_size=(100, 0), softcap=3.0)


@pytest.mark.parametrize("device", DEVICES)
def test_whole_cache_and_int_seqlens_same_bits(rng, device):
    b, h, h_kv, d = 2, 4, 4, D[device]
    q = rand(rng, (b, 4, h, d), device)
    kc, vc = rand(rng, (b, 64, h_kv, d), device), rand(rng, (b, 64, h_kv, d), device)
    same_as_dlpack(q, kc, vc)  # no cache_seqlens: the whole cache
    k, v = rand(rng, (b, 4, h_kv, d), device), rand(rng, (b, 4, h_kv, d), device)
    same_as_dlpack(q, kc, vc, k, v, cache_seqlens=17, causal=True)


@pytest.mark.parametrize("device", DEVICES)
def test_indexed_and_paged_same_bits(rng, device):
    b, h, h_kv, d, page, pps = 3, 4, 2, D[device], 16, 4
    q = rand(rng, (b, 2, h, d), device)
    k, v = rand(rng, (b, 2, h_kv, d), device), rand(rng, (b, 2, h_kv, d), device)
    kc, vc = rand(rng, (5, page * pps, h_kv, d), device), rand(rng, (5, page * pps, h_kv, d), device)
    i32 = lambda xs: torch.tensor(xs, dtype=torch.int32, device=device)  # noqa: E731
    same_as_dlpack(q, kc, vc, k, v, cache_seqlens=i32([10, 0, 30]), cache_batch_idx=i32([4, 0, 2]),
                   cache_leftpad=i32([3, 0, 29]), causal=True)
    kp, vp = rand(rng, (b * pps + 2, page, h_kv, d), device), rand(rng, (b * pps + 2, page, h_kv, d), device)
    table = torch.from_numpy(rng.permutation(b * pps + 2)[:b * pps].astype(np.int32)).reshape(b, pps)
    same_as_dlpack(q, kp, vp, k, v, cache_seqlens=i32([5, 0, 40]), page_table=table.to(device), causal=True)


@pytest.mark.parametrize("dims", [1, 2], ids=["slopes_h", "slopes_bh"])
@pytest.mark.parametrize("device", DEVICES)
def test_alibi_same_bits(rng, device, dims):
    """alibi_slopes through the views and through DLPack: the same bits (on the CUDA sm80 path the same
    refusal)."""
    b, h, h_kv, d, s_cache = 3, 8, 2, D[device], 113
    q = rand(rng, (b, 3, h, d), device)
    k, v = rand(rng, (b, 3, h_kv, d), device), rand(rng, (b, 3, h_kv, d), device)
    kc, vc = rand(rng, (b, s_cache, h_kv, d), device), rand(rng, (b, s_cache, h_kv, d), device)
    slopes = torch.from_numpy(rng.uniform(0.01, 1.0, (h,) if dims == 1 else (b, h)).astype(np.float32)).to(device)
    i32 = lambda xs: torch.tensor(xs, dtype=torch.int32, device=device)  # noqa: E731
    same_as_dlpack(q, kc, vc, k, v, cache_seqlens=i32([0, 7, s_cache - 3]), alibi_slopes=slopes, causal=True)
    same_as_dlpack(q, kc, vc, k, v, cache_seqlens=i32([4, 7, 50]), cache_leftpad=i32([0, 7, 20]),
                   alibi_slopes=slopes, window_size=(9, 1))
    if dims == 2:  # a (b, h) tensor laid out heads-first: copied to a unit last stride by both paths
        same_as_dlpack(q, kc, vc, k, v, cache_seqlens=i32([1, 2, 3]), alibi_slopes=slopes.t().contiguous().t())


def test_cache_is_written_in_place_never_copied(rng):
    """A cache whose last stride is not 1 is refused by name (a copy would take the writes)."""
    q, k, v = rand(rng, (1, 1, 2, 8), "cpu"), rand(rng, (1, 1, 2, 8), "cpu"), rand(rng, (1, 1, 2, 8), "cpu")
    kc = laid_out(rand(rng, (1, 16, 2, 8), "cpu"), "last_strided")
    vc = rand(rng, (1, 16, 2, 8), "cpu")
    with pytest.raises(ValueError, match="^k_cache: last dim must have unit stride"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=3)
    with pytest.raises(ValueError, match="^v_cache: a negated view"):
        fastattn.flash_attn_with_kvcache(q, vc, torch._neg_view(vc), k, v, cache_seqlens=3)
    before = vc.clone()
    fastattn.flash_attn_with_kvcache(q, kc.contiguous(), vc, k, v, cache_seqlens=3)
    assert torch.equal(vc[:, 3], v[:, 0]) and torch.equal(vc[:, :3], before[:, :3])


def test_every_argument_is_rejected_by_name(rng):
    b, h, h_kv, d = 2, 4, 2, 16
    q, k, v = rand(rng, (b, 1, h, d), "cpu"), rand(rng, (b, 1, h_kv, d), "cpu"), rand(rng, (b, 1, h_kv, d), "cpu")
    kc, vc = rand(rng, (b, 32, h_kv, d), "cpu"), rand(rng, (b, 32, h_kv, d), "cpu")
    cos, sin = (torch.from_numpy(x).float() for x in rotary_angles(32, 16))
    seqlens = torch.tensor([1, 2], dtype=torch.int32)
    base = dict(q=q, k_cache=kc, v_cache=vc, k=k, v=v, rotary_cos=cos, rotary_sin=sin, cache_seqlens=seqlens)
    call = lambda **kw: fastattn.flash_attn_with_kvcache(**{**base, **kw})  # noqa: E731
    call()  # the base call is valid
    for name in ("q", "k_cache", "v_cache", "k", "v", "rotary_cos", "rotary_sin"):
        with pytest.raises(ValueError, match=f"^{name}: dtype float64 is not supported"):
            call(**{name: base[name].double()})
        if name != "q":  # a numpy q takes the numpy path, which names the first torch argument
            with pytest.raises(TypeError, match=f"^{name}: expected a torch array like q"):
                call(**{name: base[name].numpy()})
        with pytest.raises(ValueError, match=f"^{name}: device meta is not supported"):
            call(**{name: base[name].to("meta")})
    for name in ("q", "k_cache", "v_cache"):
        with pytest.raises(ValueError, match=f"^{name}: expected 4 dimensions"):
            call(**{name: base[name][0]})
    for name in ("cache_seqlens", "cache_batch_idx", "cache_leftpad"):
        with pytest.raises(ValueError, match=f"^{name}: expected dtype int32, got int64"):
            call(**{name: seqlens.long()})
        with pytest.raises(ValueError, match=f"^{name}: expected 1 dimension, got 2"):
            call(**{name: seqlens[None]})
        with pytest.raises(ValueError, match=f"^{name}: expected an int or an int32 tensor, got ndarray"):
            call(**{name: seqlens.numpy()})
        with pytest.raises(ValueError, match=f"^{name}: expected an int or an int32 tensor, got bool"):
            call(**{name: True})
        with pytest.raises(ValueError, match=f"^{name}: device meta is not supported"):
            call(**{name: seqlens.to("meta")})
    with pytest.raises(ValueError, match="^cache_seqlens: entry 1 is 32 but must be in"):
        call(cache_seqlens=torch.tensor([0, 32], dtype=torch.int32))
    table = torch.zeros((b, 2), dtype=torch.int32)
    with pytest.raises(ValueError, match="^page_table: expected a 2-D int32 array"):
        call(block_table=table[0])
    with pytest.raises(ValueError, match="^page_table: expected a 2-D int32 array"):
        call(block_table=table.long())
    with pytest.raises(TypeError, match="^block_table: expected a torch array like q"):
        call(block_table=table.numpy())
    with pytest.raises(ValueError, match="block_table and page_table"):
        call(block_table=table, page_table=table)
    with pytest.raises(ValueError, match="^k_new: expected shape"):
        call(k=rand(rng, (b, 1, h_kv, 2 * d), "cpu"))
    with pytest.raises(ValueError, match="^num_splits"):
        call(num_splits=-1)
    with pytest.raises(ValueError, match="^softmax_scale"):
        call(softmax_scale=float("nan"))
    with pytest.raises(ValueError, match="^window_size"):
        call(window_size=3)
    call(alibi_slopes=torch.ones(h))  # ALiBi over the cache: (h) or (b, h) float32 on q's device
    call(alibi_slopes=torch.ones(b, h))
    with pytest.raises(ValueError, match="^alibi_slopes: dtype float16 is not supported"):
        call(alibi_slopes=torch.ones(h, dtype=torch.float16))
    with pytest.raises(TypeError, match="^alibi_slopes: expected a torch array like q"):
        call(alibi_slopes=np.ones(h, np.float32))
    with pytest.raises(ValueError, match="^alibi_slopes: device meta is not supported"):
        call(alibi_slopes=torch.ones(h, device="meta"))
    with pytest.raises(ValueError, match=r"^alibi_slopes: shape \(8\) but its last dim must be heads_q 4"):
        call(alibi_slopes=torch.ones(2 * h))
    with pytest.raises(ValueError, match=r"^alibi_slopes: shape \(3, 4\) but its first dim must be batch 2"):
        call(alibi_slopes=torch.ones(b + 1, h))


def test_dtype_messages_match_the_dlpack_path(rng):
    q, k, v = rand(rng, (1, 1, 2, 8), "cpu"), rand(rng, (1, 1, 2, 8), "cpu"), rand(rng, (1, 1, 2, 8), "cpu")
    kc, vc = rand(rng, (1, 8, 2, 8), "cpu"), rand(rng, (1, 8, 2, 8), "cpu")
    for args in ((q.double(), kc, vc), (q, kc.half(), vc), (q, kc, vc, k, v.int())):
        with pytest.raises(ValueError) as fast:
            fastattn.flash_attn_with_kvcache(*args, cache_seqlens=0 if len(args) > 3 else None)
        with pytest.raises(ValueError) as dl:
            dlpack_call(*args, cache_seqlens=0 if len(args) > 3 else None)
        assert str(fast.value).split(" (")[0] == str(dl.value).split(" (")[0]


def test_malformed_view_is_a_type_error():
    with pytest.raises(TypeError, match="^q: expected a view"):
        _C.forward_kvcache_views((1, 2), (1, 2), (1, 2), None, None, (1, 2), None, None, None, None, None, None,
                                 None, True, 1.0, False, -1, -1, 0.0, 0, True, 0, 0, 0)
