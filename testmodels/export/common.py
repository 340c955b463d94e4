"""Shared pieces of the onnxpe export corpus: the model spec, input helpers, export.

Every model module (sinusoidal.py, learned.py, rope.py, alibi.py, relative.py,
nope.py, family.py) defines a list SPECS of Spec values. export.py builds, exports and
checks each of them and writes the manifest.
"""

import math
import zlib
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

import torch
from torch import nn

DEFAULT_OPSET = 17


@dataclass
class Input:
    """One graph input: its name, its meaning and the tensors used to trace and test."""

    name: str
    role: str  # input_ids | position_ids | attention_mask | token_type_ids | pixel_values | past_key | past_value
    trace: torch.Tensor
    test: torch.Tensor
    axes: Dict[int, str]  # dynamic axes
    meaning: Dict[str, object] = field(default_factory=dict)  # value ranges, padding side, ...


@dataclass
class Spec:
    """A model of the corpus and its ground truth in DESIGN.md's vocabulary."""

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[], List[Input]]
    outputs: List[str]
    output_axes: Dict[str, Dict[int, str]]
    reference: str
    variant: str
    num_layers: int
    findings: List[dict]  # {"scheme", "layers", "params"}
    opset: int = DEFAULT_OPSET
    dtype: str = "float32"
    notes: Optional[str] = None
    constant_folding: bool = True  # torch.onnx.export's do_constant_folding
    # The findings of ONNX Runtime's saves when they differ from the export's (ORT folds what the
    # export computes from weights only), None when they are the same.
    ort_findings: Optional[List[dict]] = None


def seed_for(name: str) -> int:
    """A per-model seed, so adding a model does not change the others."""
    return zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF


def gen(name: str, salt: str) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(zlib.crc32((name + "/" + salt).encode("utf-8")) & 0x7FFFFFFF)
    return g


def ids(name: str, salt: str, shape, low: int, high: int) -> torch.Tensor:
    """Token ids in [low, high)."""
    return torch.randint(low, high, shape, generator=gen(name, salt), dtype=torch.int64)


def right_padded_mask(lengths, seq: int) -> torch.Tensor:
    """1 for real tokens, 0 for padding at the end of each row."""
    return (torch.arange(seq)[None, :] < torch.tensor(lengths)[:, None]).to(torch.int64)


def left_padded_mask(lengths, seq: int) -> torch.Tensor:
    """1 for real tokens, 0 for padding at the start of each row."""
    return (torch.arange(seq)[None, :] >= (seq - torch.tensor(lengths))[:, None]).to(torch.int64)


def token_ids_input(name, vocab, trace_shape, test_shape, low=0, pad_id=None, mask_trace=None, mask_test=None):
    """input_ids, with pad_id written where the matching mask is 0."""
    tr = ids(name, "ids_trace", trace_shape, low, vocab)
    te = ids(name, "ids_test", test_shape, low, vocab)
    if pad_id is not None:
        if mask_trace is not None:
            tr = torch.where(mask_trace.bool(), tr, torch.full_like(tr, pad_id))
        if mask_test is not None:
            te = torch.where(mask_test.bool(), te, torch.full_like(te, pad_id))
    meaning = {"vocab_size": vocab, "range": [low, vocab - 1]}
    if pad_id is not None:
        meaning["pad_id"] = pad_id
    return Input("input_ids", "input_ids", tr, te, {0: "batch", 1: "sequence"}, meaning)


def mask_input(trace, test, padding_side, name="attention_mask", axes=None):
    return Input(
        name,
        "attention_mask",
        trace,
        test,
        axes or {0: "batch", 1: "sequence"},
        {"range": [0, 1], "padding_side": padding_side, "meaning": "1 = real token, 0 = padding"},
    )


def position_ids_input(trace, test, max_positions, note=None):
    meaning = {"range": [0, max_positions - 1], "max_positions": max_positions}
    if note:
        meaning["note"] = note
    return Input("position_ids", "position_ids", trace, test, {0: "batch", 1: "sequence"}, meaning)


def offset_positions(batch, seq, offsets):
    """position_ids rows arange(seq) + offsets[b]: positions that do not start at 0."""
    return torch.arange(seq)[None, :].repeat(batch, 1) + torch.tensor(offsets)[:, None]


# ---------------------------------------------------------------------------
# Small building blocks written after HF transformers.


class NewGELUActivation(nn.Module):
    """HF activations.NewGELUActivation (gelu_new, GPT-2 / GPT-J / BLOOM's tanh form)."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class RMSNorm(nn.Module):
    """HF LlamaRMSNorm."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaMLP(nn.Module):
    """HF LlamaMLP: down(silu(gate(x)) * up(x))."""

    def __init__(self, hidden_size, intermediate_size, bias=False):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def randomize_norms(model: nn.Module, gen_seed: int):
    """Give norm weights/biases non-trivial values so that they are not identity ops.

    Called right after construction, under the model's seed; it perturbs gains around 1
    and biases around 0, which keeps the model's behaviour ordinary.
    """
    g = torch.Generator()
    g.manual_seed(gen_seed)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (nn.LayerNorm, RMSNorm)) or type(mod).__name__ in ("T5LayerNorm",):
                w = getattr(mod, "weight", None)
                if w is not None:
                    w.copy_(1.0 + 0.1 * torch.randn(w.shape, generator=g))
                b = getattr(mod, "bias", None)
                if b is not None:
                    b.copy_(0.1 * torch.randn(b.shape, generator=g))
