"""Sinusoidal absolute position encodings.

sinusoidal_interleaved           The Annotated Transformer (harvardnlp) PositionalEncoding:
                                 pe[:, 0::2] = sin, pe[:, 1::2] = cos, div 10000^(2i/d),
                                 registered buffer sliced [:, :seq_len].
sinusoidal_interleaved_computed  the same formula computed in forward from torch.arange(seq_len)
                                 (stack((sin, cos), -1).flatten(-2)).
sinusoidal_interleaved_scatter   the same, written with in-place strided assignments (ScatterND).
sinusoidal_concat                tensor2tensor common_attention.get_timing_signal_1d, [sin | cos],
                                 log_timescale_increment = log(max/min) / (d/2 - 1), in forward.
sinusoidal_fairseq               fairseq SinusoidalPositionalEmbedding: stored [sin | cos] table
                                 (d/2 - 1), positions from make_positions (cumsum(mask) * mask +
                                 padding_idx) taken from an attention_mask input.
sinusoidal_marian                HF MarianSinusoidalPositionalEmbedding: stored table,
                                 [sin | cos] with the 10000^(2i/d) denominator (d/2), gathered
                                 with arange position ids.
"""

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from common import Spec, mask_input, right_padded_mask, token_ids_input

VOCAB = 64
D_MODEL = 32
HEADS = 2
D_FF = 64
LAYERS = 2

# --------------------------------------------------------------------------
# The Annotated Transformer (http://nlp.seas.harvard.edu/annotated-transformer/)


def clones(module, N):
    return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


def attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = scores.softmax(dim=-1)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model):
        super().__init__()
        assert d_model % h == 0
        self.d_k = d_model // h
        self.h = h
        self.linears = clones(nn.Linear(d_model, d_model), 4)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)
        nbatches = query.size(0)
        query, key, value = [
            lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
            for lin, x in zip(self.linears, (query, key, value))
        ]
        x, _ = attention(query, key, value, mask=mask)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w_2(self.w_1(x).relu())


class SublayerConnection(nn.Module):
    """Pre-norm residual, as in the Annotated Transformer."""

    def __init__(self, size):
        super().__init__()
        self.norm = nn.LayerNorm(size)

    def forward(self, x, sublayer):
        return x + sublayer(self.norm(x))


class EncoderLayer(nn.Module):
    def __init__(self, size, self_attn, feed_forward):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = clones(SublayerConnection(size), 2)

    def forward(self, x, mask):
        x = self.sublayer[0](x, lambda x: self.self_attn(x, x, x, mask))
        return self.sublayer[1](x, self.feed_forward)


class Embeddings(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.lut = nn.Embedding(vocab, d_model)
        self.d_model = d_model

    def forward(self, x):
        return self.lut(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    """Annotated Transformer PositionalEncoding: precomputed buffer, sliced to the sequence."""

    def __init__(self, d_model, max_len=5000):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[:, : x.size(1)].requires_grad_(False)
        return x


class ComputedPositionalEncoding(nn.Module):
    """The Annotated Transformer formula evaluated in forward for the current length, with the
    interleaving written as stack((sin, cos), -1).flatten(-2), the usual traceable idiom."""

    def __init__(self, d_model):
        super().__init__()
        self.d_model = d_model

    def forward(self, x):
        seq_len = x.size(1)
        position = torch.arange(0, seq_len, dtype=torch.float32).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, self.d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / self.d_model))
        angles = position * div_term
        pe = torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).flatten(-2)
        return x + pe.unsqueeze(0)


class ScatterPositionalEncoding(nn.Module):
    """The Annotated Transformer's __init__ code moved verbatim into forward: the strided
    in-place assignments pe[:, 0::2] = sin / pe[:, 1::2] = cos on a tensor of traced shape
    export as ScatterND chains (ORT runs them correctly)."""

    def __init__(self, d_model):
        super().__init__()
        self.d_model = d_model

    def forward(self, x):
        seq_len = x.size(1)
        pe = torch.zeros(seq_len, self.d_model)
        position = torch.arange(0, seq_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, self.d_model, 2) * -(math.log(10000.0) / self.d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        return x + pe.unsqueeze(0)


class AnnotatedEncoder(nn.Module):
    """Embeddings -> PositionalEncoding -> N pre-norm encoder layers -> norm -> Generator."""

    def __init__(self, pos):
        super().__init__()
        self.src_embed = Embeddings(D_MODEL, VOCAB)
        self.pos = pos
        layer = EncoderLayer(D_MODEL, MultiHeadedAttention(HEADS, D_MODEL), PositionwiseFeedForward(D_MODEL, D_FF))
        self.layers = clones(layer, LAYERS)
        self.norm = nn.LayerNorm(D_MODEL)
        self.proj = nn.Linear(D_MODEL, VOCAB)  # Generator

    def forward(self, input_ids, attention_mask):
        src_mask = attention_mask.unsqueeze(-2)  # (src != pad).unsqueeze(-2)
        x = self.pos(self.src_embed(input_ids))
        for layer in self.layers:
            x = layer(x, src_mask)
        return F.log_softmax(self.proj(self.norm(x)), dim=-1)


# --------------------------------------------------------------------------
# tensor2tensor (layers/common_attention.py get_timing_signal_1d, ported to torch)


def get_timing_signal_1d(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0):
    position = torch.arange(length, dtype=torch.float32) + start_index
    num_timescales = channels // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * torch.exp(torch.arange(num_timescales, dtype=torch.float32) * -log_timescale_increment)
    scaled_time = position.unsqueeze(1) * inv_timescales.unsqueeze(0)
    signal = torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], dim=1)
    # channels is even here, so t2t's tf.pad for an odd channel count is a no-op.
    signal = signal.view(1, length, channels)
    return signal


def add_timing_signal_1d(x, min_timescale=1.0, max_timescale=1.0e4, start_index=0):
    length = x.shape[1]
    channels = x.shape[2]
    signal = get_timing_signal_1d(length, channels, min_timescale, max_timescale, start_index)
    return x + signal


class T2TSelfAttention(nn.Module):
    """common_attention.multihead_attention (dot_product), q scaled by depth**-0.5, no biases."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.output_transform = nn.Linear(hidden, hidden, bias=False)

    def split_heads(self, x):
        b, l, d = x.shape
        return x.view(b, l, self.heads, d // self.heads).permute(0, 2, 1, 3)

    def forward(self, x, bias):
        q, k, v = self.split_heads(self.q(x)), self.split_heads(self.k(x)), self.split_heads(self.v(x))
        key_depth_per_head = q.shape[-1]
        q = q * key_depth_per_head ** -0.5
        logits = torch.matmul(q, k.transpose(-1, -2))
        logits = logits + bias
        weights = torch.softmax(logits, dim=-1)
        o = torch.matmul(weights, v).permute(0, 2, 1, 3)
        b, l = o.shape[0], o.shape[1]
        return self.output_transform(o.reshape(b, l, -1))


class T2TLayer(nn.Module):
    def __init__(self, hidden, heads, filter_size, attention):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.self_attention = attention
        self.ln_2 = nn.LayerNorm(hidden)
        self.conv1 = nn.Linear(hidden, filter_size)
        self.conv2 = nn.Linear(filter_size, hidden)

    def forward(self, x, bias):
        x = x + self.self_attention(self.ln_1(x), bias)
        return x + self.conv2(torch.relu(self.conv1(self.ln_2(x))))


class T2TEncoder(nn.Module):
    """transformer_prepare_encoder + transformer_encoder (pre-norm "n"/"da")."""

    def __init__(self, attention_factory=None, timing_signal=True):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, D_MODEL)
        self.timing_signal = timing_signal
        attention_factory = attention_factory or (lambda: T2TSelfAttention(D_MODEL, HEADS))
        self.layers = nn.ModuleList([T2TLayer(D_MODEL, HEADS, D_FF, attention_factory()) for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.softmax = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, input_ids, attention_mask):
        x = self.embedding(input_ids) * D_MODEL ** 0.5  # symbol modality multiplier
        # attention_bias_ignore_padding: -1e9 on padded memory positions
        bias = ((1.0 - attention_mask.to(torch.float32)) * -1e9)[:, None, None, :]
        if self.timing_signal:
            x = add_timing_signal_1d(x)
        for layer in self.layers:
            x = layer(x, bias)
        return self.softmax(self.ln_f(x))


# --------------------------------------------------------------------------
# fairseq (fairseq/modules/sinusoidal_positional_embedding.py, fairseq/utils.py make_positions,
# fairseq/models/transformer TransformerEncoder + TransformerEncoderLayer, post-norm)


def make_positions(mask, padding_idx: int):
    """fairseq.utils.make_positions, with the non-padding mask given by the attention_mask input
    (fairseq computes it as tensor.ne(padding_idx).int())."""
    mask = mask.int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


class SinusoidalPositionalEmbedding(nn.Module):
    def __init__(self, embedding_dim, padding_idx, init_size=1024):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        # fairseq keeps this as a plain attribute, not a buffer: the tracer captures it as a constant.
        self.weights = SinusoidalPositionalEmbedding.get_embedding(init_size, embedding_dim, padding_idx)

    @staticmethod
    def get_embedding(num_embeddings, embedding_dim, padding_idx=None):
        half_dim = embedding_dim // 2
        emb = math.log(10000) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
        emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
        emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
        if padding_idx is not None:
            emb[padding_idx, :] = 0
        return emb

    def forward(self, input, mask):
        bsz, seq_len = input.shape[0], input.shape[1]
        # fairseq recomputes self.weights when padding_idx + 1 + seq_len exceeds its rows; that is
        # a Python branch on the traced length, so the exported table has init_size rows.
        positions = make_positions(mask, self.padding_idx)
        return self.weights.index_select(0, positions.view(-1)).view(bsz, seq_len, -1).detach()


class FairseqEncoderLayer(nn.Module):
    """TransformerEncoderLayer with normalize_before=False (post-norm) and fairseq MultiheadAttention."""

    def __init__(self, embed_dim, heads, ffn_dim):
        super().__init__()
        self.num_heads = heads
        self.head_dim = embed_dim // heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.self_attn_layer_norm = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        self.final_layer_norm = nn.LayerNorm(embed_dim)

    def self_attn(self, x, key_padding_mask):
        # x: T x B x C, as in fairseq
        tgt_len, bsz, embed_dim = x.shape[0], x.shape[1], x.shape[2]
        q = self.q_proj(x) * self.scaling
        k = self.k_proj(x)
        v = self.v_proj(x)
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        src_len = k.size(1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
        attn_weights = attn_weights.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2).to(torch.bool), float("-inf"))
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_probs = F.softmax(attn_weights, dim=-1)
        attn = torch.bmm(attn_probs, v)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        return self.out_proj(attn)

    def forward(self, x, encoder_padding_mask):
        residual = x
        x = self.self_attn(x, encoder_padding_mask)
        x = self.self_attn_layer_norm(residual + x)
        residual = x
        x = self.fc2(F.relu(self.fc1(x)))
        return self.final_layer_norm(residual + x)


FAIRSEQ_PAD = 1
FAIRSEQ_MAX_SOURCE_POSITIONS = 128
FAIRSEQ_TABLE_ROWS = FAIRSEQ_MAX_SOURCE_POSITIONS + FAIRSEQ_PAD + 1  # PositionalEmbedding(): init_size


class FairseqEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, D_MODEL, padding_idx=FAIRSEQ_PAD)
        self.embed_scale = math.sqrt(D_MODEL)
        self.embed_positions = SinusoidalPositionalEmbedding(D_MODEL, FAIRSEQ_PAD, init_size=FAIRSEQ_TABLE_ROWS)
        self.layers = nn.ModuleList([FairseqEncoderLayer(D_MODEL, HEADS, D_FF) for _ in range(LAYERS)])

    def forward(self, input_ids, attention_mask):
        x = self.embed_scale * self.embed_tokens(input_ids)
        x = x + self.embed_positions(input_ids, attention_mask)
        encoder_padding_mask = attention_mask.eq(0)
        x = x.transpose(0, 1)  # B x T x C -> T x B x C
        for layer in self.layers:
            x = layer(x, encoder_padding_mask)
        return x.transpose(0, 1)


# --------------------------------------------------------------------------
# HF MarianSinusoidalPositionalEmbedding (transformers/models/marian/modeling_marian.py)


class MarianSinusoidalPositionalEmbedding(nn.Embedding):
    def __init__(self, num_positions, embedding_dim):
        super().__init__(num_positions, embedding_dim)
        self.weight = self._init_weight(self.weight)

    @staticmethod
    def _init_weight(out):
        n_pos, dim = out.shape
        # the numpy original, in float64: pos / 10000^(2 (j // 2) / dim)
        j = torch.arange(dim, dtype=torch.float64)
        pos = torch.arange(n_pos, dtype=torch.float64)[:, None]
        position_enc = pos / torch.pow(torch.tensor(10000.0, dtype=torch.float64), 2 * torch.div(j, 2, rounding_mode="floor") / dim)
        out.requires_grad = False
        sentinel = dim // 2 if dim % 2 == 0 else (dim // 2) + 1
        w = torch.empty(n_pos, dim)
        w[:, 0:sentinel] = torch.sin(position_enc[:, 0::2]).float()
        w[:, sentinel:] = torch.cos(position_enc[:, 1::2]).float()
        return nn.Parameter(w, requires_grad=False)

    def forward(self, input_ids_shape, past_key_values_length: int = 0):
        bsz, seq_len = input_ids_shape[:2]
        positions = torch.arange(past_key_values_length, past_key_values_length + seq_len, dtype=torch.long)
        return super().forward(positions)


MARIAN_MAX_POSITIONS = 64


class MarianEncoderLayer(nn.Module):
    """MarianEncoderLayer (BART-style post-norm) with MarianAttention."""

    def __init__(self, embed_dim, heads, ffn_dim):
        super().__init__()
        self.num_heads = heads
        self.head_dim = embed_dim // heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.self_attn_layer_norm = nn.LayerNorm(embed_dim)
        self.fc1 = nn.Linear(embed_dim, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, embed_dim)
        self.final_layer_norm = nn.LayerNorm(embed_dim)

    def _shape(self, tensor, seq_len, bsz):
        return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()

    def self_attn(self, hidden_states, attention_mask):
        bsz, tgt_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states) * self.scaling
        key_states = self._shape(self.k_proj(hidden_states), -1, bsz)
        value_states = self._shape(self.v_proj(hidden_states), -1, bsz)
        proj_shape = (bsz * self.num_heads, -1, self.head_dim)
        query_states = self._shape(query_states, tgt_len, bsz).view(*proj_shape)
        key_states = key_states.reshape(*proj_shape)
        value_states = value_states.reshape(*proj_shape)
        src_len = key_states.size(1)
        attn_weights = torch.bmm(query_states, key_states.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len) + attention_mask
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.bmm(attn_weights, value_states)
        attn_output = attn_output.view(bsz, self.num_heads, tgt_len, self.head_dim).transpose(1, 2)
        attn_output = attn_output.reshape(bsz, tgt_len, self.num_heads * self.head_dim)
        return self.out_proj(attn_output)

    def forward(self, hidden_states, attention_mask):
        residual = hidden_states
        hidden_states = self.self_attn(hidden_states, attention_mask)
        hidden_states = self.self_attn_layer_norm(residual + hidden_states)
        residual = hidden_states
        hidden_states = self.fc2(F.silu(self.fc1(hidden_states)))  # Marian: activation_function="swish"
        return self.final_layer_norm(residual + hidden_states)


class MarianEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_scale = math.sqrt(D_MODEL)
        self.embed_tokens = nn.Embedding(VOCAB, D_MODEL)
        self.embed_positions = MarianSinusoidalPositionalEmbedding(MARIAN_MAX_POSITIONS, D_MODEL)
        self.layers = nn.ModuleList([MarianEncoderLayer(D_MODEL, HEADS, D_FF) for _ in range(LAYERS)])

    def forward(self, input_ids, attention_mask):
        inputs_embeds = self.embed_tokens(input_ids) * self.embed_scale
        embed_pos = self.embed_positions(input_ids.shape)
        hidden_states = inputs_embeds + embed_pos
        # _prepare_4d_attention_mask / _expand_mask: (1 - mask) * finfo.min, [B, 1, 1, S]
        inverted = 1.0 - attention_mask[:, None, None, :].to(torch.float32)
        mask = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(torch.float32).min)
        for layer in self.layers:
            hidden_states = layer(hidden_states, mask)
        return hidden_states


# --------------------------------------------------------------------------
# Specs


def _enc_inputs(name, pad_id=0, low=0):
    def make():
        mtr = right_padded_mask([8, 6], 8)
        mte = right_padded_mask([12, 9, 5], 12)
        return [
            token_ids_input(name, VOCAB, (2, 8), (3, 12), low=low, pad_id=pad_id, mask_trace=mtr, mask_test=mte),
            mask_input(mtr, mte, "right"),
        ]

    return make


def _all_layers():
    return list(range(LAYERS))


SPECS = [
    Spec(
        name="sinusoidal_interleaved",
        build=lambda: AnnotatedEncoder(PositionalEncoding(D_MODEL, max_len=256)),
        inputs=_enc_inputs("sinusoidal_interleaved"),
        outputs=["log_probs"],
        output_axes={"log_probs": {0: "batch", 1: "sequence"}},
        reference="The Annotated Transformer (harvardnlp) PositionalEncoding + Encoder",
        variant="interleaved sin/cos (even=sin, odd=cos), denominator 10000^(2i/d), registered buffer [1, 256, d] sliced [:, :seq_len], x*sqrt(d) + pe",
        num_layers=LAYERS,
        findings=[
            {
                "scheme": "sinusoidal",
                "layers": _all_layers(),
                "params": {"layout": "interleaved", "base": 10000.0, "dim": D_MODEL, "computed": False, "max_positions": 256, "freq_denominator": "d/2", "position_offset": 0},
            }
        ],
    ),
    Spec(
        name="sinusoidal_interleaved_computed",
        build=lambda: AnnotatedEncoder(ComputedPositionalEncoding(D_MODEL)),
        inputs=_enc_inputs("sinusoidal_interleaved_computed"),
        outputs=["log_probs"],
        output_axes={"log_probs": {0: "batch", 1: "sequence"}},
        reference="The Annotated Transformer (harvardnlp) PositionalEncoding formula, evaluated in forward",
        variant="interleaved sin/cos computed in forward from torch.arange(seq_len) (stack((sin, cos), -1).flatten(-2)), denominator 10000^(2i/d)",
        num_layers=LAYERS,
        findings=[
            {
                "scheme": "sinusoidal",
                "layers": _all_layers(),
                "params": {"layout": "interleaved", "base": 10000.0, "dim": D_MODEL, "computed": True, "max_positions": None, "freq_denominator": "d/2", "position_offset": 0},
            }
        ],
    ),
    Spec(
        name="sinusoidal_interleaved_scatter",
        build=lambda: AnnotatedEncoder(ScatterPositionalEncoding(D_MODEL)),
        inputs=_enc_inputs("sinusoidal_interleaved_scatter"),
        outputs=["log_probs"],
        output_axes={"log_probs": {0: "batch", 1: "sequence"}},
        reference="The Annotated Transformer (harvardnlp) PositionalEncoding code run in forward",
        variant="interleaved sin/cos computed in forward by in-place strided assignment pe[:, 0::2] = sin, pe[:, 1::2] = cos on zeros(seq_len, d) (exports as ScatterND), denominator 10000^(2i/d)",
        num_layers=LAYERS,
        findings=[
            {
                "scheme": "sinusoidal",
                "layers": _all_layers(),
                "params": {"layout": "interleaved", "base": 10000.0, "dim": D_MODEL, "computed": True, "max_positions": None, "freq_denominator": "d/2", "position_offset": 0},
            }
        ],
    ),
    Spec(
        name="sinusoidal_concat",
        build=lambda: T2TEncoder(),
        inputs=_enc_inputs("sinusoidal_concat"),
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="tensor2tensor common_attention.get_timing_signal_1d / add_timing_signal_1d + transformer_encoder",
        variant="concatenated [sin | cos] computed in forward, log_timescale_increment = log(1e4)/(d/2 - 1), min_timescale 1, start_index 0",
        num_layers=LAYERS,
        findings=[
            {
                "scheme": "sinusoidal",
                "layers": _all_layers(),
                "params": {"layout": "concat_sin_cos", "base": 10000.0, "dim": D_MODEL, "computed": True, "max_positions": None, "freq_denominator": "d/2-1", "position_offset": 0},
            }
        ],
    ),
    Spec(
        name="sinusoidal_fairseq",
        build=lambda: FairseqEncoder(),
        inputs=_enc_inputs("sinusoidal_fairseq", pad_id=FAIRSEQ_PAD, low=2),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference="fairseq SinusoidalPositionalEmbedding + utils.make_positions + TransformerEncoder (post-norm)",
        variant="stored [sin | cos] table (130 rows = max_source_positions 128 + padding_idx 1 + 1, row padding_idx zeroed), positions = cumsum(mask)*mask + padding_idx from the attention_mask input (first real token at row 2), index_select gather",
        num_layers=LAYERS,
        findings=[
            {
                "scheme": "sinusoidal",
                "layers": _all_layers(),
                "params": {
                    "layout": "concat_sin_cos",
                    "base": 10000.0,
                    "dim": D_MODEL,
                    "computed": False,
                    "max_positions": FAIRSEQ_TABLE_ROWS,
                    "freq_denominator": "d/2-1",
                    "position_offset": FAIRSEQ_PAD + 1,
                    "padding_idx": FAIRSEQ_PAD,
                },
            }
        ],
    ),
    Spec(
        name="sinusoidal_marian",
        build=lambda: MarianEncoder(),
        inputs=_enc_inputs("sinusoidal_marian", pad_id=0, low=1),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference="HF transformers MarianSinusoidalPositionalEmbedding + MarianEncoder",
        variant="stored table (nn.Embedding, 64 rows) with [sin | cos] halves but the 10000^(2i/d) denominator of the original Transformer, gathered with arange position ids",
        num_layers=LAYERS,
        findings=[
            {
                "scheme": "sinusoidal",
                "layers": _all_layers(),
                "params": {"layout": "concat_sin_cos", "base": 10000.0, "dim": D_MODEL, "computed": False, "max_positions": MARIAN_MAX_POSITIONS, "freq_denominator": "d/2", "position_offset": 0},
            }
        ],
    ),
]
