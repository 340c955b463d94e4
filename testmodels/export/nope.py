"""No positional encoding.

nope_causal    a Llama-style decoder with the rotary embedding removed (NoPE, Kazemnejad et al.
               2023): position information only through the causal mask.
llama4_nope    HF Llama4TextModel-style interleaving: use_rope = (layer_idx + 1) % 4 != 0, so of 4
               layers 0-2 use RoPE (+ qk L2 norm) and layer 3 is NoPE with attention temperature
               tuning of the queries.
"""

import math

import torch
from torch import nn

from common import LlamaMLP, RMSNorm, Spec, mask_input, token_ids_input
from rope import causal_4d_mask, default_inv_freq, llama_inputs, repeat_kv

CFG_NOPE = dict(vocab_size=64, hidden_size=32, num_heads=2, num_kv_heads=2, intermediate_size=64, num_layers=2)
CFG_L4 = dict(vocab_size=64, hidden_size=32, num_heads=4, num_kv_heads=2, intermediate_size=64, num_layers=4,
              rope_theta=500000.0, no_rope_layer_interval=4, attn_temperature_tuning=True, floor_scale=8, attn_scale=0.1,
              use_qk_norm=True, rms_norm_eps=1e-5, max_position_embeddings=128)


# --------------------------------------------------------------------------
# Llama-4 (transformers/models/llama4/modeling_llama4.py), dense MLP instead of MoE, no chunked attention


class Llama4TextL2Norm(nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return self._norm(x.float()).type_as(x)


class Llama4TextRotaryEmbedding(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        self.register_buffer("inv_freq", default_inv_freq(base, dim), persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)  # [B, S, D/2]
        # HF: freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * attention_scaling, a complex
        # tensor. torch.onnx 1.13 cannot export complex tensors ("Exporting the operator
        # 'aten::polar' to ONNX opset version 17 is not supported"), so the real and imaginary
        # parts are carried as cos and sin.
        return torch.cos(freqs) * self.attention_scaling, torch.sin(freqs) * self.attention_scaling


def apply_rotary_emb(xq, xk, freqs_cos, freqs_sin):
    """HF Llama4 apply_rotary_emb on real pairs: (x[2i] + i x[2i+1]) * (cos + i sin)."""
    cos = freqs_cos[:, :, None, :]
    sin = freqs_sin[:, :, None, :]

    def rot(x):
        x_ = x.float().reshape(*x.shape[:-1], -1, 2)  # view_as_complex
        x_r, x_i = x_[..., 0], x_[..., 1]
        out = torch.stack((x_r * cos - x_i * sin, x_r * sin + x_i * cos), dim=-1)  # view_as_real
        return out.flatten(3)

    return rot(xq).type_as(xq), rot(xk).type_as(xk)


class Llama4TextAttention(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = config["hidden_size"] // config["num_heads"]
        self.num_attention_heads = config["num_heads"]
        self.num_key_value_groups = config["num_heads"] // config["num_kv_heads"]
        self.num_key_value_heads = config["num_kv_heads"]
        self.scaling = self.head_dim ** -0.5
        self.attn_scale = config["attn_scale"]
        self.floor_scale = config["floor_scale"]
        self.attn_temperature_tuning = config["attn_temperature_tuning"]
        self.use_rope = int((layer_idx + 1) % config["no_rope_layer_interval"] != 0)
        h = config["hidden_size"]
        self.q_proj = nn.Linear(h, config["num_heads"] * self.head_dim, bias=False)
        self.k_proj = nn.Linear(h, config["num_kv_heads"] * self.head_dim, bias=False)
        self.v_proj = nn.Linear(h, config["num_kv_heads"] * self.head_dim, bias=False)
        self.o_proj = nn.Linear(config["num_heads"] * self.head_dim, h, bias=False)
        if config["use_qk_norm"] and self.use_rope:
            self.qk_norm = Llama4TextL2Norm(config["rms_norm_eps"])

    def forward(self, hidden_states, position_embeddings, attention_mask, cache_position):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape)
        key_states = self.k_proj(hidden_states).view(*input_shape, -1, self.head_dim)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        if self.use_rope:  # the 16E model skips rope for long context on certain layers
            query_states, key_states = apply_rotary_emb(query_states, key_states, *position_embeddings)
        if hasattr(self, "qk_norm"):  # the 128E model does not use qk_norm
            query_states = self.qk_norm(query_states)
            key_states = self.qk_norm(key_states)
        # Use temperature tuning from https://huggingface.co/papers/2501.19399) to NoROPE layers
        if self.attn_temperature_tuning and not self.use_rope:
            attn_scales = (
                torch.log(torch.floor((cache_position.float() + 1.0) / self.floor_scale) + 1.0) * self.attn_scale + 1.0
            )
            attn_scales = attn_scales.view((1, input_shape[-1], 1, 1)).expand((*input_shape, 1, 1))  # batch size > 1
            query_states = (query_states * attn_scales).to(query_states.dtype)
        query_states = query_states.transpose(1, 2)
        key_states = key_states.transpose(1, 2)
        # eager_attention_forward
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights.float(), dim=-1).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output)


class Llama4TextDecoderLayer(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.self_attn = Llama4TextAttention(config, layer_idx)
        self.feed_forward = LlamaMLP(config["hidden_size"], config["intermediate_size"])  # Llama4TextMLP
        self.input_layernorm = RMSNorm(config["hidden_size"], eps=config["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(config["hidden_size"], eps=config["rms_norm_eps"])

    def forward(self, hidden_states, attention_mask, position_embeddings, cache_position):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = residual + self.self_attn(hidden_states, position_embeddings, attention_mask, cache_position)
        residual = hidden_states
        return residual + self.feed_forward(self.post_attention_layernorm(hidden_states))


class Llama4ForCausalLM(nn.Module):
    def __init__(self, config=CFG_L4):
        super().__init__()
        self.embed_tokens = nn.Embedding(config["vocab_size"], config["hidden_size"])
        self.layers = nn.ModuleList([Llama4TextDecoderLayer(config, i) for i in range(config["num_layers"])])
        self.norm = RMSNorm(config["hidden_size"], eps=config["rms_norm_eps"])
        self.rotary_emb = Llama4TextRotaryEmbedding(config["hidden_size"] // config["num_heads"], config["rope_theta"])
        self.lm_head = nn.Linear(config["hidden_size"], config["vocab_size"], bias=False)

    def forward(self, input_ids, attention_mask, position_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        past_seen_tokens = 0
        cache_position = torch.arange(past_seen_tokens, past_seen_tokens + inputs_embeds.shape[1])
        causal_mask = causal_4d_mask(attention_mask, inputs_embeds.shape[1], 0, inputs_embeds.dtype)
        freq_cis = self.rotary_emb(inputs_embeds, position_ids)
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = layer(hidden_states, causal_mask, freq_cis, cache_position)
        return self.lm_head(self.norm(hidden_states))


# --------------------------------------------------------------------------
# NoPE decoder: LlamaAttention without rotary embedding


class NoPEAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_heads = cfg["num_heads"]
        self.head_dim = cfg["hidden_size"] // cfg["num_heads"]
        h = cfg["hidden_size"]
        self.q_proj = nn.Linear(h, h, bias=False)
        self.k_proj = nn.Linear(h, h, bias=False)
        self.v_proj = nn.Linear(h, h, bias=False)
        self.o_proj = nn.Linear(h, h, bias=False)

    def forward(self, hidden_states, attention_mask):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        attn_weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(attn_weights, v).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(o)


class NoPELayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"])
        self.self_attn = NoPEAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"])
        self.mlp = LlamaMLP(cfg["hidden_size"], cfg["intermediate_size"])

    def forward(self, x, mask):
        x = x + self.self_attn(self.input_layernorm(x), mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class NoPEForCausalLM(nn.Module):
    def __init__(self, cfg=CFG_NOPE):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([NoPELayer(cfg) for _ in range(cfg["num_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"])
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, input_ids, attention_mask):
        x = self.embed_tokens(input_ids)
        mask = causal_4d_mask(attention_mask, input_ids.shape[1], 0, x.dtype)
        for layer in self.layers:
            x = layer(x, mask)
        return self.lm_head(self.norm(x))


def _nope_inputs():
    from common import left_padded_mask

    name = "nope_causal"
    mtr, mte = left_padded_mask([8, 6], 8), left_padded_mask([12, 9, 12], 12)
    return [
        token_ids_input(name, CFG_NOPE["vocab_size"], (2, 8), (3, 12), pad_id=0, mask_trace=mtr, mask_test=mte),
        mask_input(mtr, mte, "left"),
    ]


SPECS = [
    Spec(
        name="nope_causal",
        build=lambda: NoPEForCausalLM(),
        inputs=_nope_inputs,
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="HF transformers LlamaForCausalLM with the rotary embedding removed (NoPE, Kazemnejad et al. 2023)",
        variant="no positional information: token embeddings -> 2 Llama blocks whose only position signal is the causal (+ padding) additive mask",
        num_layers=2,
        findings=[{"scheme": "nope", "layers": [0, 1], "params": {"temperature_tuning": None}}],
    ),
    Spec(
        name="llama4_nope",
        build=lambda: Llama4ForCausalLM(),
        inputs=llama_inputs("llama4_nope", 64, CFG_L4["max_position_embeddings"], test_seq=20, positions="plain"),
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="HF transformers Llama4ForCausalLM text model (Llama4TextAttention: use_rope, qk_norm, attn_temperature_tuning)",
        variant="interleaved RoPE/NoPE: layers 0-2 interleaved-pair RoPE (Llama4 complex freqs_cis written on real pairs) + L2 qk-norm, layer 3 NoPE with query temperature scales log(floor((cache_position+1)/8)+1)*0.1+1 (floor_scale 8 instead of 8192 so short tests exercise it); dense MLP instead of MoE",
        num_layers=4,
        findings=[
            {"scheme": "rope", "layers": [0, 1, 2], "params": {
                "layout": "interleaved", "base": 500000.0, "head_dim": 8, "rotary_dim": 8, "num_heads": 4, "num_kv_heads": 2,
                "scaling": "none", "factor": 1.0, "max_positions": None, "qk_norm": "l2_after_rope"}},
            {"scheme": "nope", "layers": [3], "params": {"temperature_tuning": {"floor_scale": 8.0, "attn_scale": 0.1}}},
        ],
    ),
]
