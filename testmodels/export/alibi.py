"""ALiBi attention biases.

alibi_bloom  HF BloomForCausalLM: build_alibi_tensor from the attention_mask (positions =
             (cumsum(mask) - 1) * mask), slopes for 6 heads (not a power of two), baddbmm.
alibi_mpt    HF MptForCausalLM: build_mpt_alibi_tensor over max_seq_len key positions
             (1 - max_seq_len .. 0) * slope, alibi_bias_max 8, sliced to the key length.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from common import Spec, left_padded_mask, mask_input, right_padded_mask, token_ids_input

# --------------------------------------------------------------------------
# BLOOM (transformers/models/bloom/modeling_bloom.py, v4.3x)

BLOOM = dict(vocab_size=64, hidden_size=48, n_head=6, n_layer=2, layer_norm_epsilon=1e-5)


def build_alibi_tensor(attention_mask, num_heads, dtype):
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), device=attention_mask.device, dtype=torch.float32)
    powers = torch.arange(1, 1 + closest_power_of_2, device=attention_mask.device, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), device=attention_mask.device, dtype=torch.float32)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, device=attention_mask.device, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    # Note: alibi will added to the attention bias that will be applied to the query, key product of attention
    # => therefore alibi will have to be of shape (batch_size, num_heads, query_length, key_length)
    # => here we set (batch_size=1, num_heads=num_heads, query_length=1, key_length=max_length)
    # => the query_length dimension will then be broadcasted correctly
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


def bloom_slopes(num_heads):
    """The slopes build_alibi_tensor uses, as float32 values."""
    mask = torch.ones(1, 2, dtype=torch.int64)
    a = build_alibi_tensor(mask, num_heads, torch.float32).view(num_heads, 2)
    return [float(v) for v in a[:, 1]]  # position 1 * slope


def bloom_gelu_forward(x):
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


class BloomAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.hidden_size = config["hidden_size"]
        self.num_heads = config["n_head"]
        self.head_dim = self.hidden_size // self.num_heads
        self.inv_norm_factor = 1.0 / math.sqrt(self.head_dim)
        self.beta = 1.0
        self.query_key_value = nn.Linear(self.hidden_size, 3 * self.hidden_size, bias=True)
        self.dense = nn.Linear(self.hidden_size, self.hidden_size)

    def _split_heads(self, fused_qkv):
        batch_size, seq_length, three_times_hidden_size = fused_qkv.shape
        fused_qkv = fused_qkv.view(batch_size, seq_length, self.num_heads, 3, self.head_dim)
        return fused_qkv[..., 0, :], fused_qkv[..., 1, :], fused_qkv[..., 2, :]

    def _merge_heads(self, x):
        batch_size_and_num_heads, seq_length, _ = x.shape
        batch_size = batch_size_and_num_heads // self.num_heads
        x = x.view(batch_size, self.num_heads, seq_length, self.head_dim)
        x = x.permute(0, 2, 1, 3)
        return x.reshape(batch_size, seq_length, self.num_heads * self.head_dim)

    def forward(self, hidden_states, residual, alibi, attention_mask):
        fused_qkv = self.query_key_value(hidden_states)
        (query_layer, key_layer, value_layer) = self._split_heads(fused_qkv)
        batch_size, q_length, _, _ = query_layer.shape
        query_layer = query_layer.transpose(1, 2).reshape(batch_size * self.num_heads, q_length, self.head_dim)
        key_layer = key_layer.permute(0, 2, 3, 1).reshape(batch_size * self.num_heads, self.head_dim, q_length)
        value_layer = value_layer.transpose(1, 2).reshape(batch_size * self.num_heads, q_length, self.head_dim)
        kv_length = key_layer.shape[-1]
        # [batch_size * num_heads, q_length, kv_length]
        # we use `torch.Tensor.baddbmm` instead of `torch.baddbmm` as the latter isn't supported by TorchScript v1.11
        matmul_result = alibi.baddbmm(batch1=query_layer, batch2=key_layer, beta=self.beta, alpha=self.inv_norm_factor)
        attention_scores = matmul_result.view(batch_size, self.num_heads, q_length, kv_length)
        input_dtype = attention_scores.dtype
        attn_weights = torch.masked_fill(attention_scores, attention_mask, torch.finfo(attention_scores.dtype).min)
        attention_probs = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(input_dtype)
        attention_probs_reshaped = attention_probs.view(batch_size * self.num_heads, q_length, kv_length)
        context_layer = torch.bmm(attention_probs_reshaped, value_layer)
        context_layer = self._merge_heads(context_layer)
        return self.dense(context_layer) + residual


class BloomBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        h = config["hidden_size"]
        self.input_layernorm = nn.LayerNorm(h, eps=config["layer_norm_epsilon"])
        self.self_attention = BloomAttention(config)
        self.post_attention_layernorm = nn.LayerNorm(h, eps=config["layer_norm_epsilon"])
        self.dense_h_to_4h = nn.Linear(h, 2 * h)
        self.dense_4h_to_h = nn.Linear(2 * h, h)

    def forward(self, hidden_states, alibi, attention_mask):
        layernorm_output = self.input_layernorm(hidden_states)
        residual = hidden_states  # apply_residual_connection_post_layernorm = False
        attention_output = self.self_attention(layernorm_output, residual, alibi, attention_mask)
        layernorm_output = self.post_attention_layernorm(attention_output)
        residual = attention_output
        return self.dense_4h_to_h(bloom_gelu_forward(self.dense_h_to_4h(layernorm_output))) + residual


def bloom_prepare_attn_mask(attention_mask, input_shape):
    """BloomModel._prepare_attn_mask: bool [B, 1, q, kv], True = masked (future or padding)."""
    seq = input_shape[1]
    seq_ids = torch.arange(seq)
    causal_mask = (seq_ids[None, :] > seq_ids[:, None])[None, None, :, :]  # _make_causal_mask
    expanded_attn_mask = ~(attention_mask[:, None, None, :].to(torch.bool))  # _expand_mask
    return expanded_attn_mask | causal_mask


class BloomForCausalLM(nn.Module):
    def __init__(self, config=BLOOM):
        super().__init__()
        self.num_heads = config["n_head"]
        self.word_embeddings = nn.Embedding(config["vocab_size"], config["hidden_size"])
        self.word_embeddings_layernorm = nn.LayerNorm(config["hidden_size"], eps=config["layer_norm_epsilon"])
        self.h = nn.ModuleList([BloomBlock(config) for _ in range(config["n_layer"])])
        self.ln_f = nn.LayerNorm(config["hidden_size"], eps=config["layer_norm_epsilon"])
        self.lm_head = nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)
        self.lm_head.weight = self.word_embeddings.weight
        nn.init.normal_(self.word_embeddings.weight, std=0.25)  # keeps the tied logits O(1)

    def forward(self, input_ids, attention_mask):
        inputs_embeds = self.word_embeddings(input_ids)
        hidden_states = self.word_embeddings_layernorm(inputs_embeds)
        alibi = build_alibi_tensor(attention_mask, self.num_heads, dtype=hidden_states.dtype)
        causal_mask = bloom_prepare_attn_mask(attention_mask, input_ids.shape)
        for block in self.h:
            hidden_states = block(hidden_states, alibi, causal_mask)
        return self.lm_head(self.ln_f(hidden_states))


# --------------------------------------------------------------------------
# MPT (transformers/models/mpt/modeling_mpt.py)

MPT = dict(vocab_size=64, d_model=32, n_heads=8, n_layers=2, max_seq_len=32, alibi_bias_max=8, expansion_ratio=2)


def build_mpt_alibi_tensor(num_heads, sequence_length, alibi_bias_max=8, device=None):
    alibi = torch.arange(1 - sequence_length, 1, dtype=torch.int32, device=device).view(1, 1, 1, sequence_length)
    num_heads_power_of_2 = 2 ** math.ceil(math.log2(num_heads))
    base = torch.arange(1, num_heads_power_of_2 + 1, dtype=torch.int64, device=device).float()
    base = base * (alibi_bias_max / num_heads_power_of_2)
    slopes = 1.0 / torch.pow(2, base)
    slopes = slopes.view(1, num_heads_power_of_2, 1, 1)
    if num_heads_power_of_2 != num_heads:
        slopes = torch.concat([slopes[:, 1::2, ...], slopes[:, ::2, ...]], dim=1)[:, :num_heads, ...]
    alibi = alibi * slopes
    return alibi.squeeze(0)


def mpt_slopes(num_heads, alibi_bias_max):
    a = build_mpt_alibi_tensor(num_heads, 2, alibi_bias_max)  # [H, 1, 2]: (-1, 0) * slope
    return [float(-v) for v in a[:, 0, 0]]


class MptAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.hidden_size = config["d_model"]
        self.n_heads = config["n_heads"]
        self.head_dim = self.hidden_size // self.n_heads
        self.softmax_scale = 1 / math.sqrt(self.hidden_size / self.n_heads)
        self.Wqkv = nn.Linear(self.hidden_size, 3 * self.hidden_size, bias=False)
        self.out_proj = nn.Linear(self.hidden_size, self.hidden_size, bias=False)

    def forward(self, hidden_states, position_bias, attention_mask):
        batch_size, seq_length = hidden_states.shape[:2]
        mixed_qkv = self.Wqkv(hidden_states)
        query_states, key_states, value_states = mixed_qkv.chunk(3, dim=2)
        query_states = query_states.reshape(batch_size, seq_length, self.n_heads, self.head_dim).transpose(1, 2)
        key_states = key_states.reshape(batch_size, seq_length, self.n_heads, self.head_dim).transpose(1, 2)
        value_states = value_states.reshape(batch_size, seq_length, self.n_heads, self.head_dim).transpose(1, 2)
        attention_scores = torch.matmul(query_states, key_states.transpose(-1, -2)) * self.softmax_scale
        query_length = seq_length
        if position_bias is not None:
            key_length = key_states.shape[-2]
            # max() over traced sizes: the comparison is frozen at trace time (TracerWarning),
            # but it returns the traced difference, so the slice start stays dynamic.
            position_bias_query_index = max(0, position_bias.size(1) - query_length)
            position_bias_key_index = max(0, position_bias.size(2) - key_length)
            position_bias = position_bias[:, position_bias_query_index:, position_bias_key_index:]
            attention_scores = attention_scores + position_bias
        attention_scores = attention_scores.masked_fill(attention_mask, torch.finfo(query_states.dtype).min)
        attn_weights = nn.functional.softmax(attention_scores.float(), dim=-1).to(value_states.dtype)
        context_states = torch.matmul(attn_weights, value_states)
        context_states = context_states.permute(0, 2, 1, 3).contiguous().view(batch_size, seq_length, -1)
        return self.out_proj(context_states)


class MptBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        h = config["d_model"]
        self.norm_1 = nn.LayerNorm(h, eps=1e-5)
        self.attn = MptAttention(config)
        self.norm_2 = nn.LayerNorm(h, eps=1e-5)
        self.up_proj = nn.Linear(h, config["expansion_ratio"] * h, bias=False)
        self.down_proj = nn.Linear(config["expansion_ratio"] * h, h, bias=False)

    def forward(self, hidden_states, position_bias, attention_mask):
        layernorm_output = self.norm_1(hidden_states)
        residual = hidden_states
        attn_outputs = self.attn(layernorm_output, position_bias=position_bias, attention_mask=attention_mask)
        hidden_states = attn_outputs + residual
        layernorm_output = self.norm_2(hidden_states)
        residual = hidden_states
        output = self.down_proj(F.gelu(self.up_proj(layernorm_output), approximate="none"))
        return output + residual


class MptForCausalLM(nn.Module):
    def __init__(self, config=MPT):
        super().__init__()
        self.config = config
        self.num_heads = config["n_heads"]
        self.wte = nn.Embedding(config["vocab_size"], config["d_model"])
        self.blocks = nn.ModuleList([MptBlock(config) for _ in range(config["n_layers"])])
        self.norm_f = nn.LayerNorm(config["d_model"], eps=1e-5)
        self.lm_head = nn.Linear(config["d_model"], config["vocab_size"], bias=False)
        self.lm_head.weight = self.wte.weight
        nn.init.normal_(self.wte.weight, std=0.25)  # keeps the tied logits O(1)

    def forward(self, input_ids, attention_mask):
        hidden_states = self.wte(input_ids)
        alibi = build_mpt_alibi_tensor(self.num_heads, self.config["max_seq_len"], self.config["alibi_bias_max"])
        causal_mask = bloom_prepare_attn_mask(attention_mask, input_ids.shape)  # same bool 4D mask
        for block in self.blocks:
            hidden_states = block(hidden_states, position_bias=alibi, attention_mask=causal_mask)
        return self.lm_head(self.norm_f(hidden_states))


# --------------------------------------------------------------------------


def _inputs(name, vocab, side):
    def make():
        if side == "left":
            mtr, mte = left_padded_mask([8, 5], 8), left_padded_mask([12, 8, 12], 12)
        else:
            mtr, mte = right_padded_mask([8, 5], 8), right_padded_mask([12, 8, 12], 12)
        return [
            token_ids_input(name, vocab, (2, 8), (3, 12), pad_id=0, mask_trace=mtr, mask_test=mte),
            mask_input(mtr, mte, side),
        ]

    return make


BLOOM_SLOPES = bloom_slopes(BLOOM["n_head"])
MPT_SLOPES = mpt_slopes(MPT["n_heads"], MPT["alibi_bias_max"])

SPECS = [
    Spec(
        name="alibi_bloom",
        build=lambda: BloomForCausalLM(),
        inputs=_inputs("alibi_bloom", BLOOM["vocab_size"], "left"),
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="HF transformers BloomForCausalLM (build_alibi_tensor, BloomAttention baddbmm)",
        variant="ALiBi over key positions (cumsum(mask) - 1) * mask from a left-padded attention_mask, 6 heads (closest power of two 4 plus 2 extra slopes), added through alibi.baddbmm(q, k^T, beta=1, alpha=1/sqrt(d)); causal + padding bool mask via masked_fill(finfo.min)",
        num_layers=BLOOM["n_layer"],
        findings=[{"scheme": "alibi", "layers": [0, 1], "params": {
            "num_heads": BLOOM["n_head"], "slopes": BLOOM_SLOPES, "symmetric": False,
            "positions": "attention_mask_cumsum", "max_positions": None}}],
    ),
    Spec(
        name="alibi_mpt",
        build=lambda: MptForCausalLM(),
        inputs=_inputs("alibi_mpt", MPT["vocab_size"], "right"),
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="HF transformers MptForCausalLM (build_mpt_alibi_tensor, MptAttention)",
        variant="ALiBi bias over key positions only: (1 - max_seq_len .. 0) * slope for max_seq_len 32, alibi_bias_max 8, 8 heads, sliced [:, :, -key_length:] and added to q.k*scale; sequences up to 32",
        num_layers=MPT["n_layers"],
        findings=[{"scheme": "alibi", "layers": [0, 1], "params": {
            "num_heads": MPT["n_heads"], "slopes": MPT_SLOPES, "symmetric": False,
            "positions": "key_offset_from_end", "max_positions": MPT["max_seq_len"], "alibi_bias_max": MPT["alibi_bias_max"]}}],
    ),
]
