#!/usr/bin/python3
"""Regenerate the onnxpe test corpus: testmodels/models/<name>/ and testmodels/manifest.json.

Run from anywhere with Debian's python3-torch (1.13) and python3-onnx (1.12):

    /usr/bin/python3 testmodels/export/export.py            # every model
    /usr/bin/python3 testmodels/export/export.py rope_llama # only the named models (and their manifest entries)

The output is deterministic: every model is built under its own seed (crc32 of its name),
inputs come from seeded generators, and the files are written byte-for-byte the same on
every run with the same torch/onnx versions. ORT-optimized copies (ort_basic.onnx,
ort_extended.onnx) are written by ort_optimize.js, not by this script.
"""

import copy
import hashlib
import json
import os
import shutil
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import alibi  # noqa: E402
import common  # noqa: E402
import family  # noqa: E402
import learned  # noqa: E402
import nope  # noqa: E402
import relative  # noqa: E402
import rope  # noqa: E402
import sinusoidal  # noqa: E402

ROOT = os.path.dirname(HERE)  # testmodels/
MODELS_DIR = os.path.join(ROOT, "models")
MANIFEST = os.path.join(ROOT, "manifest.json")

ALL_SPECS = sinusoidal.SPECS + learned.SPECS + rope.SPECS + alibi.SPECS + relative.SPECS + nope.SPECS + family.SPECS

ELEM_NAMES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.DOUBLE: "float64",
}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---------------------------------------------------------------------------
# float16: torch 1.13 has no CPU kernels for Half matmul/softmax/cos/..., so tracing
# model.half() on CPU fails ("addmm_impl_cpu_" not implemented for 'Half'). It does have
# bfloat16 kernels. A float16 model is therefore traced as model.bfloat16(), which gives
# the graph model.half() would give (the same Casts from .float() / .to(dtype) in the
# module code), and then every bfloat16 type in the graph is relabelled float16 and
# every bfloat16 value converted to float16 (clamped to +-65504, so torch.finfo(bf16).min
# becomes torch.finfo(fp16).min, which is what model.half() would have stored).


def _bf16_to_fp16_tensor(t):
    if t.data_type != onnx.TensorProto.BFLOAT16:
        return
    if t.raw_data:
        u16 = np.frombuffer(t.raw_data, dtype=np.uint16)
    else:
        u16 = np.array(t.int32_data, dtype=np.uint16)
    f32 = (u16.astype(np.uint32) << 16).view(np.float32)
    f16 = np.clip(f32, -65504.0, 65504.0).astype(np.float16)
    t.data_type = onnx.TensorProto.FLOAT16
    t.ClearField("int32_data")
    t.raw_data = f16.tobytes()


def _relabel_type(tp):
    if tp.HasField("tensor_type") and tp.tensor_type.elem_type == onnx.TensorProto.BFLOAT16:
        tp.tensor_type.elem_type = onnx.TensorProto.FLOAT16


def bf16_graph_to_fp16(model):
    g = model.graph
    for t in g.initializer:
        _bf16_to_fp16_tensor(t)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        _relabel_type(vi.type)
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                _bf16_to_fp16_tensor(a.t)
            elif node.op_type == "Cast" and a.name == "to" and a.i == onnx.TensorProto.BFLOAT16:
                a.i = onnx.TensorProto.FLOAT16
    for node in g.node:
        if any(a.type == onnx.AttributeProto.GRAPH for a in node.attribute):
            raise RuntimeError("subgraphs not handled by bf16_graph_to_fp16")


# ---------------------------------------------------------------------------


def to_numpy_output(t, dtype):
    t = t.detach()
    if dtype == "float16":
        return t.to(torch.float32).numpy().astype(np.float16)
    return t.numpy()


def export_one(spec):
    seed = common.seed_for(spec.name)
    torch.manual_seed(seed)
    model = spec.build()
    common.randomize_norms(model, seed + 1)
    model.eval()
    if spec.dtype == "float16":
        # The float32 reference runs on exactly the values the float16 graph holds: parameters
        # are rounded through bfloat16 (the trace dtype) and float16; float buffers (e.g. RoPE
        # inv_freq) are rounded to float16 and kept float32 in the trace, which is what
        # model.half() + constant folding of their .float() casts would store.
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).float().clamp(-65504, 65504).half().float())
            for b in model.buffers():
                if b.dtype == torch.float32:
                    b.copy_(b.half().float())
    inputs = spec.inputs()
    names = [i.name for i in inputs]
    dynamic_axes = {i.name: i.axes for i in inputs}
    dynamic_axes.update(spec.output_axes)

    out_dir = os.path.join(MODELS_DIR, spec.name)
    if os.path.isdir(out_dir):
        for f in os.listdir(out_dir):  # keep ort_*.onnx, written by ort_optimize.js
            if f == "model.onnx" or f == "test_data_set_0":
                p = os.path.join(out_dir, f)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    os.makedirs(os.path.join(out_dir, "test_data_set_0"), exist_ok=True)
    path = os.path.join(out_dir, "model.onnx")

    trace_model = model
    if spec.dtype == "float16":
        trace_model = copy.deepcopy(model).to(torch.bfloat16)
        for mod_t, mod_r in zip(trace_model.modules(), model.modules()):
            for bname, b in mod_r._buffers.items():
                if b is not None and b.dtype == torch.float32:
                    mod_t._buffers[bname] = b.clone()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings are expected and reviewed per model
        torch.onnx.export(
            trace_model,
            tuple(i.trace for i in inputs),
            path,
            input_names=names,
            output_names=spec.outputs,
            dynamic_axes=dynamic_axes,
            opset_version=spec.opset,
            do_constant_folding=spec.constant_folding,
        )
    m = onnx.load(path)
    if spec.dtype == "float16":
        bf16_graph_to_fp16(m)
        onnx.save(m, path)
    onnx.checker.check_model(m)
    graph_inputs = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    if graph_inputs != names:
        raise RuntimeError(f"{spec.name}: graph inputs {graph_inputs} != {names} (an input was unused?)")
    graph_outputs = [o.name for o in m.graph.output]
    if graph_outputs != spec.outputs:
        raise RuntimeError(f"{spec.name}: graph outputs {graph_outputs} != {spec.outputs}")

    with torch.no_grad():
        outs = model(*[i.test for i in inputs])
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    outs = list(outs)
    if len(outs) != len(spec.outputs):
        raise RuntimeError(f"{spec.name}: {len(outs)} outputs, expected {len(spec.outputs)}")
    td = os.path.join(out_dir, "test_data_set_0")
    for k, inp in enumerate(inputs):
        t = numpy_helper.from_array(inp.test.numpy(), inp.name)
        with open(os.path.join(td, f"input_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for k, (oname, o) in enumerate(zip(spec.outputs, outs)):
        arr = to_numpy_output(o, spec.dtype)
        if not np.all(np.isfinite(arr.astype(np.float64))):
            raise RuntimeError(f"{spec.name}: output {oname} is not finite")
        t = numpy_helper.from_array(arr, oname)
        with open(os.path.join(td, f"output_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    return m, inputs, outs


def shape_of(vi):
    dims = []
    for d in vi.type.tensor_type.shape.dim:
        dims.append(d.dim_param if d.dim_param else d.dim_value)
    return dims


def truth_of(findings):
    """schemes, layers and findings of a list of findings (the manifest's truth of an audit)."""
    layers = []
    for f in findings:
        for l in f["layers"]:
            layers.append({"index": l, "scheme": f["scheme"]})
    layers.sort(key=lambda e: (e["index"], e["scheme"]))
    return {
        "schemes": sorted({f["scheme"] for f in findings}),
        "layers": layers,
        "findings": [{"scheme": f["scheme"], "layers": list(f["layers"]), "params": f["params"]} for f in findings],
    }


def manifest_entry(spec, m, inputs):
    layers = []
    for f in spec.findings:
        for l in f["layers"]:
            layers.append({"index": l, "scheme": f["scheme"]})
    layers.sort(key=lambda e: (e["index"], e["scheme"]))
    covered = sorted({e["index"] for e in layers})
    if covered != list(range(spec.num_layers)):
        raise RuntimeError(f"{spec.name}: findings cover layers {covered}, model has {spec.num_layers}")
    by_name = {vi.name: vi for vi in m.graph.input}
    ins = []
    for i in inputs:
        vi = by_name[i.name]
        e = {"name": i.name, "role": i.role, "dtype": ELEM_NAMES[vi.type.tensor_type.elem_type], "shape": shape_of(vi)}
        e.update(i.meaning)
        ins.append(e)
    outs = [
        {"name": o.name, "dtype": ELEM_NAMES[o.type.tensor_type.elem_type], "shape": shape_of(o)} for o in m.graph.output
    ]
    entry = {
        "name": spec.name,
        "path": f"models/{spec.name}/model.onnx",
        "test_data": f"models/{spec.name}/test_data_set_0",
        "opset": spec.opset,
        "dtype": spec.dtype,
        "reference": spec.reference,
        "variant": spec.variant,
        "num_layers": spec.num_layers,
        "inputs": ins,
        "outputs": outs,
        "schemes": sorted({f["scheme"] for f in spec.findings}),
        "layers": layers,
        "findings": [{"scheme": f["scheme"], "layers": list(f["layers"]), "params": f["params"]} for f in spec.findings],
        "sha256": sha256(os.path.join(MODELS_DIR, spec.name, "model.onnx")),
    }
    if spec.notes:
        entry["notes"] = spec.notes
    if not spec.constant_folding:
        entry["do_constant_folding"] = False
    if spec.ort_findings is not None:
        entry["ort_truth"] = truth_of(spec.ort_findings)
    return entry


def main(argv):
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    only = set(argv[1:])
    unknown = only - {s.name for s in ALL_SPECS}
    if unknown:
        print("unknown models:", sorted(unknown), file=sys.stderr)
        return 2
    names = [s.name for s in ALL_SPECS]
    if len(set(names)) != len(names):
        raise RuntimeError("duplicate model names")
    entries = []
    for spec in ALL_SPECS:
        if only and spec.name not in only:
            continue
        m, inputs, _ = export_one(spec)
        entries.append(manifest_entry(spec, m, inputs))
        size = os.path.getsize(os.path.join(MODELS_DIR, spec.name, "model.onnx"))
        print(f"{spec.name:34s} opset {spec.opset} {spec.dtype:8s} {size / 1024:8.1f} KiB  {','.join(entries[-1]['schemes'])}")
    if only:
        # Only the named models were exported: their entries replace (or join,
        # in ALL_SPECS order) those of the manifest; the others stay as they are.
        with open(MANIFEST) as f:
            manifest = json.load(f)
        by_name = {e["name"]: e for e in manifest["models"]}
        by_name.update({e["name"]: e for e in entries})
        manifest["models"] = [by_name[n] for n in names if n in by_name]
        with open(MANIFEST, "w") as f:
            json.dump(manifest, f, indent=2, sort_keys=False, ensure_ascii=True)
            f.write("\n")
    if not only:
        stale = sorted(set(os.listdir(MODELS_DIR)) - set(names)) if os.path.isdir(MODELS_DIR) else []
        for s in stale:
            print("removing stale", s)
            shutil.rmtree(os.path.join(MODELS_DIR, s))
        manifest = {
            "about": "onnxpe test corpus; ground truth in DESIGN.md's audit vocabulary. Generated by testmodels/export/export.py; do not edit.",
            "generator": {"torch": torch.__version__, "onnx": onnx.__version__, "do_constant_folding": True},
            "models": entries,
        }
        with open(MANIFEST, "w") as f:
            json.dump(manifest, f, indent=2, sort_keys=False, ensure_ascii=True)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
