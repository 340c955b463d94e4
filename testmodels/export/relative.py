"""Relative position biases and embeddings.

t5_encoder      HF T5EncoderModel: bucketed relative bias (bidirectional, 32 buckets, max_distance
                128), computed in the first layer from the query and key lengths, reused by the rest.
t5_decoder      HF T5 decoder stack (causal self-attention, unidirectional buckets), without the
                cross-attention (no encoder input).
relative_shaw   tensor2tensor dot_product_attention_relative (Shaw et al. 2018): clipped relative
                distances (max_relative_position 4), 2k+1 key and value embeddings, added to the
                logits via a matmul with the queries.
(relative_bert_key, HF BERT relative_key, is in learned.py.)
"""

import math

import torch
from torch import nn

from common import Spec, mask_input, right_padded_mask, left_padded_mask, token_ids_input
from sinusoidal import T2TEncoder, T2TSelfAttention

# --------------------------------------------------------------------------
# T5 (transformers/models/t5/modeling_t5.py)

T5 = dict(vocab_size=64, d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2,
          relative_attention_num_buckets=32, relative_attention_max_distance=128, layer_norm_epsilon=1e-6)


class T5LayerNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class T5Attention(nn.Module):
    def __init__(self, config, is_decoder, has_relative_attention_bias):
        super().__init__()
        self.is_decoder = is_decoder
        self.has_relative_attention_bias = has_relative_attention_bias
        self.relative_attention_num_buckets = config["relative_attention_num_buckets"]
        self.relative_attention_max_distance = config["relative_attention_max_distance"]
        self.d_model = config["d_model"]
        self.key_value_proj_dim = config["d_kv"]
        self.n_heads = config["num_heads"]
        self.inner_dim = self.n_heads * self.key_value_proj_dim
        self.q = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(self.d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, self.d_model, bias=False)
        if self.has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(self.relative_attention_num_buckets, self.n_heads)

    @staticmethod
    def _relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        # now relative_position is in the range [0, inf)
        # half of the buckets are for exact increments in positions
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        # The other half of the buckets are for logarithmically bigger bins in positions up to max_distance
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
        )
        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length, key_length):
        context_position = torch.arange(query_length, dtype=torch.long)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
        relative_position = memory_position - context_position  # shape (query_length, key_length)
        relative_position_bucket = self._relative_position_bucket(
            relative_position,  # shape (query_length, key_length)
            bidirectional=(not self.is_decoder),
            num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance,
        )
        values = self.relative_attention_bias(relative_position_bucket)  # shape (query_length, key_length, num_heads)
        values = values.permute([2, 0, 1]).unsqueeze(0)  # shape (1, num_heads, query_length, key_length)
        return values

    def forward(self, hidden_states, mask=None, position_bias=None):
        batch_size, seq_length = hidden_states.shape[:2]
        real_seq_length = seq_length
        key_length = real_seq_length

        def shape(states):
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        def unshape(states):
            return states.transpose(1, 2).contiguous().view(batch_size, -1, self.inner_dim)

        query_states = shape(self.q(hidden_states))
        key_states = shape(self.k(hidden_states))
        value_states = shape(self.v(hidden_states))
        # compute scores (no 1/sqrt(d) scaling in T5: it is folded into the initialisation)
        scores = torch.matmul(query_states, key_states.transpose(3, 2))
        if position_bias is None:
            position_bias = self.compute_bias(real_seq_length, key_length)
            if mask is not None:
                position_bias = position_bias + mask  # (batch_size, n_heads, seq_length, key_length)
        scores += position_bias
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = unshape(torch.matmul(attn_weights, value_states))
        return self.o(attn_output), position_bias


class T5Block(nn.Module):
    def __init__(self, config, is_decoder, has_relative_attention_bias):
        super().__init__()
        self.ln_attn = T5LayerNorm(config["d_model"], eps=config["layer_norm_epsilon"])
        self.SelfAttention = T5Attention(config, is_decoder, has_relative_attention_bias)
        self.ln_ff = T5LayerNorm(config["d_model"], eps=config["layer_norm_epsilon"])
        self.wi = nn.Linear(config["d_model"], config["d_ff"], bias=False)
        self.wo = nn.Linear(config["d_ff"], config["d_model"], bias=False)

    def forward(self, hidden_states, attention_mask, position_bias):
        attention_output, position_bias = self.SelfAttention(self.ln_attn(hidden_states), mask=attention_mask, position_bias=position_bias)
        hidden_states = hidden_states + attention_output
        hidden_states = hidden_states + self.wo(torch.relu(self.wi(self.ln_ff(hidden_states))))  # T5DenseActDense
        return hidden_states, position_bias


class T5Stack(nn.Module):
    def __init__(self, config=T5, is_decoder=False):
        super().__init__()
        self.is_decoder = is_decoder
        self.embed_tokens = nn.Embedding(config["vocab_size"], config["d_model"])
        self.block = nn.ModuleList([T5Block(config, is_decoder, has_relative_attention_bias=bool(i == 0)) for i in range(config["num_layers"])])
        self.final_layer_norm = T5LayerNorm(config["d_model"], eps=config["layer_norm_epsilon"])
        self.model_dim = config["d_model"]
        if is_decoder:
            self.lm_head = nn.Linear(config["d_model"], config["vocab_size"], bias=False)
            self.lm_head.weight = self.embed_tokens.weight  # tie_word_embeddings

    def get_extended_attention_mask(self, attention_mask, input_shape):
        if self.is_decoder:
            # ModuleUtilsMixin.create_extended_attention_mask_for_decoder
            batch_size, seq_length = input_shape
            seq_ids = torch.arange(seq_length)
            causal_mask = seq_ids[None, None, :].repeat(batch_size, seq_length, 1) <= seq_ids[None, :, None]
            causal_mask = causal_mask.to(attention_mask.dtype)
            extended_attention_mask = causal_mask[:, None, :, :] * attention_mask[:, None, None, :]
        else:
            extended_attention_mask = attention_mask[:, None, None, :]
        extended_attention_mask = extended_attention_mask.to(dtype=torch.float32)
        return (1.0 - extended_attention_mask) * torch.finfo(torch.float32).min

    def forward(self, input_ids, attention_mask):
        input_shape = input_ids.size()
        inputs_embeds = self.embed_tokens(input_ids)
        extended_attention_mask = self.get_extended_attention_mask(attention_mask, input_shape)
        position_bias = None
        hidden_states = inputs_embeds
        for layer_module in self.block:
            hidden_states, position_bias = layer_module(hidden_states, extended_attention_mask, position_bias)
        hidden_states = self.final_layer_norm(hidden_states)
        if self.is_decoder:
            # T5ForConditionalGeneration: rescale before the tied lm_head
            hidden_states = hidden_states * (self.model_dim ** -0.5)
            return self.lm_head(hidden_states)
        return hidden_states


# --------------------------------------------------------------------------
# tensor2tensor common_attention.dot_product_attention_relative (ported to torch)

SHAW_MAX_RELATIVE_POSITION = 4


def _generate_relative_positions_matrix(length_q, length_k, max_relative_position):
    """Generates matrix of relative positions between inputs."""
    range_vec_k = torch.arange(length_k)
    range_vec_q = range_vec_k[-length_q:]
    distance_mat = range_vec_k[None, :] - range_vec_q[:, None]
    distance_mat_clipped = torch.clamp(distance_mat, -max_relative_position, max_relative_position)
    # Shift values to be >= 0. Each integer still uniquely identifies a relative position difference.
    final_mat = distance_mat_clipped + max_relative_position
    return final_mat


class RelativePositionsEmbeddings(nn.Module):
    """_generate_relative_positions_embeddings: a [2k+1, depth] table gathered by the clipped distances."""

    def __init__(self, depth, max_relative_position):
        super().__init__()
        self.max_relative_position = max_relative_position
        vocab_size = max_relative_position * 2 + 1
        self.embeddings_table = nn.Parameter(torch.randn(vocab_size, depth))

    def forward(self, length_q, length_k):
        relative_positions_matrix = _generate_relative_positions_matrix(length_q, length_k, self.max_relative_position)
        return self.embeddings_table[relative_positions_matrix]  # tf.gather


def _relative_attention_inner(x, y, z, transpose):
    """Relative position-aware dot-product attention inner calculation.

    x: [batch, heads, length or 1, length or depth]; y: [batch, heads, length or 1, depth];
    z: [length or 1, length, depth].
    """
    batch_size = x.shape[0]
    heads = x.shape[1]
    length = x.shape[2]
    # xy_matmul is [batch_size, heads, length or 1, length or depth]
    xy_matmul = torch.matmul(x, y.transpose(-1, -2) if transpose else y)
    # x_t is [length or 1, batch_size, heads, length or depth]
    x_t = x.permute(2, 0, 1, 3)
    # x_t_r is [length or 1, batch_size * heads, length or depth]
    x_t_r = x_t.reshape(length, heads * batch_size, -1)
    # x_tz_matmul is [length or 1, batch_size * heads, length or depth]
    x_tz_matmul = torch.matmul(x_t_r, z.transpose(-1, -2) if transpose else z)
    # x_tz_matmul_r is [length or 1, batch_size, heads, length or depth]
    x_tz_matmul_r = x_tz_matmul.reshape(length, batch_size, heads, -1)
    # x_tz_matmul_r_t is [batch_size, heads, length or 1, length or depth]
    x_tz_matmul_r_t = x_tz_matmul_r.permute(1, 2, 0, 3)
    return xy_matmul + x_tz_matmul_r_t


class T2TRelativeSelfAttention(T2TSelfAttention):
    """multihead_attention with attention_type="dot_product_relative"."""

    def __init__(self, hidden, heads, max_relative_position):
        super().__init__(hidden, heads)
        depth = hidden // heads
        self.relations_keys = RelativePositionsEmbeddings(depth, max_relative_position)
        self.relations_values = RelativePositionsEmbeddings(depth, max_relative_position)

    def forward(self, x, bias):
        q, k, v = self.split_heads(self.q(x)), self.split_heads(self.k(x)), self.split_heads(self.v(x))
        key_depth_per_head = q.shape[-1]
        q = q * key_depth_per_head ** -0.5
        # dot_product_attention_relative
        length_k = k.shape[2]
        length_q = q.shape[2]
        relations_keys = self.relations_keys(length_q, length_k)
        relations_values = self.relations_values(length_q, length_k)
        logits = _relative_attention_inner(q, k, relations_keys, True)
        logits = logits + bias
        weights = torch.softmax(logits, dim=-1)
        o = _relative_attention_inner(weights, v, relations_values, False).permute(0, 2, 1, 3)
        b, l = o.shape[0], o.shape[1]
        return self.output_transform(o.reshape(b, l, -1))


# --------------------------------------------------------------------------


def _inputs(name, vocab, side, test_seq, low=0):
    def make():
        if side == "left":
            mtr, mte = left_padded_mask([10, 7], 10), left_padded_mask([test_seq, test_seq - 5, test_seq], test_seq)
        else:
            mtr, mte = right_padded_mask([10, 7], 10), right_padded_mask([test_seq, test_seq - 5, test_seq - 9], test_seq)
        return [
            token_ids_input(name, vocab, (2, 10), (3, test_seq), low=low, pad_id=0, mask_trace=mtr, mask_test=mte),
            mask_input(mtr, mte, side),
        ]

    return make


def t5_params(bidirectional):
    return {
        "num_buckets": T5["relative_attention_num_buckets"],
        "max_distance": T5["relative_attention_max_distance"],
        "bidirectional": bidirectional,
        "num_heads": T5["num_heads"],
        "shared_across_layers": True,
        "scaled_scores": False,
    }


SPECS = [
    Spec(
        name="t5_encoder",
        build=lambda: T5Stack(T5, is_decoder=False),
        inputs=_inputs("t5_encoder", T5["vocab_size"], "right", 24, low=1),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference="HF transformers T5EncoderModel (T5Attention._relative_position_bucket, compute_bias)",
        variant="bidirectional bucketed relative bias (32 buckets, max_distance 128; 16 per direction, 8 exact), relative_attention_bias Embedding(32, 4 heads) in layer 0 only, bias + padding mask computed once and passed to layer 1; unscaled q.k",
        num_layers=T5["num_layers"],
        findings=[{"scheme": "t5_relative_bias", "layers": [0, 1], "params": t5_params(True)}],
    ),
    Spec(
        name="t5_decoder",
        build=lambda: T5Stack(T5, is_decoder=True),
        inputs=_inputs("t5_decoder", T5["vocab_size"], "right", 24, low=1),
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="HF transformers T5 decoder stack (T5Stack is_decoder=True, T5ForConditionalGeneration lm_head scaling)",
        variant="causal (bidirectional=False) bucketed relative bias, 32 buckets (16 exact), max_distance 128, from query and key lengths, computed in layer 0 and reused; self-attention only (cross-attention left out), tied lm_head with d_model**-0.5 rescale",
        num_layers=T5["num_layers"],
        findings=[{"scheme": "t5_relative_bias", "layers": [0, 1], "params": t5_params(False)}],
    ),
    Spec(
        name="relative_shaw",
        build=lambda: T2TEncoder(
            attention_factory=lambda: T2TRelativeSelfAttention(32, 2, SHAW_MAX_RELATIVE_POSITION), timing_signal=False),
        inputs=_inputs("relative_shaw", 64, "right", 12),
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="tensor2tensor common_attention.dot_product_attention_relative (Shaw et al. 2018), transformer_relative hparams (no timing signal)",
        variant="relative distances key - query clipped to [-4, 4], per-layer key and value tables [9, head_dim 16] shared across heads, logits = q.k^T + q.(a^K)^T via _relative_attention_inner (transpose/reshape/matmul), outputs += weights.a^V",
        num_layers=2,
        findings=[{"scheme": "relative_clipped", "layers": [0, 1], "params": {
            "max_relative_position": SHAW_MAX_RELATIVE_POSITION, "dim": 16, "distance": "key_minus_query",
            "relative_values": True, "clipped": True, "per_layer_tables": True}}],
    ),
]
