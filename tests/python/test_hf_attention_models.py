"""fastattn inside tiny transformers models (random weights, float32 on the CPU) against transformers' own
"eager" attention: Mistral (a sliding window on every layer, GQA) and Gemma-2 (sliding and full layers
alternating, logit softcap); unpadded and left-padded prefill, greedy generation with the dynamic and the
static cache (the scores of every step), and a prefill into an empty StaticCache without a mask (the
SDPA mask function passes None there with s_k > s_q: keys past s_q are unwritten). Skipped without
torch or transformers; the semantics are tested without them in test_hf_attention_window_bias.py."""
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: transformers model tests skipped")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: model tests skipped")

from fastattn import hf_attention  # noqa: E402

TOL = dict(atol=2e-5, rtol=2e-5)
SIZES = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, max_position_embeddings=64)


def tiny(name, sliding_window):
    torch.manual_seed(1234)
    if name == "mistral":
        config = transformers.MistralConfig(sliding_window=sliding_window, **SIZES)
        return transformers.MistralForCausalLM(config).eval()
    config = transformers.Gemma2Config(sliding_window=sliding_window, query_pre_attn_scalar=16, **SIZES)
    return transformers.Gemma2ForCausalLM(config).eval()


@pytest.fixture(scope="module", autouse=True)
def registered():
    hf_attention.register()


def both(model, run):
    """run(model) under transformers' eager attention and under fastattn."""
    got = {}
    for impl in ("eager", "fastattn"):
        model.set_attn_implementation(impl)
        with torch.no_grad():
            got[impl] = run(model)
    return got["eager"], got["fastattn"]


def tokens(b, s):
    g = torch.Generator().manual_seed(b * 1000 + s)
    return torch.randint(0, SIZES["vocab_size"], (b, s), generator=g)


@pytest.mark.parametrize("name,window", [("mistral", 1), ("mistral", 5), ("mistral", 64), ("mistral", None),
                                         ("gemma2", 5), ("gemma2", 64)])
def test_prefill_logits(name, window):
    model = tiny(name, window)
    ids = tokens(2, 17)
    padding = torch.ones(2, 17, dtype=torch.long)
    padding[1, :6] = 0  # left padding
    want, got = both(model, lambda m: m(ids).logits)
    torch.testing.assert_close(got, want, **TOL)
    want, got = both(model, lambda m: m(ids, attention_mask=padding).logits)
    torch.testing.assert_close(got[0], want[0], **TOL)
    torch.testing.assert_close(got[1, 6:], want[1, 6:], **TOL)  # the padded positions are never read


@pytest.mark.parametrize("cache", ["dynamic", "static"])
@pytest.mark.parametrize("name", ["mistral", "gemma2"])
def test_greedy_generation(name, cache):
    """Decode steps against the cache, past the window: the same tokens and the same scores each step."""
    model = tiny(name, 5)
    ids = tokens(2, 11)
    padding = torch.ones(2, 11, dtype=torch.long)
    padding[1, :4] = 0

    def generate(m):
        return m.generate(ids, attention_mask=padding, max_new_tokens=9, do_sample=False, pad_token_id=0,
                          output_scores=True, return_dict_in_generate=True, cache_implementation=cache)
    want, got = both(model, generate)
    assert torch.equal(got.sequences, want.sequences)
    for step_got, step_want in zip(got.scores, want.scores):
        torch.testing.assert_close(step_got, step_want, **TOL)


@pytest.mark.parametrize("name,window", [("mistral", None), ("mistral", 5), ("gemma2", 5)])
def test_prefill_into_an_empty_static_cache(name, window):
    """Full-attention layers get no mask here (s_q 11, s_k 32); sliding ones get theirs (s_k >= window)."""
    model = tiny(name, window)
    ids = tokens(2, 11)

    def prefill(m):
        cache = transformers.StaticCache(config=m.config, max_cache_len=32)
        return m(ids, past_key_values=cache, use_cache=True).logits
    want, got = both(model, prefill)
    torch.testing.assert_close(got, want, **TOL)
