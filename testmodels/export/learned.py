"""Learned absolute position embeddings (and BERT's relative_key variant, which lives here
because it is the same BertModel with position_embedding_type="relative_key").

learned_gpt2       HF GPT2Model: wpe gathered with arange(past_length, past_length + seq) ids.
learned_bert       HF BertModel: position_ids buffer sliced [:, past:past + seq], token types.
learned_vit        HF ViTModel: [CLS] + Conv2d patch embeddings, whole position table added.
relative_bert_key  HF BertModel with position_embedding_type="relative_key".
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from common import (
    Input,
    NewGELUActivation,
    Spec,
    left_padded_mask,
    mask_input,
    right_padded_mask,
    token_ids_input,
)

# --------------------------------------------------------------------------
# GPT-2 (transformers/models/gpt2/modeling_gpt2.py, v4.3x eager path)

GPT2 = dict(vocab_size=64, n_positions=64, n_embd=32, n_head=2, n_layer=2)


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02 * 10)  # 10x GPT-2's init so attention is not uniform
        nn.init.normal_(self.bias, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class GPT2Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        max_positions = config["n_positions"]
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.embed_dim = config["n_embd"]
        self.num_heads = config["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = True
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def _attn(self, query, key, value, attention_mask=None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states, attention_mask=None):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        attn_output = self._attn(query, key, value, attention_mask)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        return self.c_proj(attn_output)


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, embed_dim):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation()

    def forward(self, hidden_states):
        return self.c_proj(self.act(self.c_fc(hidden_states)))


class GPT2Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden_size = config["n_embd"]
        self.ln_1 = nn.LayerNorm(hidden_size, eps=1e-5)
        self.attn = GPT2Attention(config)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=1e-5)
        self.mlp = GPT2MLP(2 * hidden_size, hidden_size)

    def forward(self, hidden_states, attention_mask=None):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        hidden_states = self.attn(hidden_states, attention_mask=attention_mask) + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        return residual + self.mlp(hidden_states)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, config=GPT2):
        super().__init__()
        self.wte = nn.Embedding(config["vocab_size"], config["n_embd"])
        self.wpe = nn.Embedding(config["n_positions"], config["n_embd"])
        self.h = nn.ModuleList([GPT2Block(config) for _ in range(config["n_layer"])])
        self.ln_f = nn.LayerNorm(config["n_embd"], eps=1e-5)
        self.lm_head = nn.Linear(config["n_embd"], config["vocab_size"], bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        # GPT-2 initialises wte/wpe with std 0.02; 0.25 keeps the tied logits O(1) while the
        # position table stays as large as the token table.
        nn.init.normal_(self.wte.weight, std=0.25)
        nn.init.normal_(self.wpe.weight, std=0.25)

    def forward(self, input_ids, attention_mask):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        batch_size = input_ids.shape[0]
        past_length = 0  # no past_key_values in this export
        position_ids = torch.arange(past_length, input_shape[-1] + past_length, dtype=torch.long)
        position_ids = position_ids.unsqueeze(0).view(-1, input_shape[-1])
        attention_mask = attention_mask.view(batch_size, -1)
        attention_mask = attention_mask[:, None, None, :]
        attention_mask = attention_mask.to(dtype=torch.float32)
        attention_mask = (1.0 - attention_mask) * torch.finfo(torch.float32).min
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        for block in self.h:
            hidden_states = block(hidden_states, attention_mask=attention_mask)
        hidden_states = self.ln_f(hidden_states)
        return self.lm_head(hidden_states)


# --------------------------------------------------------------------------
# BERT (transformers/models/bert/modeling_bert.py, v4.3x eager path)

BERT = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=64, type_vocab_size=2, layer_norm_eps=1e-12)


class BertEmbeddings(nn.Module):
    def __init__(self, config, position_embedding_type):
        super().__init__()
        self.word_embeddings = nn.Embedding(config["vocab_size"], config["hidden_size"], padding_idx=0)
        self.position_embedding_type = position_embedding_type
        if position_embedding_type == "absolute":
            # BertEmbeddings always creates position_embeddings; with relative_key the table is
            # unused, so the tracer drops it: we do not create it at all.
            self.position_embeddings = nn.Embedding(config["max_position_embeddings"], config["hidden_size"])
        self.token_type_embeddings = nn.Embedding(config["type_vocab_size"], config["hidden_size"])
        self.LayerNorm = nn.LayerNorm(config["hidden_size"], eps=config["layer_norm_eps"])
        self.register_buffer("position_ids", torch.arange(config["max_position_embeddings"]).expand((1, -1)), persistent=False)

    def forward(self, input_ids, token_type_ids, past_key_values_length=0):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        if self.position_embedding_type == "absolute":
            position_ids = self.position_ids[:, past_key_values_length : seq_length + past_key_values_length]
            position_embeddings = self.position_embeddings(position_ids)
            embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, config, position_embedding_type):
        super().__init__()
        self.num_attention_heads = config["num_attention_heads"]
        self.attention_head_size = config["hidden_size"] // config["num_attention_heads"]
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config["hidden_size"], self.all_head_size)
        self.key = nn.Linear(config["hidden_size"], self.all_head_size)
        self.value = nn.Linear(config["hidden_size"], self.all_head_size)
        self.position_embedding_type = position_embedding_type
        if self.position_embedding_type in ("relative_key", "relative_key_query"):
            self.max_position_embeddings = config["max_position_embeddings"]
            self.distance_embedding = nn.Embedding(2 * config["max_position_embeddings"] - 1, self.attention_head_size)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        if self.position_embedding_type in ("relative_key", "relative_key_query"):
            query_length, key_length = query_layer.shape[2], key_layer.shape[2]
            position_ids_l = torch.arange(query_length, dtype=torch.long, device=hidden_states.device).view(-1, 1)
            position_ids_r = torch.arange(key_length, dtype=torch.long, device=hidden_states.device).view(1, -1)
            distance = position_ids_l - position_ids_r
            positional_embedding = self.distance_embedding(distance + self.max_position_embeddings - 1)
            positional_embedding = positional_embedding.to(dtype=query_layer.dtype)  # fp16 compatibility
            if self.position_embedding_type == "relative_key":
                relative_position_scores = torch.einsum("bhld,lrd->bhlr", query_layer, positional_embedding)
                attention_scores = attention_scores + relative_position_scores
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_context_layer_shape)


class BertLayer(nn.Module):
    def __init__(self, config, position_embedding_type):
        super().__init__()
        h, eps = config["hidden_size"], config["layer_norm_eps"]
        self.self = BertSelfAttention(config, position_embedding_type)
        self.attn_output_dense = nn.Linear(h, h)
        self.attn_output_LayerNorm = nn.LayerNorm(h, eps=eps)
        self.intermediate_dense = nn.Linear(h, config["intermediate_size"])
        self.output_dense = nn.Linear(config["intermediate_size"], h)
        self.output_LayerNorm = nn.LayerNorm(h, eps=eps)

    def forward(self, hidden_states, attention_mask):
        self_outputs = self.self(hidden_states, attention_mask)
        attention_output = self.attn_output_LayerNorm(self.attn_output_dense(self_outputs) + hidden_states)
        intermediate_output = F.gelu(self.intermediate_dense(attention_output))
        return self.output_LayerNorm(self.output_dense(intermediate_output) + attention_output)


class BertModel(nn.Module):
    def __init__(self, config=BERT, position_embedding_type="absolute"):
        super().__init__()
        self.embeddings = BertEmbeddings(config, position_embedding_type)
        self.layer = nn.ModuleList([BertLayer(config, position_embedding_type) for _ in range(config["num_hidden_layers"])])

    def forward(self, input_ids, attention_mask, token_type_ids):
        # get_extended_attention_mask
        extended_attention_mask = attention_mask[:, None, None, :].to(dtype=torch.float32)
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(torch.float32).min
        hidden_states = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, extended_attention_mask)
        return hidden_states


# --------------------------------------------------------------------------
# ViT (transformers/models/vit/modeling_vit.py)

VIT = dict(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
           intermediate_size=64, layer_norm_eps=1e-12, num_labels=10)
VIT_NUM_PATCHES = (VIT["image_size"] // VIT["patch_size"]) ** 2


class ViTPatchEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.projection = nn.Conv2d(config["num_channels"], config["hidden_size"], kernel_size=config["patch_size"], stride=config["patch_size"])

    def forward(self, pixel_values):
        return self.projection(pixel_values).flatten(2).transpose(1, 2)


class ViTEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.cls_token = nn.Parameter(torch.randn(1, 1, config["hidden_size"]))
        self.patch_embeddings = ViTPatchEmbeddings(config)
        self.position_embeddings = nn.Parameter(torch.randn(1, VIT_NUM_PATCHES + 1, config["hidden_size"]))

    def forward(self, pixel_values):
        batch_size = pixel_values.shape[0]
        embeddings = self.patch_embeddings(pixel_values)
        cls_tokens = self.cls_token.expand(batch_size, -1, -1)
        embeddings = torch.cat((cls_tokens, embeddings), dim=1)
        embeddings = embeddings + self.position_embeddings
        return embeddings


class ViTLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        h, eps = config["hidden_size"], config["layer_norm_eps"]
        self.layernorm_before = nn.LayerNorm(h, eps=eps)
        self.attention = BertSelfAttention(
            dict(hidden_size=h, num_attention_heads=config["num_attention_heads"]), "absolute"
        )  # ViTSelfAttention is BertSelfAttention without relative branches
        self.attention_output = nn.Linear(h, h)
        self.layernorm_after = nn.LayerNorm(h, eps=eps)
        self.intermediate = nn.Linear(h, config["intermediate_size"])
        self.output = nn.Linear(config["intermediate_size"], h)

    def forward(self, hidden_states):
        attention_output = self.attention_output(self.attention(self.layernorm_before(hidden_states)))
        hidden_states = attention_output + hidden_states
        layer_output = self.output(F.gelu(self.intermediate(self.layernorm_after(hidden_states))))
        return layer_output + hidden_states


class ViTForImageClassification(nn.Module):
    def __init__(self, config=VIT):
        super().__init__()
        self.embeddings = ViTEmbeddings(config)
        self.layer = nn.ModuleList([ViTLayer(config) for _ in range(config["num_hidden_layers"])])
        self.layernorm = nn.LayerNorm(config["hidden_size"], eps=config["layer_norm_eps"])
        self.classifier = nn.Linear(config["hidden_size"], config["num_labels"])

    def forward(self, pixel_values):
        hidden_states = self.embeddings(pixel_values)
        for layer in self.layer:
            hidden_states = layer(hidden_states)
        sequence_output = self.layernorm(hidden_states)
        return self.classifier(sequence_output[:, 0, :])


# --------------------------------------------------------------------------
# Specs


def _gpt2_inputs():
    name = "learned_gpt2"
    mtr = left_padded_mask([8, 5], 8)
    mte = left_padded_mask([12, 7, 12], 12)
    return [
        token_ids_input(name, GPT2["vocab_size"], (2, 8), (3, 12), pad_id=0, mask_trace=mtr, mask_test=mte),
        mask_input(mtr, mte, "left"),
    ]


def _bert_inputs(name):
    def make():
        mtr = right_padded_mask([8, 6], 8)
        mte = right_padded_mask([12, 10, 6], 12)
        ids_in = token_ids_input(name, BERT["vocab_size"], (2, 8), (3, 12), low=1, pad_id=0, mask_trace=mtr, mask_test=mte)
        # sentence A / sentence B split, 0 on padding
        ttr = ((torch.arange(8)[None, :] >= torch.tensor([4, 3])[:, None]) & mtr.bool()).long()
        tte = ((torch.arange(12)[None, :] >= torch.tensor([6, 5, 3])[:, None]) & mte.bool()).long()
        return [
            ids_in,
            mask_input(mtr, mte, "right"),
            Input("token_type_ids", "token_type_ids", ttr, tte, {0: "batch", 1: "sequence"},
                  {"range": [0, BERT["type_vocab_size"] - 1], "type_vocab_size": BERT["type_vocab_size"]}),
        ]

    return make


def _vit_inputs():
    g = torch.Generator()
    g.manual_seed(1234)
    tr = torch.randn(2, 3, 16, 16, generator=g)
    te = torch.randn(3, 3, 16, 16, generator=g)
    return [
        Input("pixel_values", "pixel_values", tr, te, {0: "batch"},
              {"shape_note": "[batch, 3, 16, 16], normalized pixels", "image_size": 16, "patch_size": 4, "num_patches": VIT_NUM_PATCHES}),
    ]


SPECS = [
    Spec(
        name="learned_gpt2",
        build=lambda: GPT2LMHeadModel(),
        inputs=_gpt2_inputs,
        outputs=["logits"],
        output_axes={"logits": {0: "batch", 1: "sequence"}},
        reference="HF transformers GPT2LMHeadModel (GPT2Attention eager, Conv1D)",
        variant="wpe gathered with position_ids = arange(past_length, past_length + seq), past_length 0; causal bias buffer sliced + where(finfo.min); left-padded attention_mask; lm_head tied to wte; LayerNorm decomposed at opset 14",
        num_layers=GPT2["n_layer"],
        opset=14,
        findings=[
            {"scheme": "learned_absolute", "layers": [0, 1], "params": {"max_positions": GPT2["n_positions"], "dim": GPT2["n_embd"], "position_offset": 0}}
        ],
    ),
    Spec(
        name="learned_bert",
        build=lambda: BertModel(),
        inputs=_bert_inputs("learned_bert"),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference="HF transformers BertModel (BertEmbeddings, BertSelfAttention eager)",
        variant="position_embeddings gathered with the position_ids buffer sliced [:, 0:seq], plus token_type embeddings, then LayerNorm; post-norm encoder; opset 14",
        num_layers=BERT["num_hidden_layers"],
        opset=14,
        findings=[
            {"scheme": "learned_absolute", "layers": [0, 1], "params": {"max_positions": BERT["max_position_embeddings"], "dim": BERT["hidden_size"], "position_offset": 0}}
        ],
    ),
    Spec(
        name="learned_vit",
        build=lambda: ViTForImageClassification(),
        inputs=_vit_inputs,
        outputs=["logits"],
        output_axes={"logits": {0: "batch"}},
        reference="HF transformers ViTForImageClassification (ViTEmbeddings, ViTPatchEmbeddings)",
        variant="[CLS] token + Conv2d(k=4, s=4) patch embeddings of a 16x16 image (16 patches), whole [1, 17, d] position table added (no gather); dynamic batch only",
        num_layers=VIT["num_hidden_layers"],
        findings=[
            {"scheme": "learned_absolute", "layers": [0, 1], "params": {"max_positions": VIT_NUM_PATCHES + 1, "dim": VIT["hidden_size"], "position_offset": 0}}
        ],
    ),
    Spec(
        name="relative_bert_key",
        build=lambda: BertModel(position_embedding_type="relative_key"),
        inputs=_bert_inputs("relative_bert_key"),
        outputs=["last_hidden_state"],
        output_axes={"last_hidden_state": {0: "batch", 1: "sequence"}},
        reference='HF transformers BertSelfAttention with position_embedding_type="relative_key" (Shaw et al. 2018 keys)',
        variant="distance_embedding (2*64-1 rows, head_dim wide) indexed by (query - key) + 63, einsum('bhld,lrd->bhlr', q, emb) added to q.k before the 1/sqrt(d) scaling; no clipping in HF (valid while seq <= 64), no absolute position embeddings",
        num_layers=BERT["num_hidden_layers"],
        findings=[
            {
                "scheme": "relative_clipped",
                "layers": [0, 1],
                "params": {
                    # No clamp: the index is (query - key) + 63 into 127 rows, so 63 is the
                    # table's radius (how far the model reaches), not a clipping distance:
                    # the graph fixes no max_relative_position (issue 21).
                    "max_relative_position": None,
                    "dim": BERT["hidden_size"] // BERT["num_attention_heads"],
                    "distance": "query_minus_key",
                    "relative_values": False,
                    "clipped": False,
                    "per_layer_tables": True,
                },
            }
        ],
    ),
]
