"""The rest of the positional-encoding family (issue 14).

relative_transfo_xl   HF TransfoXLModel (deprecated/transfo_xl): RelPartialLearnableMultiHeadAttn with a
                      sinusoid of relative distances klen-1 .. 0 (clamp_len), projected by r_net, scores
                      (q + u)k + (q + v)R and the pad/reshape/slice relative shift.
relative_xlnet        HF XLNetModel (attn_type "bi"): the same scores over distances klen .. -qlen+1, the
                      reshape/slice/index_select shift (rel_shift_bnij), einsum projections.
disentangled_deberta  HF DebertaV2Model (v3 configuration): log-bucketed relative positions, c2p and p2c
                      terms through a shared relative embedding projected by the content projections
                      (share_att_key), sqrt(d * scale_factor) scaling, XSoftmax.
rope_mrope            HF Qwen2VLTextModel: multimodal RoPE, position_ids [3, B, S] (temporal, height,
                      width), frequencies split in mrope_section per stream.
rope_axial_vit        naver-ai/rope-vit RoPE-Axial ViT (deit models_v2 backbone): interleaved pairs, the
                      first half of the frequencies turned by the patch column, the second by the row.
rope_axial_vit_open   the same ViT exported with dynamic height and width, as real ViTs are: the grid
                      (H // patch, W // patch) and its cos/sin follow the image at run time.
complex_order         the authors' code of Wang et al. 2020 (FreedomIntelligence/complex-order, text
                      classification Transformer): r(w) exp(i pos w(w)) carried as real and imaginary
                      parts, complex attention (modulus of the complex scores).
floater_unrolled      FLOATER (Liu et al. 2020, xuanqing94/FLOATER): per-layer q/k/v biases integrated by
                      a learned ODE (flow_func_linear) with torchdiffeq's fixed-grid rk4 step, unrolled.
floater_loop          the same model with the integration scripted (torch.jit.script): an ONNX Loop whose
                      body is one solver step.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from common import (
    Input,
    LlamaMLP,
    RMSNorm,
    Spec,
    gen,
    left_padded_mask,
    mask_input,
    right_padded_mask,
    token_ids_input,
)
from rope import causal_4d_mask, default_inv_freq, repeat_kv, rotate_half

# --------------------------------------------------------------------------
# Transformer-XL (transformers/models/deprecated/transfo_xl/modeling_transfo_xl.py)

TXL = dict(vocab_size=64, d_model=32, n_head=2, d_head=16, d_inner=64, n_layer=2, clamp_len=16, layer_norm_epsilon=1e-5)


class TXLPositionalEmbedding(nn.Module):
    def __init__(self, demb):
        super().__init__()
        self.demb = demb
        inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, pos_seq, bsz=None):
        sinusoid_inp = torch.outer(pos_seq, self.inv_freq)
        pos_emb = torch.cat([sinusoid_inp.sin(), sinusoid_inp.cos()], dim=-1)
        if bsz is not None:
            return pos_emb[:, None, :].expand(-1, bsz, -1)
        return pos_emb[:, None, :]


class TXLPositionwiseFF(nn.Module):
    def __init__(self, d_model, d_inner, layer_norm_epsilon):
        super().__init__()
        self.CoreNet = nn.Sequential(nn.Linear(d_model, d_inner), nn.ReLU(inplace=True), nn.Linear(d_inner, d_model))
        self.layer_norm = nn.LayerNorm(d_model, eps=layer_norm_epsilon)

    def forward(self, inp):
        core_out = self.CoreNet(inp)
        return self.layer_norm(inp + core_out)  # post-norm (pre_lnorm False)


class RelPartialLearnableMultiHeadAttn(nn.Module):
    def __init__(self, n_head, d_model, d_head, layer_norm_epsilon):
        super().__init__()
        self.n_head, self.d_model, self.d_head = n_head, d_model, d_head
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model, eps=layer_norm_epsilon)
        self.scale = 1 / (d_head**0.5)
        # untie_r (the HF default): every layer has its own global biases u (r_w_bias) and v (r_r_bias)
        self.r_r_bias = nn.Parameter(0.1 * torch.randn(self.n_head, self.d_head))
        self.r_w_bias = nn.Parameter(0.1 * torch.randn(self.n_head, self.d_head))
        self.r_net = nn.Linear(self.d_model, self.n_head * self.d_head, bias=False)

    def _rel_shift(self, x):
        zero_pad_shape = (x.size(0), 1) + x.size()[2:]
        zero_pad = torch.zeros(zero_pad_shape, device=x.device, dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=1)
        x_padded_shape = (x.size(1) + 1, x.size(0)) + x.size()[2:]
        x_padded = x_padded.view(*x_padded_shape)
        x = x_padded[1:].view_as(x)
        return x

    def forward(self, w, r, attn_mask):
        qlen, rlen, bsz = w.size(0), r.size(0), w.size(1)
        w_heads = self.qkv_net(w)
        r_head_k = self.r_net(r)
        w_head_q, w_head_k, w_head_v = torch.chunk(w_heads, 3, dim=-1)
        klen = w_head_k.size(0)
        w_head_q = w_head_q.view(qlen, bsz, self.n_head, self.d_head)
        w_head_k = w_head_k.view(klen, bsz, self.n_head, self.d_head)
        w_head_v = w_head_v.view(klen, bsz, self.n_head, self.d_head)
        r_head_k = r_head_k.view(rlen, self.n_head, self.d_head)
        rw_head_q = w_head_q + self.r_w_bias
        AC = torch.einsum("ibnd,jbnd->ijbn", (rw_head_q, w_head_k))
        rr_head_q = w_head_q + self.r_r_bias
        BD = torch.einsum("ibnd,jnd->ijbn", (rr_head_q, r_head_k))
        BD = self._rel_shift(BD)
        attn_score = AC + BD
        attn_score.mul_(self.scale)
        mask_value = torch.finfo(attn_score.dtype).min
        # HF tests torch.sum(attn_mask).item() first (true for qlen > 1; the tracer keeps the branch)
        attn_mask = attn_mask == 1
        attn_score = attn_score.float().masked_fill(attn_mask[:, :, :, None], mask_value).type_as(attn_score)
        attn_prob = nn.functional.softmax(attn_score, dim=1)
        attn_vec = torch.einsum("ijbn,jbnd->ibnd", (attn_prob, w_head_v))
        attn_vec = attn_vec.contiguous().view(attn_vec.size(0), attn_vec.size(1), self.n_head * self.d_head)
        attn_out = self.o_net(attn_vec)
        return self.layer_norm(w + attn_out)


class RelPartialLearnableDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(cfg["n_head"], cfg["d_model"], cfg["d_head"], cfg["layer_norm_epsilon"])
        self.pos_ff = TXLPositionwiseFF(cfg["d_model"], cfg["d_inner"], cfg["layer_norm_epsilon"])

    def forward(self, dec_inp, r, dec_attn_mask):
        return self.pos_ff(self.dec_attn(dec_inp, r, dec_attn_mask))


class TransfoXLModel(nn.Module):
    """TransfoXLModel with mem_len 0 (no memory), same_length False, div_val 1, d_embed = d_model."""

    def __init__(self, cfg=TXL):
        super().__init__()
        self.d_model = cfg["d_model"]
        self.word_emb = nn.Embedding(cfg["vocab_size"], cfg["d_model"])  # AdaptiveEmbedding, div_val 1
        self.emb_scale = cfg["d_model"] ** 0.5
        self.layers = nn.ModuleList([RelPartialLearnableDecoderLayer(cfg) for _ in range(cfg["n_layer"])])
        self.clamp_len = cfg["clamp_len"]
        self.pos_emb = TXLPositionalEmbedding(self.d_model)

    def forward(self, input_ids):
        input_ids = input_ids.transpose(0, 1).contiguous()
        qlen, bsz = input_ids.size()
        word_emb = self.word_emb(input_ids) * self.emb_scale
        mlen = 0
        klen = mlen + qlen
        dec_attn_mask = torch.triu(word_emb.new_ones((qlen, klen), dtype=torch.bool), diagonal=1 + mlen)[:, :, None]
        # HF writes .type_as(dtype=word_emb.dtype); the intent is a float copy of the range
        pos_seq = torch.arange(klen - 1, -1, -1.0, device=word_emb.device, dtype=torch.int64).to(word_emb.dtype)
        if self.clamp_len > 0:
            pos_seq.clamp_(max=self.clamp_len)
        pos_emb = self.pos_emb(pos_seq)
        core_out = word_emb
        for layer in self.layers:
            core_out = layer(core_out, pos_emb, dec_attn_mask)
        return core_out.transpose(0, 1).contiguous()


# --------------------------------------------------------------------------
# XLNet (transformers/models/xlnet/modeling_xlnet.py)

XLN = dict(vocab_size=64, d_model=32, n_head=2, d_head=16, d_inner=64, n_layer=2, layer_norm_eps=1e-12, clamp_len=-1)


class XLNetRelativeAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.d_head, self.d_model = cfg["n_head"], cfg["d_head"], cfg["d_model"]
        self.scale = 1 / (self.d_head**0.5)
        s = 0.02 * 4
        self.q = nn.Parameter(s * torch.randn(self.d_model, self.n_head, self.d_head))
        self.k = nn.Parameter(s * torch.randn(self.d_model, self.n_head, self.d_head))
        self.v = nn.Parameter(s * torch.randn(self.d_model, self.n_head, self.d_head))
        self.o = nn.Parameter(s * torch.randn(self.d_model, self.n_head, self.d_head))
        self.r = nn.Parameter(s * torch.randn(self.d_model, self.n_head, self.d_head))
        self.r_r_bias = nn.Parameter(0.1 * torch.randn(self.n_head, self.d_head))
        self.r_w_bias = nn.Parameter(0.1 * torch.randn(self.n_head, self.d_head))
        self.layer_norm = nn.LayerNorm(self.d_model, eps=cfg["layer_norm_eps"])

    @staticmethod
    def rel_shift_bnij(x, klen=-1):
        x_size = x.shape
        x = x.reshape(x_size[0], x_size[1], x_size[3], x_size[2])
        x = x[:, :, 1:, :]
        x = x.reshape(x_size[0], x_size[1], x_size[2], x_size[3] - 1)
        x = torch.index_select(x, 3, torch.arange(klen, device=x.device, dtype=torch.long))
        return x

    def rel_attn_core(self, q_head, k_head_h, v_head_h, k_head_r, attn_mask):
        ac = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_w_bias, k_head_h)
        bd = torch.einsum("ibnd,jbnd->bnij", q_head + self.r_r_bias, k_head_r)
        bd = self.rel_shift_bnij(bd, klen=ac.shape[3])
        ef = 0  # no token_type_ids: seg_mat is None
        attn_score = (ac + bd + ef) * self.scale
        attn_score = attn_score - 1e30 * torch.einsum("ijbn->bnij", attn_mask)
        attn_prob = nn.functional.softmax(attn_score, dim=3)
        return torch.einsum("bnij,jbnd->ibnd", attn_prob, v_head_h)

    def post_attention(self, h, attn_vec):
        attn_out = torch.einsum("ibnd,hnd->ibh", attn_vec, self.o)
        return self.layer_norm(attn_out + h)

    def forward(self, h, attn_mask_h, r):
        q_head_h = torch.einsum("ibh,hnd->ibnd", h, self.q)
        k_head_h = torch.einsum("ibh,hnd->ibnd", h, self.k)
        v_head_h = torch.einsum("ibh,hnd->ibnd", h, self.v)
        k_head_r = torch.einsum("ibh,hnd->ibnd", r.type(self.r.dtype), self.r)
        attn_vec = self.rel_attn_core(q_head_h, k_head_h, v_head_h, k_head_r, attn_mask_h)
        return self.post_attention(h, attn_vec)


class XLNetFeedForward(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer_norm = nn.LayerNorm(cfg["d_model"], eps=cfg["layer_norm_eps"])
        self.layer_1 = nn.Linear(cfg["d_model"], cfg["d_inner"])
        self.layer_2 = nn.Linear(cfg["d_inner"], cfg["d_model"])

    def forward(self, inp):
        output = self.layer_2(F.gelu(self.layer_1(inp)))
        return self.layer_norm(output + inp)


class XLNetLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.rel_attn = XLNetRelativeAttention(cfg)
        self.ff = XLNetFeedForward(cfg)

    def forward(self, output_h, attn_mask_h, r):
        return self.ff(self.rel_attn(output_h, attn_mask_h, r))


class XLNetModel(nn.Module):
    """XLNetModel with attn_type "bi", bi_data False, no mems, no perm_mask/target_mapping/token_type_ids."""

    def __init__(self, cfg=XLN):
        super().__init__()
        self.d_model = cfg["d_model"]
        self.clamp_len = cfg["clamp_len"]
        self.word_embedding = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        self.layer = nn.ModuleList([XLNetLayer(cfg) for _ in range(cfg["n_layer"])])

    @staticmethod
    def positional_embedding(pos_seq, inv_freq, bsz=None):
        sinusoid_inp = torch.einsum("i,d->id", pos_seq, inv_freq)
        pos_emb = torch.cat([torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)], dim=-1)
        pos_emb = pos_emb[:, None, :]
        if bsz is not None:
            pos_emb = pos_emb.expand(-1, bsz, -1)
        return pos_emb

    def relative_positional_encoding(self, qlen, klen, bsz=None):
        freq_seq = torch.arange(0, self.d_model, 2.0, dtype=torch.int64).float()
        inv_freq = 1 / torch.pow(10000, (freq_seq / self.d_model))
        beg, end = klen, -qlen  # attn_type "bi"
        fwd_pos_seq = torch.arange(beg, end, -1.0, dtype=torch.int64).float()
        if self.clamp_len > 0:
            fwd_pos_seq = fwd_pos_seq.clamp(-self.clamp_len, self.clamp_len)
        return self.positional_embedding(fwd_pos_seq, inv_freq, bsz)

    def forward(self, input_ids, attention_mask):
        input_ids = input_ids.transpose(0, 1).contiguous()
        qlen, bsz = input_ids.shape[0], input_ids.shape[1]
        attention_mask = attention_mask.transpose(0, 1).contiguous()
        mlen = 0
        klen = mlen + qlen
        dtype_float = torch.float32
        input_mask = 1.0 - attention_mask
        data_mask = input_mask[None]
        attn_mask = data_mask[:, :, :, None]
        attn_mask = (attn_mask > 0).to(dtype_float)
        non_tgt_mask = -torch.eye(qlen).to(attn_mask)
        non_tgt_mask = ((attn_mask + non_tgt_mask[:, :, None, None]) > 0).to(attn_mask)
        output_h = self.word_embedding(input_ids)
        pos_emb = self.relative_positional_encoding(qlen, klen, bsz=bsz)
        for layer_module in self.layer:
            output_h = layer_module(output_h, non_tgt_mask, pos_emb)
        return output_h.permute(1, 0, 2).contiguous()


# --------------------------------------------------------------------------
# DeBERTa-v2 (transformers/models/deberta_v2/modeling_deberta_v2.py), a deberta-v3 configuration

DEB = dict(vocab_size=64, hidden_size=32, num_attention_heads=2, num_hidden_layers=2, intermediate_size=64,
           max_position_embeddings=128, max_relative_positions=-1, position_buckets=16, layer_norm_eps=1e-7,
           pos_att_type=["p2c", "c2p"], share_att_key=True, norm_rel_ebd="layer_norm")
# A deberta-v2 configuration without buckets (relative positions clamped at 16) and with separate
# position projections (share_att_key False: pos_key_proj, pos_query_proj).
DEB_UNSHARED = dict(DEB, position_buckets=-1, max_relative_positions=16, share_att_key=False)


class XSoftmax(torch.autograd.Function):
    """HF XSoftmax (masked softmax) with its ONNX symbolic."""

    @staticmethod
    def forward(self, input, mask, dim):
        self.dim = dim
        rmask = ~(mask.to(torch.bool))
        output = input.masked_fill(rmask, torch.tensor(torch.finfo(input.dtype).min))
        output = torch.softmax(output, self.dim)
        output.masked_fill_(rmask, 0)
        return output

    @staticmethod
    def symbolic(g, self, mask, dim):
        import torch.onnx.symbolic_helper as sym_help
        from torch.onnx.symbolic_opset9 import masked_fill, softmax

        mask_cast_value = g.op("Cast", mask, to_i=sym_help.cast_pytorch_to_onnx["Long"])
        r_mask = g.op(
            "Cast",
            g.op("Sub", g.op("Constant", value_t=torch.tensor(1, dtype=torch.int64)), mask_cast_value),
            to_i=sym_help.cast_pytorch_to_onnx["Byte"],
        )
        output = masked_fill(g, self, r_mask, g.op("Constant", value_t=torch.tensor(torch.finfo(self.type().dtype()).min)))
        output = softmax(g, output, dim)
        return masked_fill(g, output, r_mask, g.op("Constant", value_t=torch.tensor(0, dtype=torch.uint8)))


def make_log_bucket_position(relative_pos, bucket_size, max_position):
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    abs_pos = torch.where(
        (relative_pos < mid) & (relative_pos > -mid),
        torch.tensor(mid - 1).type_as(relative_pos),
        torch.abs(relative_pos),
    )
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)) + mid
    bucket_pos = torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)
    return bucket_pos


def build_relative_position(query_size, key_size, bucket_size=-1, max_position=-1):
    q_ids = torch.arange(0, query_size)
    k_ids = torch.arange(0, key_size)
    rel_pos_ids = q_ids[:, None] - k_ids[None, :]
    if bucket_size > 0 and max_position > 0:
        rel_pos_ids = make_log_bucket_position(rel_pos_ids, bucket_size, max_position)
    rel_pos_ids = rel_pos_ids.to(torch.long)
    rel_pos_ids = rel_pos_ids[:query_size, :]
    rel_pos_ids = rel_pos_ids.unsqueeze(0)
    return rel_pos_ids


class DisentangledSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config["num_attention_heads"]
        self.attention_head_size = config["hidden_size"] // self.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        h = config["hidden_size"]
        self.query_proj = nn.Linear(h, self.all_head_size, bias=True)
        self.key_proj = nn.Linear(h, self.all_head_size, bias=True)
        self.value_proj = nn.Linear(h, self.all_head_size, bias=True)
        self.share_att_key = config["share_att_key"]
        self.pos_att_type = config["pos_att_type"]
        self.position_buckets = config["position_buckets"]
        self.max_relative_positions = config["max_relative_positions"]
        if self.max_relative_positions < 1:
            self.max_relative_positions = config["max_position_embeddings"]
        self.pos_ebd_size = self.max_relative_positions
        if self.position_buckets > 0:
            self.pos_ebd_size = self.position_buckets
        if not self.share_att_key:
            if "c2p" in self.pos_att_type:
                self.pos_key_proj = nn.Linear(h, self.all_head_size, bias=True)
            if "p2c" in self.pos_att_type:
                self.pos_query_proj = nn.Linear(h, self.all_head_size)

    def transpose_for_scores(self, x, attention_heads):
        new_x_shape = x.size()[:-1] + (attention_heads, -1)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))

    def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings):
        query_states = hidden_states
        query_layer = self.transpose_for_scores(self.query_proj(query_states), self.num_attention_heads)
        key_layer = self.transpose_for_scores(self.key_proj(hidden_states), self.num_attention_heads)
        value_layer = self.transpose_for_scores(self.value_proj(hidden_states), self.num_attention_heads)
        scale_factor = 1
        if "c2p" in self.pos_att_type:
            scale_factor += 1
        if "p2c" in self.pos_att_type:
            scale_factor += 1
        scale = torch.sqrt(torch.tensor(query_layer.size(-1), dtype=torch.float) * scale_factor)
        attention_scores = torch.bmm(query_layer, key_layer.transpose(-1, -2)) / torch.tensor(scale, dtype=query_layer.dtype)
        rel_att = self.disentangled_attention_bias(query_layer, key_layer, relative_pos, rel_embeddings, scale_factor)
        attention_scores = attention_scores + rel_att
        attention_scores = attention_scores.view(-1, self.num_attention_heads, attention_scores.size(-2), attention_scores.size(-1))
        attention_probs = XSoftmax.apply(attention_scores, attention_mask, -1)
        context_layer = torch.bmm(attention_probs.view(-1, attention_probs.size(-2), attention_probs.size(-1)), value_layer)
        context_layer = context_layer.view(-1, self.num_attention_heads, context_layer.size(-2), context_layer.size(-1)).permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (-1,)
        return context_layer.view(new_context_layer_shape)

    def disentangled_attention_bias(self, query_layer, key_layer, relative_pos, rel_embeddings, scale_factor):
        if relative_pos.dim() == 2:
            relative_pos = relative_pos.unsqueeze(0).unsqueeze(0)
        elif relative_pos.dim() == 3:
            relative_pos = relative_pos.unsqueeze(1)
        att_span = self.pos_ebd_size
        relative_pos = relative_pos.long().to(query_layer.device)
        rel_embeddings = rel_embeddings[0 : att_span * 2, :].unsqueeze(0)
        if self.share_att_key:
            pos_query_layer = self.transpose_for_scores(self.query_proj(rel_embeddings), self.num_attention_heads).repeat(
                query_layer.size(0) // self.num_attention_heads, 1, 1)
            pos_key_layer = self.transpose_for_scores(self.key_proj(rel_embeddings), self.num_attention_heads).repeat(
                query_layer.size(0) // self.num_attention_heads, 1, 1)
        else:
            if "c2p" in self.pos_att_type:
                pos_key_layer = self.transpose_for_scores(self.pos_key_proj(rel_embeddings), self.num_attention_heads).repeat(
                    query_layer.size(0) // self.num_attention_heads, 1, 1)
            if "p2c" in self.pos_att_type:
                pos_query_layer = self.transpose_for_scores(self.pos_query_proj(rel_embeddings), self.num_attention_heads).repeat(
                    query_layer.size(0) // self.num_attention_heads, 1, 1)
        score = 0
        if "c2p" in self.pos_att_type:
            scale = torch.sqrt(torch.tensor(pos_key_layer.size(-1), dtype=torch.float) * scale_factor)
            c2p_att = torch.bmm(query_layer, pos_key_layer.transpose(-1, -2))
            c2p_pos = torch.clamp(relative_pos + att_span, 0, att_span * 2 - 1)
            c2p_att = torch.gather(c2p_att, dim=-1, index=c2p_pos.squeeze(0).expand([query_layer.size(0), query_layer.size(1), relative_pos.size(-1)]))
            score += c2p_att / torch.tensor(scale, dtype=c2p_att.dtype)
        if "p2c" in self.pos_att_type:
            scale = torch.sqrt(torch.tensor(pos_query_layer.size(-1), dtype=torch.float) * scale_factor)
            r_pos = relative_pos  # key_layer.size(-2) == query_layer.size(-2) in self-attention
            p2c_pos = torch.clamp(-r_pos + att_span, 0, att_span * 2 - 1)
            p2c_att = torch.bmm(key_layer, pos_query_layer.transpose(-1, -2))
            p2c_att = torch.gather(p2c_att, dim=-1, index=p2c_pos.squeeze(0).expand([query_layer.size(0), key_layer.size(-2), key_layer.size(-2)])).transpose(-1, -2)
            score += p2c_att / torch.tensor(scale, dtype=p2c_att.dtype)
        return score


class DebertaV2Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        h, eps = config["hidden_size"], config["layer_norm_eps"]
        self.self = DisentangledSelfAttention(config)
        self.attn_dense = nn.Linear(h, h)
        self.attn_ln = nn.LayerNorm(h, eps)
        self.intermediate = nn.Linear(h, config["intermediate_size"])
        self.output_dense = nn.Linear(config["intermediate_size"], h)
        self.output_ln = nn.LayerNorm(h, eps)

    def forward(self, hidden_states, attention_mask, relative_pos, rel_embeddings):
        self_output = self.self(hidden_states, attention_mask, relative_pos, rel_embeddings)
        attention_output = self.attn_ln(self.attn_dense(self_output) + hidden_states)  # DebertaV2SelfOutput
        intermediate_output = F.gelu(self.intermediate(attention_output))
        return self.output_ln(self.output_dense(intermediate_output) + attention_output)  # DebertaV2Output


class DebertaV2Model(nn.Module):
    """DebertaV2Model: embeddings (no absolute positions: position_biased_input False, type_vocab_size 0),
    DebertaV2Encoder with relative_attention, rel_embeddings LayerNorm (norm_rel_ebd "layer_norm"), no conv."""

    def __init__(self, config=DEB):
        super().__init__()
        h, eps = config["hidden_size"], config["layer_norm_eps"]
        self.word_embeddings = nn.Embedding(config["vocab_size"], h, padding_idx=0)
        self.emb_ln = nn.LayerNorm(h, eps)
        self.layer = nn.ModuleList([DebertaV2Layer(config) for _ in range(config["num_hidden_layers"])])
        self.max_relative_positions = config["max_relative_positions"]
        if self.max_relative_positions < 1:
            self.max_relative_positions = config["max_position_embeddings"]
        self.position_buckets = config["position_buckets"]
        pos_ebd_size = self.max_relative_positions * 2
        if self.position_buckets > 0:
            pos_ebd_size = self.position_buckets * 2
        self.rel_embeddings = nn.Embedding(pos_ebd_size, h)
        self.LayerNorm = nn.LayerNorm(h, eps, elementwise_affine=True)

    def get_rel_embedding(self):
        return self.LayerNorm(self.rel_embeddings.weight)

    def get_attention_mask(self, attention_mask):
        extended_attention_mask = attention_mask.unsqueeze(1).unsqueeze(2)
        attention_mask = extended_attention_mask * extended_attention_mask.squeeze(-2).unsqueeze(-1)
        return attention_mask.byte()

    def forward(self, input_ids, attention_mask):
        embeddings = self.emb_ln(self.word_embeddings(input_ids))
        mask = attention_mask.unsqueeze(2).to(embeddings.dtype)
        hidden_states = embeddings * mask
        attention_mask4 = self.get_attention_mask(attention_mask)
        relative_pos = build_relative_position(hidden_states.size(-2), hidden_states.size(-2),
                                               bucket_size=self.position_buckets, max_position=self.max_relative_positions)
        rel_embeddings = self.get_rel_embedding()
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask4, relative_pos, rel_embeddings)
        return hidden_states


# --------------------------------------------------------------------------
# Qwen2-VL text model (transformers/models/qwen2_vl/modeling_qwen2_vl.py)

QVL = dict(vocab_size=64, hidden_size=64, num_heads=4, num_kv_heads=2, intermediate_size=128, num_layers=2,
           rope_theta=1000000.0, mrope_section=[2, 3, 3], rms_norm_eps=1e-6,
           vision_start_token_id=60, image_token_id=61, vision_end_token_id=62, spatial_merge_size=2)


class Qwen2VLRotaryEmbedding(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        self.register_buffer("inv_freq", default_inv_freq(base, dim), persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, None, :, None].float().expand(3, position_ids.shape[1], -1, 1)
        position_ids_expanded = position_ids[:, :, None, :].float()
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(2, 3)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def apply_multimodal_rotary_pos_emb(q, k, cos, sin, mrope_section, unsqueeze_dim=1):
    mrope_section = mrope_section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(mrope_section, dim=-1))], dim=-1).unsqueeze(unsqueeze_dim)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(mrope_section, dim=-1))], dim=-1).unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


class Qwen2VLAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.hidden_size = cfg["hidden_size"]
        self.num_heads = cfg["num_heads"]
        self.head_dim = self.hidden_size // self.num_heads
        self.num_key_value_heads = cfg["num_kv_heads"]
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.mrope_section = cfg["mrope_section"]
        self.q_proj = nn.Linear(self.hidden_size, self.num_heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(self.hidden_size, self.num_key_value_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)

    def forward(self, hidden_states, attention_mask, position_embeddings):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        cos, sin = position_embeddings
        query_states, key_states = apply_multimodal_rotary_pos_emb(query_states, key_states, cos, sin, self.mrope_section)
        # eager_attention_forward
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        attn_weights = attn_weights + attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
        return self.o_proj(attn_output.reshape(bsz, q_len, -1).contiguous())


class Qwen2VLDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = Qwen2VLAttention(cfg)
        self.mlp = LlamaMLP(cfg["hidden_size"], cfg["intermediate_size"])  # Qwen2MLP
        self.input_layernorm = RMSNorm(cfg["hidden_size"], eps=cfg["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], eps=cfg["rms_norm_eps"])

    def forward(self, hidden_states, attention_mask, position_embeddings):
        residual = hidden_states
        hidden_states = self.self_attn(self.input_layernorm(hidden_states), attention_mask, position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        return residual + self.mlp(self.post_attention_layernorm(hidden_states))


class Qwen2VLForCausalLM(nn.Module):
    """Qwen2VLTextModel + lm_head, given the [3, B, S] position_ids that get_rope_index computes."""

    def __init__(self, cfg=QVL):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([Qwen2VLDecoderLayer(cfg) for _ in range(cfg["num_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], eps=cfg["rms_norm_eps"])
        self.rotary_emb = Qwen2VLRotaryEmbedding(cfg["hidden_size"] // cfg["num_heads"], cfg["rope_theta"])
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, input_ids, attention_mask, position_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        causal_mask = causal_4d_mask(attention_mask, input_ids.shape[1], 0, inputs_embeds.dtype)
        position_embeddings = self.rotary_emb(inputs_embeds, position_ids)
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = layer(hidden_states, causal_mask, position_embeddings)
        return self.lm_head(self.norm(hidden_states))


def get_rope_index(input_ids, image_grid_thw, attention_mask, cfg=QVL):
    """Qwen2VLModel.get_rope_index for images: text tokens count on all three streams (the diagonal),
    an image's tokens take (t, h, w) of the merged patch grid offset by the text before them."""
    spatial_merge_size = cfg["spatial_merge_size"]
    image_token_id = cfg["image_token_id"]
    vision_start_token_id = cfg["vision_start_token_id"]
    position_ids = torch.ones(3, input_ids.shape[0], input_ids.shape[1], dtype=input_ids.dtype)
    image_index = 0
    for i, ids in enumerate(input_ids):
        ids = ids[attention_mask[i] == 1]
        vision_start_indices = torch.argwhere(ids == vision_start_token_id).squeeze(1)
        vision_tokens = ids[vision_start_indices + 1]
        image_nums = int((vision_tokens == image_token_id).sum())
        input_tokens = ids.tolist()
        llm_pos_ids_list = []
        st = 0
        for _ in range(image_nums):
            ed = input_tokens.index(image_token_id, st)
            t, h, w = image_grid_thw[image_index].tolist()
            image_index += 1
            llm_grid_t, llm_grid_h, llm_grid_w = t, h // spatial_merge_size, w // spatial_merge_size
            text_len = ed - st
            st_idx = llm_pos_ids_list[-1].max() + 1 if len(llm_pos_ids_list) > 0 else 0
            llm_pos_ids_list.append(torch.arange(text_len).view(1, -1).expand(3, -1) + st_idx)
            t_index = torch.arange(llm_grid_t).view(-1, 1).expand(-1, llm_grid_h * llm_grid_w).flatten()
            h_index = torch.arange(llm_grid_h).view(1, -1, 1).expand(llm_grid_t, -1, llm_grid_w).flatten()
            w_index = torch.arange(llm_grid_w).view(1, 1, -1).expand(llm_grid_t, llm_grid_h, -1).flatten()
            llm_pos_ids_list.append(torch.stack([t_index, h_index, w_index]) + text_len + st_idx)
            st = ed + llm_grid_t * llm_grid_h * llm_grid_w
        if st < len(input_tokens):
            st_idx = llm_pos_ids_list[-1].max() + 1 if len(llm_pos_ids_list) > 0 else 0
            text_len = len(input_tokens) - st
            llm_pos_ids_list.append(torch.arange(text_len).view(1, -1).expand(3, -1) + st_idx)
        llm_positions = torch.cat(llm_pos_ids_list, dim=1).reshape(3, -1)
        position_ids[..., i, attention_mask[i] == 1] = llm_positions
    return position_ids


def _mrope_prompt(name, salt, n_text_before, grid_thw, n_text_after, cfg=QVL):
    """Token ids of a prompt: text, <vision_start>, the image's merged patches, <vision_end>, text."""
    t, h, w = grid_thw
    n_img = t * (h // cfg["spatial_merge_size"]) * (w // cfg["spatial_merge_size"])
    g = gen(name, salt)
    before = torch.randint(1, 60, (n_text_before,), generator=g)
    after = torch.randint(1, 60, (n_text_after,), generator=g)
    return torch.cat([before, torch.tensor([cfg["vision_start_token_id"]]), torch.full((n_img,), cfg["image_token_id"]),
                      torch.tensor([cfg["vision_end_token_id"]]), after])


def _mrope_batch(name, salt, rows, seq):
    """Left-padded prompts (pad id 0) and their attention mask; rows: (before, grid or None, after)."""
    ids = torch.zeros(len(rows), seq, dtype=torch.int64)
    mask = torch.zeros(len(rows), seq, dtype=torch.int64)
    grids = []
    for r, (before, grid, after) in enumerate(rows):
        if grid is None:
            p = torch.randint(1, 60, (before,), generator=gen(name, f"{salt}{r}"))
        else:
            p = _mrope_prompt(name, f"{salt}{r}", before, grid, after)
            grids.append(list(grid))
        ids[r, seq - len(p):] = p
        mask[r, seq - len(p):] = 1
    pos = get_rope_index(ids, torch.tensor(grids, dtype=torch.int64), mask)
    return ids, mask, pos


def _mrope_inputs():
    name = "rope_mrope"
    # trace: batch 2, 14 tokens; test: batch 3, 20 tokens (one row text only)
    idtr, mtr, ptr = _mrope_batch(name, "trace", [(2, (1, 4, 6), 4), (1, (1, 4, 4), 3)], 14)
    idte, mte, pte = _mrope_batch(name, "test", [(3, (1, 4, 6), 8), (16, None, 0), (2, (1, 6, 4), 5)], 20)
    return [
        Input("input_ids", "input_ids", idtr, idte, {0: "batch", 1: "sequence"},
              {"vocab_size": QVL["vocab_size"], "range": [0, QVL["vocab_size"] - 1], "pad_id": 0,
               "image_token_id": QVL["image_token_id"], "vision_start_token_id": QVL["vision_start_token_id"]}),
        mask_input(mtr, mte, "left"),
        Input("position_ids", "position_ids", ptr, pte, {1: "batch", 2: "sequence"},
              {"shape_note": "[3, batch, sequence]: temporal, height, width streams (get_rope_index)",
               "streams": 3, "note": "text tokens on the diagonal (equal streams), image tokens on the (t, h, w) grid of merged patches; 1 on padding"}),
    ]


# --------------------------------------------------------------------------
# rope-vit RoPE-Axial (naver-ai/rope-vit models/vit_rope.py on deit models_v2)

AXV = dict(img_h=16, img_w=24, patch_size=4, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2, rope_theta=100.0, num_classes=10,
           init_values=1.0)


def init_t_xy(end_x, end_y):
    t = torch.arange(end_x * end_y, dtype=torch.float32)
    t_x = (t % end_x).float()
    t_y = torch.div(t, end_x, rounding_mode="floor").float()
    return t_x, t_y


def compute_axial_cis(dim, end_x, end_y, theta=100.0):
    """rope-vit compute_axial_cis; torch.polar(1, angle) is kept as its real and imaginary parts."""
    freqs_x = 1.0 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].float() / dim))
    freqs_y = 1.0 / (theta ** (torch.arange(0, dim, 4)[: (dim // 4)].float() / dim))
    t_x, t_y = init_t_xy(end_x, end_y)
    freqs_x = torch.outer(t_x, freqs_x)
    freqs_y = torch.outer(t_y, freqs_y)
    angles = torch.cat([freqs_x, freqs_y], dim=-1)
    return torch.cos(angles), torch.sin(angles)


def apply_rotary_emb_real(xq, xk, freqs_cos, freqs_sin):
    """rope-vit apply_rotary_emb (view_as_complex pairs (x[2i], x[2i+1]) times freqs_cis), on real pairs:
    torch.onnx 1.13 cannot export complex tensors."""

    def rot(x):
        xr = x.float().reshape(*x.shape[:-1], -1, 2)
        a, b = xr[..., 0], xr[..., 1]
        c = freqs_cos.view(1, 1, *freqs_cos.shape)
        s = freqs_sin.view(1, 1, *freqs_sin.shape)
        return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(3).type_as(x)

    return rot(xq), rot(xk)


class DeitAttention(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias=True):
        super().__init__()
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)


class RoPEAttention(DeitAttention):
    def forward(self, x, freqs_cos, freqs_sin):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q[:, :, 1:], k[:, :, 1:] = apply_rotary_emb_real(q[:, :, 1:], k[:, :, 1:], freqs_cos, freqs_sin)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class Mlp(nn.Module):
    """timm Mlp: fc1, GELU, fc2."""

    def __init__(self, in_features, hidden_features):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_features, in_features)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class RoPELayerScaleBlock(nn.Module):
    """deit Layer_scale_init_Block with RoPEAttention."""

    def __init__(self, dim, num_heads, mlp_ratio, init_values):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = RoPEAttention(dim, num_heads, qkv_bias=True)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.gamma_1 = nn.Parameter(init_values * torch.ones((dim)))
        self.gamma_2 = nn.Parameter(init_values * torch.ones((dim)))

    def forward(self, x, freqs_cos, freqs_sin):
        x = x + self.gamma_1 * self.attn(self.norm1(x), freqs_cos, freqs_sin)
        return x + self.gamma_2 * self.mlp(self.norm2(x))


class RoPEAxialViT(nn.Module):
    """rope_vit_models(rope_mixed=False, use_ape=False): cls token + patches, RoPE-Axial in every block."""

    def __init__(self, cfg=AXV):
        super().__init__()
        d = cfg["embed_dim"]
        self.patch_size = cfg["patch_size"]
        self.patch_embed = nn.Conv2d(3, d, kernel_size=self.patch_size, stride=self.patch_size)  # timm PatchEmbed
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, d))
        self.blocks = nn.ModuleList([RoPELayerScaleBlock(d, cfg["num_heads"], cfg["mlp_ratio"], cfg["init_values"]) for _ in range(cfg["depth"])])
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, cfg["num_classes"])
        self.dim = d // cfg["num_heads"]
        self.theta = cfg["rope_theta"]

    def forward(self, x):
        B, C, H, W = x.shape
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        cls_tokens = self.cls_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        # rope-vit recomputes freqs_cis when the grid differs from the square one of __init__
        freqs_cos, freqs_sin = compute_axial_cis(self.dim, end_x=W // self.patch_size, end_y=H // self.patch_size, theta=self.theta)
        for blk in self.blocks:
            x = blk(x, freqs_cos, freqs_sin)
        x = self.norm(x)
        return self.head(x[:, 0])


def _axial_inputs():
    g = gen("rope_axial_vit", "pixels")
    tr = torch.randn(2, 3, AXV["img_h"], AXV["img_w"], generator=g)
    te = torch.randn(3, 3, AXV["img_h"], AXV["img_w"], generator=g)
    return [
        Input("pixel_values", "pixel_values", tr, te, {0: "batch"},
              {"shape_note": f"[batch, 3, {AXV['img_h']}, {AXV['img_w']}], normalized pixels", "image_size": [AXV["img_h"], AXV["img_w"]],
               "patch_size": AXV["patch_size"], "grid": [AXV["img_h"] // AXV["patch_size"], AXV["img_w"] // AXV["patch_size"]]}),
    ]


def _axial_open_inputs():
    g = gen("rope_axial_vit_open", "pixels")
    tr = torch.randn(2, 3, AXV["img_h"], AXV["img_w"], generator=g)
    te = torch.randn(3, 3, 12, 20, generator=g)
    return [
        Input("pixel_values", "pixel_values", tr, te, {0: "batch", 2: "height", 3: "width"},
              {"shape_note": "[batch, 3, height, width], normalized pixels; height and width multiples of the patch size "
                             f"(traced at {AXV['img_h']}x{AXV['img_w']}, tested at 12x20: a 3 x 5 grid)",
               "patch_size": AXV["patch_size"]}),
    ]


# --------------------------------------------------------------------------
# Complex-order embeddings (FreedomIntelligence/complex-order, TEXT CLASSIFICATION/Transformer)

CPX = dict(h=2, N=1, d_model=32, d_ff=64, output_size=4, src_vocab=64)


def get_sinusoid_encoding_table(n_src_vocab, d_hid, padding_idx=None):
    """The authors' frequency initialisation: every word gets 1/10000^(2(j//2)/d) (row padding_idx zero)."""
    table = torch.tensor([[1 / math.pow(10000, 2 * (j // 2) / d_hid) for j in range(d_hid)] for _ in range(n_src_vocab)],
                         dtype=torch.float64).float()
    if padding_idx is not None:
        table[padding_idx] = 0.0
    return table


class CLayerNorm(nn.Module):
    """The text-classification template's LayerNorm (sublayer.py): a_2 (x - mean) / (std + eps) + b_2."""

    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2


class SublayerOutput(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.norm = CLayerNorm(size)

    def forward(self, x, sublayer):
        return x + sublayer(self.norm(x))


def complex_attention(query_real, key_real, value_real, query_phase, key_phase, value_phase):
    d_k = query_real.size(-1)
    scores_real = torch.matmul(query_real, key_real.transpose(-2, -1)) - torch.matmul(query_phase, key_phase.transpose(-2, -1))
    scores_phase = torch.matmul(query_real, key_phase.transpose(-2, -1)) + torch.matmul(query_phase, key_real.transpose(-2, -1))
    scores = scores_real * scores_real + scores_phase * scores_phase
    scores = torch.sqrt(scores)
    scores = scores / math.sqrt(d_k)
    p_attn = F.softmax(scores, dim=-1)
    return torch.matmul(p_attn, value_real), torch.matmul(p_attn, value_phase)


class ComplexMultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model):
        super().__init__()
        self.d_k = d_model // h
        self.h = h
        self.linears_real = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])  # clones(self.real, 4)
        self.linears_phase = self.linears_real

    def forward(self, query_real, key_real, value_real, query_phase, key_phase, value_phase):
        nbatches = query_real.size(0)
        query_real, key_real, value_real = [l(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                                            for l, x in zip(self.linears_real, (query_real, key_real, value_real))]
        query_phase, key_phase, value_phase = [l(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                                               for l, x in zip(self.linears_phase, (query_phase, key_phase, value_phase))]
        x_real, x_phase = complex_attention(query_real, key_real, value_real, query_phase, key_phase, value_phase)
        x_real = x_real.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        x_phase = x_phase.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears_real[-1](x_real), self.linears_phase[-1](x_phase)


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.w_2(F.relu(self.w_1(x)))


class ComplexEncoderLayer(nn.Module):
    def __init__(self, size, d_ff, h):
        super().__init__()
        self.self_attn = ComplexMultiHeadedAttention(h, size)
        self.feed_forward = PositionwiseFeedForward(size, d_ff)
        self.sublayer_output = nn.ModuleList([SublayerOutput(size) for _ in range(2)])
        self.size = size

    def forward(self, x, y):
        x, y = self.self_attn(x, x, x, y, y, y)
        x = self.sublayer_output[0](x, lambda x: x)
        y = self.sublayer_output[0](y, lambda x: y)
        return self.sublayer_output[1](x, self.feed_forward), self.sublayer_output[1](y, self.feed_forward)


class ComplexEncoder(nn.Module):
    def __init__(self, size, d_ff, h, N):
        super().__init__()
        self.layers = nn.ModuleList([ComplexEncoderLayer(size, d_ff, h) for _ in range(N)])
        self.norm = CLayerNorm(size)

    def forward(self, x_real, x_phase):
        for layer in self.layers:
            x_real, x_phase = layer(x_real, x_phase)
        return self.norm(x_real), self.norm(x_phase)


class ComplexOrderTransformer(nn.Module):
    """model_transformer/Complex_order.py Transformer: amplitude r(w) = src_word_emb, frequency w(w) =
    position_enc (learned, initialised from the sinusoid frequencies), phase pos * w(w) with
    pos = klen-1 .. 0, real/imaginary parts r cos, r sin."""

    def __init__(self, cfg=CPX):
        super().__init__()
        d = cfg["d_model"]
        self.encoder_layer = ComplexEncoderLayer(d, cfg["d_ff"], cfg["h"])
        self.encoder = ComplexEncoder(d, cfg["d_ff"], cfg["h"], cfg["N"])
        self.src_word_emb = nn.Embedding(cfg["src_vocab"], d, padding_idx=0)
        self.position_enc = nn.Embedding.from_pretrained(get_sinusoid_encoding_table(cfg["src_vocab"], d, padding_idx=0), freeze=False)
        self.fc = nn.Linear(d + d, cfg["output_size"])
        self.softmax = nn.Softmax(dim=1)  # nn.Softmax() on a 2-D input: dim 1

    def forward(self, x):
        enc_output_real = self.src_word_emb(x.permute(1, 0))
        enc_output_phase = self.position_enc(x.permute(1, 0))
        klen = enc_output_phase.size(1)
        pos_seq = torch.arange(klen - 1, -1, -1.0, device=enc_output_real.device, dtype=enc_output_real.dtype)
        pos_seq = torch.unsqueeze(pos_seq, -1)
        enc_output_phase = torch.mul(pos_seq, enc_output_phase)
        enc_output = enc_output_real
        cos = torch.cos(enc_output_phase)
        sin = torch.sin(enc_output_phase)
        enc_output_real = enc_output * cos
        enc_output_phase = enc_output * sin
        encoded_sents_real, encoded_sents_phase = self.encoder_layer(enc_output_real, enc_output_phase)
        encoded_sents_real, encoded_sents_phase = self.encoder(encoded_sents_phase, encoded_sents_real)
        encoded_sents = torch.cat([encoded_sents_real, encoded_sents_phase], 2)
        encoded_sents = encoded_sents[:, -1, :]
        return self.softmax(self.fc(encoded_sents))


def build_complex_order():
    m = ComplexOrderTransformer()
    # The corpus stands for a trained model: the per-word frequencies have moved from their common
    # initialisation (1 +- 20% per word and dimension; the padding row stays zero).
    g = gen("complex_order", "frequencies")
    with torch.no_grad():
        w = m.position_enc.weight
        w.mul_(1.0 + 0.2 * (2 * torch.rand(w.shape, generator=g) - 1))
    return m


def _complex_inputs():
    name = "complex_order"
    g = gen(name, "ids")
    tr = torch.randint(1, CPX["src_vocab"], (10, 2), generator=g)
    te = torch.randint(1, CPX["src_vocab"], (16, 3), generator=g)
    return [
        Input("text", "input_ids", tr, te, {0: "sequence", 1: "batch"},
              {"vocab_size": CPX["src_vocab"], "range": [1, CPX["src_vocab"] - 1], "layout": "[sequence, batch] (torchtext batch.text)"}),
    ]


# --------------------------------------------------------------------------
# FLOATER (xuanqing94/FLOATER: fairseq/models/flow_transformer.py, modules/flow_funcs.py,
# flow_attention.py, flow_transformer_layer.py) with torchdiffeq's fixed-grid rk4

FLT = dict(vocab_size=64, embed_dim=32, heads=2, ffn=64, layers=2, time_dt=0.01, max_seq_len=32, padding_idx=1)

_one_third = 1 / 3
_two_thirds = 2 / 3


# FLOATER initialises the dynamics with xavier_normal_; the tiny model uses the standard deviation
# that gives at FLOATER's embed_dim 512 (sqrt(2 / (513 + 512))), so that the flow moves as slowly as in
# the real model (xavier at embed_dim 32 would make it four times faster, and the 31 float32 steps
# drift from PyTorch by more than the corpus tolerance).
FLOW_STD = math.sqrt(2.0 / (513 + 512))


class Linear_t(nn.Module):
    def __init__(self, in_f, out_f, bias=True):
        super().__init__()
        self.linear = nn.Linear(in_f + 1, out_f, bias)
        nn.init.normal_(self.linear.weight, std=FLOW_STD)  # xavier_normal_ at FLOATER's size
        nn.init.zeros_(self.linear.bias)

    def forward(self, t, x):
        b_x, c_x, h = x.size()
        time = torch.ones((b_x, c_x, 1)).to(x) * t
        x_aug = torch.cat([x, time], dim=2)
        return self.linear(x_aug)


class flow_func_linear(nn.Module):
    def __init__(self, nc, c_multiplier, embed_dim):
        super().__init__()
        self.layers = nn.ModuleList([Linear_t(embed_dim, embed_dim), nn.ReLU(inplace=True), Linear_t(embed_dim, embed_dim)])

    def forward(self, t, x):
        for idx, layer in enumerate(self.layers):
            x = layer(t, x) if idx % 2 == 0 else layer(x)
        return x


def rk4_alt_step_func(func, t0, dt, t1, y0):
    """torchdiffeq rk_common.rk4_alt_step_func: the method "rk4" of its fixed-grid solvers (the 3/8 rule)."""
    k1 = func(t0, y0)
    k2 = func(t0 + dt * _one_third, y0 + dt * k1 * _one_third)
    k3 = func(t0 + dt * _two_thirds, y0 + dt * (k2 - k1 * _one_third))
    k4 = func(t1, y0 + dt * (k1 - k2 + k3))
    return (k1 + 3 * (k2 + k3) + k4) * dt * 0.125


def odeint_rk4_fixed(func, y0, t):
    """torchdiffeq odeint(func, y0, t, method="rk4", options={"step_size": t[1] - t[0]}): one step per
    interval of the time grid (the grid points are the solver's), solutions stacked."""
    solution = [y0]
    y = y0
    for i in range(1, t.shape[0]):
        t0, t1 = t[i - 1], t[i]
        y = y + rk4_alt_step_func(func, t0, t1 - t0, t1, y)
        solution.append(y)
    return torch.stack(solution)


@torch.jit.script
def _flow(t: torch.Tensor, x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """flow_func_linear written over its weights, for the scripted integration."""
    time = torch.ones((x.size(0), x.size(1), 1), dtype=x.dtype) * t
    h = torch.relu(torch.matmul(torch.cat([x, time], dim=2), w1.t()) + b1)
    return torch.matmul(torch.cat([h, time], dim=2), w2.t()) + b2


@torch.jit.script
def odeint_rk4_scripted(y0: torch.Tensor, t: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                        b2: torch.Tensor) -> torch.Tensor:
    """odeint_rk4_fixed as a TorchScript loop (exported as an ONNX Loop whose body is one rk4 step)."""
    solution = [y0]
    y = y0
    for i in range(1, t.size(0)):
        t0 = t[i - 1]
        t1 = t[i]
        dt = t1 - t0
        k1 = _flow(t0, y, w1, b1, w2, b2)
        k2 = _flow(t0 + dt * (1.0 / 3.0), y + dt * k1 * (1.0 / 3.0), w1, b1, w2, b2)
        k3 = _flow(t0 + dt * (2.0 / 3.0), y + dt * (k2 - k1 * (1.0 / 3.0)), w1, b1, w2, b2)
        k4 = _flow(t1, y + dt * (k1 - k2 + k3), w1, b1, w2, b2)
        y = y + (k1 + 3.0 * (k2 + k3) + k4) * dt * 0.125
        solution.append(y)
    return torch.stack(solution)


class FlowAttention(nn.Module):
    """flow_attention.FlowAttention, self-attention path (q, k, v biases given per position)."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim**-0.5
        self.in_proj_weights = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=True)
        nn.init.xavier_uniform_(self.in_proj_weights)
        nn.init.xavier_uniform_(self.out_proj.weight)

    def forward(self, query, bias_q, bias_k, bias_v, key_padding_mask):
        tgt_len, bsz, embed_dim = query.size()
        src_len = tgt_len
        q, k, v = F.linear(query, self.in_proj_weights).chunk(3, dim=-1)
        q = q + bias_q.unsqueeze(dim=1)
        q = q * self.scaling
        q = q.contiguous().view(tgt_len, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        k = k + bias_k.unsqueeze(dim=1)
        k = k.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        v = v + bias_v.unsqueeze(dim=1)
        v = v.contiguous().view(-1, bsz * self.num_heads, self.head_dim).transpose(0, 1)
        attn_weights = torch.bmm(q, k.transpose(1, 2))
        attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
        attn_weights = attn_weights.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf"))
        attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)
        attn_probs = F.softmax(attn_weights.float(), dim=-1).type_as(attn_weights)
        attn = torch.bmm(attn_probs, v)
        attn = attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)
        return self.out_proj(attn)


class FlowTransformerEncoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["embed_dim"]
        self.self_attn = FlowAttention(d, cfg["heads"])
        self.self_attn_layer_norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, cfg["ffn"])
        self.fc2 = nn.Linear(cfg["ffn"], d)
        self.final_layer_norm = nn.LayerNorm(d)

    def forward(self, x, encoder_padding_mask, proj_bias):
        residual = x
        x = self.self_attn(x, proj_bias[:, 0, :], proj_bias[:, 1, :], proj_bias[:, 2, :], encoder_padding_mask)
        x = self.self_attn_layer_norm(residual + x)  # post-norm (encoder_normalize_before False)
        residual = x
        x = self.fc2(F.relu(self.fc1(x)))
        return self.final_layer_norm(residual + x)


class FlowTransformerEncoder(nn.Module):
    """FlowTransformerEncoder with no_token_positional_embeddings (FLOATER is the only position signal):
    proj_bias [3, layers, d] is the initial state, proj_flow the dynamics, the q/k/v biases of position
    p are the state at time p * time_dt."""

    def __init__(self, cfg=FLT, scripted=False):
        super().__init__()
        d = cfg["embed_dim"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], d, padding_idx=cfg["padding_idx"])
        # fairseq's Embedding(): normal(0, embed_dim ** -0.5), padding row zero
        nn.init.normal_(self.embed_tokens.weight, mean=0, std=d**-0.5)
        nn.init.constant_(self.embed_tokens.weight[cfg["padding_idx"]], 0)
        self.padding_idx = cfg["padding_idx"]
        self.embed_scale = math.sqrt(d)
        self.proj_bias = nn.Parameter(torch.randn(3, cfg["layers"], d))
        nn.init.xavier_uniform_(self.proj_bias)
        self.register_buffer("time_dt", torch.tensor(cfg["time_dt"]))
        self.max_seq_len = cfg["max_seq_len"]
        self.proj_flow = flow_func_linear(cfg["layers"], 2, d)
        self.layers = nn.ModuleList([FlowTransformerEncoderLayer(cfg) for _ in range(cfg["layers"])])
        self.scripted = scripted

    def forward(self, src_tokens):
        x = self.embed_scale * self.embed_tokens(src_tokens)
        x = x.transpose(0, 1)
        encoder_padding_mask = src_tokens.eq(self.padding_idx)
        tok_len = x.size(0)
        time_grid = torch.arange(0, self.max_seq_len).to(x) * self.time_dt
        if self.scripted:
            l1, l2 = self.proj_flow.layers[0].linear, self.proj_flow.layers[2].linear
            bias_vec = odeint_rk4_scripted(self.proj_bias, time_grid, l1.weight, l1.bias, l2.weight, l2.bias)
        else:
            bias_vec = odeint_rk4_fixed(self.proj_flow, self.proj_bias, time_grid)
        all_proj_bias = bias_vec[:tok_len]
        for lid, layer in enumerate(self.layers):
            x = layer(x, encoder_padding_mask, all_proj_bias[:, :, lid, :])
        return x.transpose(0, 1)


def _floater_inputs(name):
    def make():
        mtr = right_padded_mask([10, 7], 10)
        mte = right_padded_mask([24, 19, 15], 24)
        return [token_ids_input(name, FLT["vocab_size"], (2, 10), (3, 24), low=2, pad_id=FLT["padding_idx"], mask_trace=mtr, mask_test=mte)]

    return make


# --------------------------------------------------------------------------
# Specs


def _lm_inputs(name, vocab, side, test_seq, low=0, mask=True):
    def make():
        if side == "left":
            mtr, mte = left_padded_mask([10, 7], 10), left_padded_mask([test_seq, test_seq - 5, test_seq], test_seq)
        elif side == "right":
            mtr, mte = right_padded_mask([10, 7], 10), right_padded_mask([test_seq, test_seq - 5, test_seq - 9], test_seq)
        else:
            mtr, mte = torch.ones(2, 10, dtype=torch.int64), torch.ones(3, test_seq, dtype=torch.int64)
        ins = [token_ids_input(name, vocab, (2, 10), (3, test_seq), low=low, pad_id=0 if side != "none" else None, mask_trace=mtr, mask_test=mte)]
        if mask:
            ins.append(mask_input(mtr, mte, side))
        return ins

    return make


def _deberta_params():
    return {"position_buckets": DEB["position_buckets"], "max_relative_positions": DEB["max_position_embeddings"],
            "att_types": ["c2p", "p2c"], "share_att_key": True, "scale_factor": 3}


def _floater_params(form, table=False):
    return {"dim": FLT["embed_dim"], "solver": None if table else "rk4_3_8", "step": None if table else FLT["time_dt"],
            "max_positions": FLT["max_seq_len"], "form": "table" if table else form, "injection": "per_layer"}


SPECS = [
    Spec(
        name="relative_transfo_xl",
        build=lambda: TransfoXLModel(),
        inputs=_lm_inputs("relative_transfo_xl", TXL["vocab_size"], "none", 24, mask=False),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference="HF transformers TransfoXLModel (deprecated/transfo_xl: PositionalEmbedding, RelPartialLearnableMultiHeadAttn._rel_shift)",
        variant="relative sinusoid of pos_seq = klen-1 .. 0 clamped at clamp_len 16, [sin | cos] with inv_freq 1/10000^(2i/d) (d = d_model 32), projected by each layer's r_net; scores (q + r_w_bias).k + (q + r_r_bias).R with per-layer biases (untie_r), BD aligned by the pad/reshape/slice relative shift; causal mask, [len, batch] layout, einsum; no memory (mem_len 0), no adaptive softmax head",
        num_layers=TXL["n_layer"],
        findings=[{"scheme": "relative_sinusoidal", "layers": [0, 1], "params": {
            "variant": "transfo_xl", "dim": TXL["d_model"], "base": 10000.0, "global_biases": True, "clamp_len": TXL["clamp_len"],
            "rel_shift": "pad_reshape_slice"}}],
    ),
    Spec(
        name="relative_xlnet",
        build=lambda: XLNetModel(),
        inputs=_lm_inputs("relative_xlnet", XLN["vocab_size"], "right", 24, low=1),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference="HF transformers XLNetModel (relative_positional_encoding, XLNetRelativeAttention.rel_attn_core, rel_shift_bnij)",
        variant="attn_type bi: relative sinusoid of klen .. -qlen+1 (klen + qlen rows), [sin | cos], inv_freq 1/10000^(2i/d) computed in forward, no clamp (clamp_len -1), projected by each layer's r; scores (q + r_w_bias).k + (q + r_r_bias).R with per-layer biases, BD aligned by reshape/slice/index_select (rel_shift_bnij); padding mask from attention_mask (non_tgt_mask), no token_type_ids, no mems",
        num_layers=XLN["n_layer"],
        findings=[{"scheme": "relative_sinusoidal", "layers": [0, 1], "params": {
            "variant": "xlnet", "dim": XLN["d_model"], "base": 10000.0, "global_biases": True, "clamp_len": None,
            "rel_shift": "reshape_slice"}}],
    ),
    Spec(
        name="disentangled_deberta",
        build=lambda: DebertaV2Model(),
        inputs=_lm_inputs("disentangled_deberta", DEB["vocab_size"], "right", 24, low=1),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference="HF transformers DebertaV2Model (make_log_bucket_position, build_relative_position, DisentangledSelfAttention.disentangled_attention_bias, XSoftmax)",
        variant="deberta-v3 configuration: relative positions q - k log-bucketed (position_buckets 16, max_relative_positions = max_position_embeddings 128), rel_embeddings [32, d] + LayerNorm shared by the layers, c2p and p2c through the content projections (share_att_key), gathered at clamp(+-rel + 16, 0, 31), scores / sqrt(head_dim * 3); no absolute positions (position_biased_input False)",
        num_layers=DEB["num_hidden_layers"],
        findings=[{"scheme": "disentangled", "layers": [0, 1], "params": _deberta_params()}],
    ),
    Spec(
        name="disentangled_deberta_unshared",
        build=lambda: DebertaV2Model(DEB_UNSHARED),
        inputs=_lm_inputs("disentangled_deberta_unshared", DEB["vocab_size"], "right", 24, low=1),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference="HF transformers DebertaV2Model (build_relative_position, DisentangledSelfAttention with pos_key_proj / pos_query_proj, XSoftmax)",
        variant="deberta-v2 without buckets: relative positions q - k clamped to the table (max_relative_positions 16, rel_embeddings [32, d] + LayerNorm), c2p and p2c through separate position projections (share_att_key False), scores / sqrt(head_dim * 3)",
        num_layers=DEB["num_hidden_layers"],
        findings=[{"scheme": "disentangled", "layers": [0, 1], "params": {
            "position_buckets": None, "max_relative_positions": DEB_UNSHARED["max_relative_positions"],
            "att_types": ["c2p", "p2c"], "share_att_key": False, "scale_factor": 3}}],
    ),
    Spec(
        name="rope_mrope",
        build=lambda: Qwen2VLForCausalLM(),
        inputs=_mrope_inputs,
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="HF transformers Qwen2VLTextModel (Qwen2VLRotaryEmbedding, apply_multimodal_rotary_pos_emb, Qwen2VLModel.get_rope_index)",
        variant="multimodal RoPE: position_ids [3, B, S] (temporal, height, width), cos/sin per stream from inv_freq 1/1e6^(2i/16), mrope_section [2, 3, 3] of the 8 frequencies taken from streams t, h, w (doubled for the two halves), half-split rotation; GQA 4/2 heads, q/k/v bias; test prompts hold images of merged grids 2x3 and 3x2",
        num_layers=QVL["num_layers"],
        findings=[{"scheme": "rope", "layers": [0, 1], "params": {
            "layout": "half_split", "base": QVL["rope_theta"], "head_dim": 16, "rotary_dim": 16, "num_heads": 4, "num_kv_heads": 2,
            "scaling": "none", "factor": 1.0, "max_positions": None, "multimodal_sections": QVL["mrope_section"]}}],
    ),
    Spec(
        name="rope_axial_vit",
        build=lambda: RoPEAxialViT(),
        inputs=_axial_inputs,
        outputs=["logits"],
        output_axes={"logits": {0: "batch"}},
        reference="naver-ai/rope-vit RoPE-Axial (models/vit_rope.py: compute_axial_cis, init_t_xy, apply_rotary_emb, RoPEAttention) on deit models_v2",
        variant="2-D axial RoPE over a 4 x 6 patch grid (16x24 image, patch 4): head_dim 16, theta 100, pairs (x[2i], x[2i+1]); pairs 0-3 turned by the column (t % 6) at 1/100^(4i/16), pairs 4-7 by the row (t // 6); cls token not rotated; cos/sin of the grid computed in forward from the image's shape (Shape, Range, Div, Floor, Einsum, Cos, Sin stay in the graph; the fixed image size makes them constants); layer scale 1.0",
        num_layers=AXV["depth"],
        findings=[{"scheme": "rope", "layers": [0, 1], "params": {
            "layout": "interleaved", "base": AXV["rope_theta"], "head_dim": 16, "rotary_dim": 16, "num_heads": 2, "num_kv_heads": 2,
            "scaling": "none", "factor": 1.0, "max_positions": None, "axes": 2, "grid": [4, 6]}}],
    ),
    Spec(
        name="rope_axial_vit_open",
        build=lambda: RoPEAxialViT(),
        inputs=_axial_open_inputs,
        outputs=["logits"],
        output_axes={"logits": {0: "batch"}},
        reference="naver-ai/rope-vit RoPE-Axial (models/vit_rope.py: compute_axial_cis, init_t_xy, apply_rotary_emb, RoPEAttention) on deit models_v2",
        variant="rope_axial_vit exported with dynamic height and width (pixel_values [batch, 3, height, width]): the grid is H // 4 x W // 4 of the image at run time (Shape, Gather, Div, Range, Div, Floor, Einsum, Cos, Sin computed per call); head_dim 16, theta 100, pairs 0-3 turned by the column, 4-7 by the row; cls token not rotated",
        num_layers=AXV["depth"],
        findings=[{"scheme": "rope", "layers": [0, 1], "params": {
            "layout": "interleaved", "base": AXV["rope_theta"], "head_dim": 16, "rotary_dim": 16, "num_heads": 2, "num_kv_heads": 2,
            "scaling": "none", "factor": 1.0, "max_positions": None, "axes": 2, "grid": None}}],
    ),
    Spec(
        name="complex_order",
        build=build_complex_order,
        inputs=_complex_inputs,
        outputs=["probs"],
        output_axes={"probs": {0: "batch"}},
        reference="FreedomIntelligence/complex-order (Wang et al. 2020), TEXT CLASSIFICATION/Transformer/model_transformer/Complex_order.py with attention_complex.py, encoder_complex.py",
        variant="complex word embeddings r(w) exp(i pos w(w)): amplitude src_word_emb, per-word frequencies position_enc (learned, initialised from 1/10000^(2(j//2)/d)), pos = klen-1 .. 0, no initial phase; real and imaginary parts r cos, r sin; complex attention with scores |q.k*| / sqrt(d_k), real/imaginary projections shared; input [sequence, batch]",
        num_layers=1 + CPX["N"],
        findings=[{"scheme": "complex_order", "layers": [0, 1], "params": {
            "dim": CPX["d_model"], "learned_frequency": True, "learned_phase": False, "position_order": "descending"}}],
    ),
    Spec(
        name="floater_unrolled",
        build=lambda: FlowTransformerEncoder(FLT, scripted=False),
        inputs=_floater_inputs("floater_unrolled"),
        outputs=["encoder_out"],
        output_axes={"encoder_out": {0: "batch", 1: "sequence"}},
        reference="xuanqing94/FLOATER (Liu et al. 2020): FlowTransformerEncoder, flow_func_linear, FlowAttention; torchdiffeq fixed-grid rk4 (rk4_alt_step_func)",
        variant="per-layer q/k/v position biases p(t) integrated from proj_bias [3, 2, 32] by dp/dt = Linear_t(ReLU(Linear_t(t, p))) with rk4 (3/8 rule) steps of time_dt 0.01 over 32 grid points, sliced [:seq]; the 31 steps unrolled by the tracer (exported without constant folding, which would fold the integration to a table); no sinusoidal embedding",
        num_layers=FLT["layers"],
        notes="exported with do_constant_folding=False; step_size = time_dt (FLOATER's code uses time_dt / 5)",
        constant_folding=False,
        findings=[{"scheme": "floater", "layers": [0, 1], "params": _floater_params("unrolled")}],
        # ONNX Runtime folds the unrolled integration (it depends on weights only) into a stored table.
        ort_findings=[{"scheme": "floater", "layers": [0, 1], "params": _floater_params("unrolled", table=True)}],
    ),
    Spec(
        name="floater_loop",
        build=lambda: FlowTransformerEncoder(FLT, scripted=True),
        inputs=_floater_inputs("floater_loop"),
        outputs=["encoder_out"],
        output_axes={"encoder_out": {0: "batch", 1: "sequence"}},
        reference="xuanqing94/FLOATER (Liu et al. 2020): FlowTransformerEncoder, flow_func_linear, FlowAttention; torchdiffeq fixed-grid rk4 (rk4_alt_step_func), integration scripted",
        variant="floater_unrolled with the integration written as a TorchScript loop: an ONNX Loop over the 31 steps whose body is one rk4 (3/8 rule) step, states collected and stacked",
        num_layers=FLT["layers"],
        notes="exported with do_constant_folding=False; step_size = time_dt (FLOATER's code uses time_dt / 5)",
        constant_folding=False,
        findings=[{"scheme": "floater", "layers": [0, 1], "params": _floater_params("loop")}],
    ),
]
