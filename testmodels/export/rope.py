"""Rotary position embeddings.

rope_llama        HF LlamaForCausalLM (v4.4x): LlamaRotaryEmbedding computed from a position_ids input
                  (inv_freq @ position_ids), rotate_half, apply_rotary_pos_emb, GQA with repeat_kv, RMSNorm.
rope_llama_fp16   the same model in float16 (see export.py for how it is traced).
rope_linear       HF LlamaLinearScalingRotaryEmbedding (v4.36): cos/sin cache buffers over
                  t / factor, sliced [:seq_len] and gathered with position_ids.
rope_ntk          HF LlamaDynamicNTKScalingRotaryEmbedding, written so the seq-len branch traces.
rope_llama3       HF rope_init_fn "llama3" (_compute_llama3_parameters).
rope_yarn         HF rope_init_fn "yarn" (_compute_yarn_parameters) with attention_scaling (mscale).
rope_qwen2        HF Qwen2 attention (q/k/v bias), rope_theta 1e6, multi-query (1 kv head).
rope_kvcache      Llama decoder step: past_key_i / past_value_i inputs, present outputs,
                  positions arange(past_len, past_len + seq).
rope_gptj         HF GPTJ: interleaved rotate_every_two, partial rotary_dim, embed_positions
                  table gathered with position_ids, parallel attention/MLP.
rope_neox         HF GPTNeoX (v4.2x): rotary_pct 0.5, cos/sin cache sliced to the sequence,
                  fused qkv, baddbmm, parallel residual.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from common import (
    Input,
    LlamaMLP,
    NewGELUActivation,
    RMSNorm,
    Spec,
    left_padded_mask,
    mask_input,
    offset_positions,
    position_ids_input,
    randomize_norms,
    right_padded_mask,
    seed_for,
    token_ids_input,
)

# --------------------------------------------------------------------------
# rotary embeddings after transformers/modeling_rope_utils.py and modeling_llama.py


def default_inv_freq(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def compute_llama3_parameters(base, dim, factor, low_freq_factor, high_freq_factor, old_context_len):
    """transformers.modeling_rope_utils._compute_llama3_parameters."""
    inv_freq = default_inv_freq(base, dim)
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    # wavelen < high_freq_wavelen: do nothing
    # wavelen > low_freq_wavelen: divide by factor
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    # otherwise: interpolate between the two, using a smooth factor
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    inv_freq_llama = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    return inv_freq_llama, 1.0


def yarn_get_mscale(scale, mscale=1):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
    return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))


def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings):
    low = math.floor(find_correction_dim(low_rot, dim, base, max_position_embeddings))
    high = math.ceil(find_correction_dim(high_rot, dim, base, max_position_embeddings))
    return max(low, 0), min(high, dim - 1)


def linear_ramp_factor(min, max, dim):
    if min == max:
        max += 0.001  # Prevent singularity
    linear_func = (torch.arange(dim, dtype=torch.float32) - min) / (max - min)
    ramp_func = torch.clamp(linear_func, 0, 1)
    return ramp_func


def compute_yarn_parameters(base, dim, factor, original_max_position_embeddings, beta_fast=32, beta_slow=1):
    """transformers.modeling_rope_utils._compute_yarn_parameters."""
    attention_factor = yarn_get_mscale(factor)
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)
    low, high = find_correction_range(beta_fast, beta_slow, dim, base, original_max_position_embeddings)
    # Get n-dimensional rotational scaling corrected for extrapolation
    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2).float()
    inv_freq = (
        inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
        + inv_freq_extrapolation * inv_freq_extrapolation_factor
    )
    return inv_freq, attention_factor, (low, high)


class LlamaRotaryEmbedding(nn.Module):
    """LlamaRotaryEmbedding (v4.45): inv_freq from a rope_init_fn, cos/sin computed per call."""

    def __init__(self, inv_freq, attention_scaling=1.0):
        super().__init__()
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = attention_scaling

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
        # advanced RoPE types (e.g. yarn) apply a post-processing scaling factor
        cos = cos * self.attention_scaling
        sin = sin * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


class LlamaDynamicNTKScalingRotaryEmbedding(LlamaRotaryEmbedding):
    """LlamaDynamicNTKScalingRotaryEmbedding (v4.40), traceable.

    HF writes ``if seq_len > self.max_position_embeddings: base = ...`` -- a Python branch on a
    traced value, which torch.jit.trace freezes to whichever way it went while tracing. The
    same rule without the branch: the NTK ratio factor*L/max - (factor-1) is <= 1 exactly
    when L <= max, so clamping it at 1 selects the original base (1 ** x == 1 exactly).
    """

    def __init__(self, dim, max_position_embeddings, base, scaling_factor):
        super().__init__(default_inv_freq(base, dim))
        self.dim = dim
        self.base = base
        self.max_position_embeddings = max_position_embeddings
        self.scaling_factor = scaling_factor

    @torch.no_grad()
    def forward(self, x, position_ids):
        seq_len = torch.max(position_ids) + 1
        ntk = torch.clamp(self.scaling_factor * seq_len.float() / self.max_position_embeddings - (self.scaling_factor - 1), min=1.0)
        base = self.base * ntk ** (self.dim / (self.dim - 2))
        inv_freq = 1.0 / (base ** (torch.arange(0, self.dim, 2, dtype=torch.int64).float() / self.dim))
        inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)


class LlamaLinearScalingRotaryEmbeddingCached(nn.Module):
    """LlamaLinearScalingRotaryEmbedding as in transformers v4.36: cos/sin caches of
    max_position_embeddings rows over t / scaling_factor, returned sliced [:seq_len]."""

    def __init__(self, dim, max_position_embeddings=2048, base=10000, scaling_factor=1.0):
        super().__init__()
        self.scaling_factor = scaling_factor
        self.dim = dim
        self.max_position_embeddings = max_position_embeddings
        self.base = base
        inv_freq = 1.0 / (self.base ** (torch.arange(0, self.dim, 2).float() / self.dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._set_cos_sin_cache(seq_len=max_position_embeddings, dtype=torch.get_default_dtype())

    def _set_cos_sin_cache(self, seq_len, dtype):
        self.max_seq_len_cached = seq_len
        t = torch.arange(self.max_seq_len_cached, dtype=self.inv_freq.dtype)
        t = t / self.scaling_factor
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(dtype), persistent=False)

    def forward(self, x, seq_len=None):
        # v4.36 recomputes the cache when seq_len > max_seq_len_cached (a Python branch; the
        # export keeps the 128-row table).
        return (
            self.cos_cached[:seq_len].to(dtype=x.dtype),
            self.sin_cached[:seq_len].to(dtype=x.dtype),
        )


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """v4.40+: cos/sin are [batch, seq, dim] already selected by position_ids."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def apply_rotary_pos_emb_v436(q, k, cos, sin, position_ids, unsqueeze_dim=1):
    """v4.36: cos/sin are the [seq, dim] cache slices, gathered here with position_ids."""
    cos = cos[position_ids].unsqueeze(unsqueeze_dim)
    sin = sin[position_ids].unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def causal_4d_mask(attention_mask, q_len, past_len, dtype):
    """The additive mask of LlamaModel._update_causal_mask: 0 where a query may attend,
    finfo(dtype).min where the key is in the future or padding."""
    min_dtype = torch.finfo(dtype).min
    kv_len = past_len + q_len
    cache_position = torch.arange(past_len, kv_len)
    masked = torch.arange(kv_len)[None, :] > cache_position[:, None]
    masked = masked[None, None, :, :] | (attention_mask[:, None, None, :] == 0)
    return torch.zeros(masked.shape, dtype=dtype).masked_fill(masked, min_dtype)


class LlamaAttention(nn.Module):
    def __init__(self, cfg, rope_style):
        super().__init__()
        self.hidden_size = cfg["hidden_size"]
        self.num_heads = cfg["num_heads"]
        self.head_dim = self.hidden_size // self.num_heads
        self.num_key_value_heads = cfg["num_kv_heads"]
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        bias = cfg.get("qkv_bias", False)
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.hidden_size, self.hidden_size, bias=False)
        self.rope_style = rope_style  # "v445" (cos, sin given) or "v436" (rotary_emb cache here)
        if rope_style == "v436":
            self.rotary_emb = LlamaLinearScalingRotaryEmbeddingCached(
                self.head_dim, cfg["max_position_embeddings"], cfg["rope_theta"], cfg["factor"]
            )

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings=None, past_key_value=None):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim).transpose(1, 2)
        if self.rope_style == "v436":
            kv_seq_len = key_states.shape[-2]
            cos, sin = self.rotary_emb(value_states, seq_len=kv_seq_len)
            query_states, key_states = apply_rotary_pos_emb_v436(query_states, key_states, cos, sin, position_ids)
        else:
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        present = None
        if past_key_value is not None:
            key_states = torch.cat([past_key_value[0], key_states], dim=-2)
            value_states = torch.cat([past_key_value[1], value_states], dim=-2)
            present = (key_states, value_states)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, self.hidden_size)
        return self.o_proj(attn_output), present


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg, rope_style):
        super().__init__()
        self.self_attn = LlamaAttention(cfg, rope_style)
        self.mlp = LlamaMLP(cfg["hidden_size"], cfg["intermediate_size"])
        self.input_layernorm = RMSNorm(cfg["hidden_size"], eps=cfg.get("rms_norm_eps", 1e-6))
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], eps=cfg.get("rms_norm_eps", 1e-6))

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings, past_key_value=None):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, present = self.self_attn(hidden_states, attention_mask, position_ids, position_embeddings, past_key_value)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.mlp(self.post_attention_layernorm(hidden_states))
        return residual + hidden_states, present


class LlamaForCausalLM(nn.Module):
    """LlamaModel + lm_head. rotary: a module (cos, sin) = rotary(x, position_ids), or None
    when each attention owns a v4.36 cache (rope_style "v436")."""

    def __init__(self, cfg, rotary=None, rope_style="v445", kv_cache=False):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([LlamaDecoderLayer(cfg, rope_style) for _ in range(cfg["num_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], eps=cfg.get("rms_norm_eps", 1e-6))
        self.rotary_emb = rotary
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.kv_cache = kv_cache

    def forward(self, input_ids, attention_mask, position_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        q_len = input_ids.shape[1]
        causal_mask = causal_4d_mask(attention_mask, q_len, 0, inputs_embeds.dtype)
        position_embeddings = self.rotary_emb(inputs_embeds, position_ids) if self.rotary_emb is not None else None
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states, _ = layer(hidden_states, causal_mask, position_ids, position_embeddings)
        return self.lm_head(self.norm(hidden_states))


class LlamaDecoderStep(LlamaForCausalLM):
    """One decoding step with a KV cache; positions continue from the cache length
    (cache_position = arange(past_seen_tokens, past_seen_tokens + seq); position_ids =
    cache_position.unsqueeze(0), as LlamaModel.forward does when position_ids is None)."""

    def forward(self, input_ids, attention_mask, *past):
        inputs_embeds = self.embed_tokens(input_ids)
        q_len = input_ids.shape[1]
        past_seen_tokens = past[0].shape[2]
        cache_position = torch.arange(past_seen_tokens, past_seen_tokens + q_len)
        position_ids = cache_position.unsqueeze(0)
        causal_mask = causal_4d_mask(attention_mask, q_len, past_seen_tokens, inputs_embeds.dtype)
        position_embeddings = self.rotary_emb(inputs_embeds, position_ids)
        hidden_states = inputs_embeds
        presents = []
        for i, layer in enumerate(self.layers):
            hidden_states, present = layer(hidden_states, causal_mask, position_ids, position_embeddings, (past[2 * i], past[2 * i + 1]))
            presents.extend(present)
        return (self.lm_head(self.norm(hidden_states)), *presents)


# --------------------------------------------------------------------------
# GPT-J (transformers/models/gptj/modeling_gptj.py, v4.3x)


def create_sinusoidal_positions(num_pos, dim):
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim))
    sinusoid_inp = torch.einsum("i , j -> i j", torch.arange(num_pos, dtype=torch.float), inv_freq).float()
    return torch.cat((torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)), dim=1)


def rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)  # in einsum notation: rearrange(x, '... d j -> ... (d j)')


def apply_rotary_pos_emb_gptj(tensor, sin, cos):
    sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
    cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
    return (tensor * cos) + (rotate_every_two(tensor) * sin)


GPTJ = dict(vocab_size=64, n_positions=64, n_embd=32, n_head=2, rotary_dim=8, n_layer=2, n_inner=64)


class GPTJAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        max_positions = config["n_positions"]
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.embed_dim = config["n_embd"]
        self.num_attention_heads = config["n_head"]
        self.head_dim = self.embed_dim // self.num_attention_heads
        self.scale_attn = torch.sqrt(torch.tensor(self.head_dim, dtype=torch.float32)).to(torch.get_default_dtype())
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim, bias=False)
        self.rotary_dim = config["rotary_dim"]
        pos_embd_dim = self.rotary_dim or self.embed_dim
        self.embed_positions = create_sinusoidal_positions(max_positions, pos_embd_dim)

    def _split_heads(self, tensor, num_attention_heads, attn_head_size, rotary):
        new_shape = tensor.size()[:-1] + (num_attention_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        if rotary:
            return tensor
        return tensor.permute(0, 2, 1, 3)

    def _merge_heads(self, tensor, num_attention_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_attention_heads * attn_head_size,)
        return tensor.view(new_shape)

    def _attn(self, query, key, value, attention_mask=None):
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        query = query.to(torch.float32)
        key = key.to(torch.float32)
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.tensor(mask_value, dtype=attn_weights.dtype).to(attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights, mask_value)
        attn_weights = attn_weights / self.scale_attn
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.to(value.dtype)
        return torch.matmul(attn_weights, value)

    def _get_embed_positions(self, position_ids):
        embed_positions = self.embed_positions
        return embed_positions.repeat(position_ids.shape[0], 1, 1)

    def forward(self, hidden_states, position_ids, attention_mask):
        query = self.q_proj(hidden_states)
        key = self.k_proj(hidden_states)
        value = self.v_proj(hidden_states)
        query = self._split_heads(query, self.num_attention_heads, self.head_dim, True)
        key = self._split_heads(key, self.num_attention_heads, self.head_dim, True)
        value = self._split_heads(value, self.num_attention_heads, self.head_dim, False)
        embed_positions = self._get_embed_positions(position_ids)
        repeated_position_ids = position_ids.unsqueeze(-1).repeat(1, 1, embed_positions.shape[-1])
        sincos = torch.gather(embed_positions, 1, repeated_position_ids)
        sin, cos = torch.split(sincos, sincos.shape[-1] // 2, dim=-1)
        if self.rotary_dim is not None:
            k_rot = key[:, :, :, : self.rotary_dim]
            k_pass = key[:, :, :, self.rotary_dim :]
            q_rot = query[:, :, :, : self.rotary_dim]
            q_pass = query[:, :, :, self.rotary_dim :]
            k_rot = apply_rotary_pos_emb_gptj(k_rot, sin, cos)
            q_rot = apply_rotary_pos_emb_gptj(q_rot, sin, cos)
            key = torch.cat([k_rot, k_pass], dim=-1)
            query = torch.cat([q_rot, q_pass], dim=-1)
        key = key.permute(0, 2, 1, 3)
        query = query.permute(0, 2, 1, 3)
        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_attention_heads, self.head_dim)
        return self.out_proj(attn_output)


class GPTJBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config["n_embd"], eps=1e-5)
        self.attn = GPTJAttention(config)
        self.fc_in = nn.Linear(config["n_embd"], config["n_inner"])
        self.fc_out = nn.Linear(config["n_inner"], config["n_embd"])
        self.act = NewGELUActivation()

    def forward(self, hidden_states, position_ids, attention_mask):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_outputs = self.attn(hidden_states, position_ids, attention_mask)
        feed_forward_hidden_states = self.fc_out(self.act(self.fc_in(hidden_states)))
        return attn_outputs + feed_forward_hidden_states + residual


class GPTJForCausalLM(nn.Module):
    def __init__(self, config=GPTJ):
        super().__init__()
        self.wte = nn.Embedding(config["vocab_size"], config["n_embd"])
        self.h = nn.ModuleList([GPTJBlock(config) for _ in range(config["n_layer"])])
        self.ln_f = nn.LayerNorm(config["n_embd"], eps=1e-5)
        self.lm_head = nn.Linear(config["n_embd"], config["vocab_size"])

    def forward(self, input_ids, attention_mask, position_ids):
        attention_mask = attention_mask[:, None, None, :].to(torch.float32)
        attention_mask = (1.0 - attention_mask) * torch.finfo(torch.float32).min
        hidden_states = self.wte(input_ids)
        for block in self.h:
            hidden_states = block(hidden_states, position_ids, attention_mask)
        return self.lm_head(self.ln_f(hidden_states))


# --------------------------------------------------------------------------
# GPT-NeoX (transformers/models/gpt_neox/modeling_gpt_neox.py, v4.2x)

NEOX = dict(vocab_size=64, hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64,
            rotary_pct=0.5, rotary_emb_base=10000, max_position_embeddings=64)


class NeoXRotaryEmbedding(torch.nn.Module):
    def __init__(self, dim, max_position_embeddings, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)
        # Build here to make `torch.jit.trace` work.
        self.max_seq_len_cached = max_position_embeddings
        t = torch.arange(self.max_seq_len_cached, dtype=self.inv_freq.dtype)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.cos_cached = emb.cos()[None, None, :, :]
        self.sin_cached = emb.sin()[None, None, :, :]

    def forward(self, x, seq_len=None):
        # (v4.2x recomputes the caches when seq_len > max_seq_len_cached: a Python branch.)
        # Note: [:seq_len] slices the leading size-1 axis, as in v4.2x; apply_rotary_pos_emb
        # does the real slicing to the sequence.
        return self.cos_cached[:seq_len, ...].to(x.device), self.sin_cached[:seq_len, ...].to(x.device)


def apply_rotary_pos_emb_neox(q, k, cos, sin, offset: int = 0):
    cos = cos[..., offset : q.shape[-2] + offset, :]
    sin = sin[..., offset : q.shape[-2] + offset, :]
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class GPTNeoXAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config["num_attention_heads"]
        self.hidden_size = config["hidden_size"]
        self.head_size = self.hidden_size // self.num_attention_heads
        self.rotary_ndims = int(self.head_size * config["rotary_pct"])
        max_positions = config["max_position_embeddings"]
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.uint8)).view(1, 1, max_positions, max_positions).bool(),
        )
        self.register_buffer("masked_bias", torch.tensor(-1e9))
        self.rotary_emb = NeoXRotaryEmbedding(self.rotary_ndims, max_positions, base=config["rotary_emb_base"])
        self.norm_factor = torch.sqrt(torch.tensor(self.head_size, dtype=torch.float32)).to(torch.get_default_dtype())
        self.query_key_value = nn.Linear(config["hidden_size"], 3 * config["hidden_size"])
        self.dense = nn.Linear(config["hidden_size"], config["hidden_size"])

    def forward(self, hidden_states, attention_mask):
        qkv = self.query_key_value(hidden_states)
        new_qkv_shape = qkv.size()[:-1] + (self.num_attention_heads, 3 * self.head_size)
        qkv = qkv.view(*new_qkv_shape)
        query = qkv[..., : self.head_size].permute(0, 2, 1, 3)
        key = qkv[..., self.head_size : 2 * self.head_size].permute(0, 2, 1, 3)
        value = qkv[..., 2 * self.head_size :].permute(0, 2, 1, 3)
        query_rot = query[..., : self.rotary_ndims]
        query_pass = query[..., self.rotary_ndims :]
        key_rot = key[..., : self.rotary_ndims]
        key_pass = key[..., self.rotary_ndims :]
        seq_len = key.shape[-2]
        offset = 0  # no layer_past in this export
        cos, sin = self.rotary_emb(value, seq_len=seq_len)
        query, key = apply_rotary_pos_emb_neox(query_rot, key_rot, cos, sin, offset=offset)
        query = torch.cat((query, query_pass), dim=-1)
        key = torch.cat((key, key_pass), dim=-1)
        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output)
        return self.dense(attn_output)

    def _merge_heads(self, tensor):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        return tensor.view(tensor.size(0), tensor.size(1), self.num_attention_heads * self.head_size)

    def _attn(self, query, key, value, attention_mask=None):
        batch_size, num_attention_heads, query_length, attn_head_size = query.size()
        key_length = key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        query = query.view(batch_size * num_attention_heads, query_length, attn_head_size)
        key = key.view(batch_size * num_attention_heads, key_length, attn_head_size)
        attn_scores = torch.zeros(batch_size * num_attention_heads, query_length, key_length, dtype=query.dtype)
        attn_scores = torch.baddbmm(attn_scores, query, key.transpose(1, 2), beta=1.0, alpha=(1.0 / self.norm_factor))
        attn_scores = attn_scores.view(batch_size, num_attention_heads, query_length, key_length)
        mask_value = torch.finfo(attn_scores.dtype).min
        mask_value = torch.tensor(mask_value, dtype=attn_scores.dtype)
        attn_scores = torch.where(causal_mask, attn_scores, mask_value)
        if attention_mask is not None:
            attn_scores = attn_scores + attention_mask
        attn_weights = nn.functional.softmax(attn_scores, dim=-1)
        attn_weights = attn_weights.to(value.dtype)
        return torch.matmul(attn_weights, value)


class GPTNeoXLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(config["hidden_size"], eps=1e-5)
        self.post_attention_layernorm = nn.LayerNorm(config["hidden_size"], eps=1e-5)
        self.attention = GPTNeoXAttention(config)
        self.dense_h_to_4h = nn.Linear(config["hidden_size"], config["intermediate_size"])
        self.dense_4h_to_h = nn.Linear(config["intermediate_size"], config["hidden_size"])

    def forward(self, hidden_states, attention_mask):
        attn_output = self.attention(self.input_layernorm(hidden_states), attention_mask)
        # use_parallel_residual: x = x + attn(ln1(x)) + mlp(ln2(x))
        mlp_output = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(hidden_states))))
        return mlp_output + attn_output + hidden_states


class GPTNeoXForCausalLM(nn.Module):
    def __init__(self, config=NEOX):
        super().__init__()
        self.embed_in = nn.Embedding(config["vocab_size"], config["hidden_size"])
        self.layers = nn.ModuleList([GPTNeoXLayer(config) for _ in range(config["num_hidden_layers"])])
        self.final_layer_norm = nn.LayerNorm(config["hidden_size"], eps=1e-5)
        self.embed_out = nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)

    def forward(self, input_ids, attention_mask):
        attention_mask = attention_mask[:, None, None, :].to(torch.float32)
        attention_mask = (1.0 - attention_mask) * torch.finfo(torch.float32).min
        hidden_states = self.embed_in(input_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, attention_mask)
        return self.embed_out(self.final_layer_norm(hidden_states))


# --------------------------------------------------------------------------
# configurations and specs


def llama_cfg(**kw):
    cfg = dict(vocab_size=64, hidden_size=32, num_heads=2, num_kv_heads=2, intermediate_size=64, num_layers=2,
               rope_theta=10000.0, max_position_embeddings=128)
    cfg.update(kw)
    return cfg


CFG_LLAMA = llama_cfg(hidden_size=64, num_heads=4, num_kv_heads=2, intermediate_size=128)
CFG_LINEAR = llama_cfg(factor=2.0, max_position_embeddings=128)
CFG_NTK = llama_cfg(factor=2.0, max_position_embeddings=16)
CFG_LLAMA3 = llama_cfg(rope_theta=500000.0, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192,
                       max_position_embeddings=65536)
CFG_YARN = llama_cfg(factor=4.0, original_max_position_embeddings=4096, beta_fast=32.0, beta_slow=1.0, max_position_embeddings=16384)
CFG_QWEN2 = llama_cfg(rope_theta=1000000.0, num_heads=2, num_kv_heads=1, qkv_bias=True, rms_norm_eps=1e-6, max_position_embeddings=32768)
CFG_KV = llama_cfg()


def head_dim(cfg):
    return cfg["hidden_size"] // cfg["num_heads"]


def build_llama():
    return LlamaForCausalLM(CFG_LLAMA, LlamaRotaryEmbedding(default_inv_freq(CFG_LLAMA["rope_theta"], head_dim(CFG_LLAMA))))


def build_linear():
    return LlamaForCausalLM(CFG_LINEAR, None, rope_style="v436")


def build_ntk():
    c = CFG_NTK
    return LlamaForCausalLM(c, LlamaDynamicNTKScalingRotaryEmbedding(head_dim(c), c["max_position_embeddings"], c["rope_theta"], c["factor"]))


def build_llama3():
    c = CFG_LLAMA3
    inv_freq, scale = compute_llama3_parameters(c["rope_theta"], head_dim(c), c["factor"], c["low_freq_factor"], c["high_freq_factor"], c["original_max_position_embeddings"])
    return LlamaForCausalLM(c, LlamaRotaryEmbedding(inv_freq, scale))


YARN_INV_FREQ, YARN_ATTENTION_FACTOR, YARN_CORRECTION_RANGE = compute_yarn_parameters(
    CFG_YARN["rope_theta"], head_dim(CFG_YARN), CFG_YARN["factor"], CFG_YARN["original_max_position_embeddings"],
    CFG_YARN["beta_fast"], CFG_YARN["beta_slow"])


def build_yarn():
    return LlamaForCausalLM(CFG_YARN, LlamaRotaryEmbedding(YARN_INV_FREQ.clone(), YARN_ATTENTION_FACTOR))


def build_qwen2():
    return LlamaForCausalLM(CFG_QWEN2, LlamaRotaryEmbedding(default_inv_freq(CFG_QWEN2["rope_theta"], head_dim(CFG_QWEN2))))


def build_kv():
    return LlamaDecoderStep(CFG_KV, LlamaRotaryEmbedding(default_inv_freq(CFG_KV["rope_theta"], head_dim(CFG_KV))), kv_cache=True)


def hf_position_ids(mask):
    """What HF generate() feeds with a left-padded batch: cumsum(mask) - 1, 1 on padding."""
    pos = mask.long().cumsum(-1) - 1
    return pos.masked_fill(mask == 0, 1)


def llama_inputs(name, vocab, max_positions, test_seq=12, positions="hf", pos_note=None):
    def make():
        mtr = left_padded_mask([8, 6], 8)
        mte = left_padded_mask([test_seq, test_seq - 3, test_seq], test_seq)
        if positions == "hf":
            ptr, pte = hf_position_ids(mtr), hf_position_ids(mte)
        elif positions == "plain":  # no padding, positions 0..seq-1
            mtr = torch.ones(2, 8, dtype=torch.int64)
            mte = torch.ones(3, test_seq, dtype=torch.int64)
            ptr, pte = hf_position_ids(mtr), hf_position_ids(mte)
        else:  # "offset": rows that do not start at 0 (a chunk in the middle of a sequence)
            mtr = torch.ones(2, 8, dtype=torch.int64)
            mte = torch.ones(3, test_seq, dtype=torch.int64)
            ptr = offset_positions(2, 8, [0, 5])
            pte = offset_positions(3, test_seq, [0, 7, max_positions - test_seq])
        return [
            token_ids_input(name, vocab, (2, 8), (3, test_seq), pad_id=0, mask_trace=mtr, mask_test=mte),
            mask_input(mtr, mte, "left" if positions == "hf" else "none"),
            position_ids_input(ptr, pte, max_positions, pos_note),
        ]

    return make


def rope_params(cfg, layout="half_split", scaling="none", factor=1.0, max_positions=None, rotary_dim=None, **extra):
    p = {
        "layout": layout,
        "base": float(cfg["rope_theta"]),
        "head_dim": head_dim(cfg),
        "rotary_dim": rotary_dim if rotary_dim is not None else head_dim(cfg),
        "num_heads": cfg["num_heads"],
        "num_kv_heads": cfg["num_kv_heads"],
        "scaling": scaling,
        "factor": float(factor),
        "max_positions": max_positions,
    }
    p.update(extra)
    return p


def kv_inputs():
    c = CFG_KV
    hd = head_dim(c)
    name = "rope_kvcache"
    # The test past is what the model itself produced for a 6-token prompt (keys already
    # rotated), the trace past is random with 4 positions.
    torch.manual_seed(4242)
    g = torch.Generator()
    g.manual_seed(77)
    prompt = torch.randint(0, c["vocab_size"], (2, 6), generator=g)
    step = torch.randint(0, c["vocab_size"], (2, 3), generator=g)
    torch.manual_seed(seed_for(name))  # the same weights export.py builds
    model = build_kv()
    randomize_norms(model, seed_for(name) + 1)
    model.eval()
    empty = [torch.zeros(2, c["num_kv_heads"], 0, hd) for _ in range(2 * c["num_layers"])]
    with torch.no_grad():
        outs = model(prompt, torch.ones(2, 6, dtype=torch.int64), *empty)
    past_test = list(outs[1:])
    past_trace = [torch.randn(2, c["num_kv_heads"], 4, hd, generator=g) for _ in range(2 * c["num_layers"])]
    ins = [
        Input("input_ids", "input_ids", torch.randint(0, c["vocab_size"], (2, 2), generator=g), step, {0: "batch", 1: "sequence"},
              {"vocab_size": c["vocab_size"], "range": [0, c["vocab_size"] - 1]}),
        mask_input(torch.ones(2, 6, dtype=torch.int64), torch.ones(2, 9, dtype=torch.int64), "none",
                   axes={0: "batch", 1: "total_sequence"}),
    ]
    ins[1].meaning["note"] = "covers past + current tokens: [batch, past_sequence + sequence]"
    for i in range(c["num_layers"]):
        for kind, k in (("key", 0), ("value", 1)):
            ins.append(Input(f"past_{kind}_{i}", f"past_{kind}", past_trace[2 * i + k], past_test[2 * i + k],
                             {0: "batch", 2: "past_sequence"},
                             {"layer": i, "layout": "[batch, num_kv_heads, past_sequence, head_dim]",
                              "note": "keys are stored after RoPE" if kind == "key" else "values"}))
    return ins


def gptj_inputs():
    name = "rope_gptj"
    mtr = torch.ones(2, 8, dtype=torch.int64)
    mte = right_padded_mask([12, 12, 9], 12)
    return [
        token_ids_input(name, GPTJ["vocab_size"], (2, 8), (3, 12), pad_id=0, mask_trace=mtr, mask_test=mte),
        mask_input(mtr, mte, "right"),
        position_ids_input(offset_positions(2, 8, [0, 3]), offset_positions(3, 12, [0, 20, GPTJ["n_positions"] - 12]), GPTJ["n_positions"]),
    ]


def neox_inputs():
    name = "rope_neox"
    mtr = torch.ones(2, 8, dtype=torch.int64)
    mte = right_padded_mask([12, 8, 12], 12)
    return [
        token_ids_input(name, NEOX["vocab_size"], (2, 8), (3, 12), pad_id=0, mask_trace=mtr, mask_test=mte),
        mask_input(mtr, mte, "right"),
    ]


LLAMA_OUT = dict(outputs=["logits"], output_axes={"logits": {0: "batch", 1: "sequence"}})

SPECS = [
    Spec(
        name="rope_llama",
        build=build_llama,
        inputs=llama_inputs("rope_llama", 64, CFG_LLAMA["max_position_embeddings"]),
        reference="HF transformers LlamaForCausalLM (LlamaRotaryEmbedding, rotate_half, apply_rotary_pos_emb, repeat_kv, LlamaRMSNorm)",
        variant="half-split RoPE computed from a position_ids input (inv_freq @ position_ids, cat(freqs, freqs)), GQA 4 query / 2 kv heads, left-padded batch with HF generate-style position_ids",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(CFG_LLAMA)}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_llama_opset14",
        build=build_llama,
        inputs=llama_inputs("rope_llama_opset14", 64, CFG_LLAMA["max_position_embeddings"]),
        reference="HF transformers LlamaForCausalLM (LlamaRotaryEmbedding, rotate_half, apply_rotary_pos_emb, repeat_kv, LlamaRMSNorm)",
        variant="rope_llama exported at opset 14 (ReduceMean with an axes attribute, Softmax-13 semantics): the input of onnxpe rewrite --rope-op onnx's opset upgrade to 23",
        num_layers=2,
        opset=14,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(CFG_LLAMA)}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_llama_fp16",
        build=build_llama,
        # no padding: a fully masked row is uniform in float32 but not after fp16 rounding of
        # scores + (-65504), so padded rows would not be comparable with the reference.
        inputs=llama_inputs("rope_llama_fp16", 64, CFG_LLAMA["max_position_embeddings"], positions="plain"),
        reference="HF transformers LlamaForCausalLM (model.half())",
        variant="rope_llama in float16: RoPE cos/sin computed in float32 and cast to float16 (.to(x.dtype)), RMSNorm and softmax upcast to float32; traced as bfloat16 and relabelled float16 (torch 1.13 has no CPU Half kernels)",
        num_layers=2,
        dtype="float16",
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(CFG_LLAMA)}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_linear",
        build=build_linear,
        inputs=llama_inputs("rope_linear", 64, CFG_LINEAR["max_position_embeddings"],
                            pos_note="gathered from the cache sliced to the sequence length: position_ids must be < sequence length (v4.36 behaviour)"),
        reference="HF transformers v4.36 LlamaLinearScalingRotaryEmbedding + apply_rotary_pos_emb(position_ids)",
        variant="linear position interpolation (factor 2): cos_cached/sin_cached [128, head_dim] buffers over t/2, sliced [:kv_seq_len] per attention and gathered with position_ids",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(CFG_LINEAR, scaling="linear", factor=2.0, max_positions=128)}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_ntk",
        build=build_ntk,
        inputs=llama_inputs("rope_ntk", 64, 64, test_seq=20, positions="offset",
                            pos_note="the base grows with max(position_ids)+1 beyond original_max_positions 16 (test data reaches 63)"),
        reference="HF transformers LlamaDynamicNTKScalingRotaryEmbedding (v4.40), branch made traceable",
        variant="dynamic NTK: base' = base * clamp(factor*L/16 - (factor-1), min=1)^(d/(d-2)) with L = max(position_ids)+1, inv_freq recomputed in the graph; factor 2, original max 16",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(CFG_NTK, scaling="ntk", factor=2.0, original_max_positions=16, dynamic=True)}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_llama3",
        build=build_llama3,
        inputs=llama_inputs("rope_llama3", 64, 128),
        reference="HF transformers LlamaRotaryEmbedding with rope_type llama3 (_compute_llama3_parameters)",
        variant="llama3 frequency rule (factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192), base 500000; with head_dim 16 the 8 frequencies fall in all three bands (4 kept, 1 smoothed, 3 divided by 8)",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(
            # The rule reads the three only through the wavelengths 8192/1 and 8192/4:
            # (16384, 2, 8), (4096, 0.5, 2), ... give the same frequencies; the graph
            # does not fix them.
            CFG_LLAMA3, scaling="llama3", factor=8.0, low_freq_factor=None, high_freq_factor=None, original_max_positions=None)}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_yarn",
        build=build_yarn,
        inputs=llama_inputs("rope_yarn", 64, 128),
        reference="HF transformers LlamaRotaryEmbedding with rope_type yarn (_compute_yarn_parameters)",
        variant=f"YaRN: factor 4, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1 (correction range {YARN_CORRECTION_RANGE}), linear ramp mask, cos/sin multiplied by attention_factor 0.1*ln(4)+1",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(
            # The ramp depends on the length only through length/beta: (2, 6) is also
            # 2048 with betas 32/1, 8192 with 64/2, ...; the graph does not fix them.
            CFG_YARN, scaling="yarn", factor=4.0, original_max_positions=None, beta_fast=None, beta_slow=None,
            attention_factor=float(YARN_ATTENTION_FACTOR), correction_range=list(YARN_CORRECTION_RANGE))}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_qwen2",
        build=build_qwen2,
        inputs=llama_inputs("rope_qwen2", 64, 32768),
        reference="HF transformers Qwen2ForCausalLM (Qwen2Attention with q/k/v bias, Qwen2RotaryEmbedding)",
        variant="half-split RoPE with a large base (rope_theta 1e6), multi-query attention (2 query heads, 1 kv head), q/k/v projections with bias",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(CFG_QWEN2)}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_kvcache",
        build=build_kv,
        inputs=kv_inputs,
        outputs=["logits", "present_key_0", "present_value_0", "present_key_1", "present_value_1"],
        output_axes={"logits": {0: "batch", 1: "sequence"},
                     **{f"present_{k}_{i}": {0: "batch", 2: "total_sequence"} for i in range(2) for k in ("key", "value")}},
        reference="HF transformers LlamaForCausalLM decoding step with past_key_values (DynamicCache), legacy per-layer tensors",
        variant="one decoder step: past_key_i/past_value_i inputs [B, kv_heads, P, D] (post-RoPE keys), cache_position = arange(P, P+S) from the past length, present_* outputs = cat(past, new)",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": rope_params(CFG_KV, position_source="past_length")}],
    ),
    Spec(
        name="rope_gptj",
        build=lambda: GPTJForCausalLM(),
        inputs=gptj_inputs,
        reference="HF transformers GPTJForCausalLM (create_sinusoidal_positions, rotate_every_two, apply_rotary_pos_emb)",
        variant="interleaved RoPE (rotate_every_two, repeat_interleave(sin/cos, 2)) on the first rotary_dim 8 of head_dim 16; embed_positions [64, 8] = [sin | cos] table gathered with position_ids; parallel attention + MLP",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": {
            "layout": "interleaved", "base": 10000.0, "head_dim": 16, "rotary_dim": 8, "num_heads": 2, "num_kv_heads": 2,
            "scaling": "none", "factor": 1.0, "max_positions": GPTJ["n_positions"]}}],
        **LLAMA_OUT,
    ),
    Spec(
        name="rope_neox",
        build=lambda: GPTNeoXForCausalLM(),
        inputs=neox_inputs,
        reference="HF transformers v4.2x GPTNeoXForCausalLM (RotaryEmbedding cos_cached/sin_cached, apply_rotary_pos_emb with offset)",
        variant="half-split RoPE on rotary_pct 0.5 of head_dim 16 (rotary_ndims 8); cos/sin caches [1, 1, 64, 8] sliced [..., offset:offset+seq, :] (no position_ids input); fused per-head qkv, baddbmm scores, parallel residual",
        num_layers=2,
        findings=[{"scheme": "rope", "layers": [0, 1], "params": {
            "layout": "half_split", "base": 10000.0, "head_dim": 16, "rotary_dim": 8, "num_heads": 2, "num_kv_heads": 2,
            "scaling": "none", "factor": 1.0, "max_positions": NEOX["max_position_embeddings"], "rotary_pct": 0.5}}],
        **LLAMA_OUT,
    ),
]
