// Run every corpus model in ONNX Runtime and compare with the stored PyTorch reference
// outputs (test_data_set_0). Usage, from the repo root:
//
//   NODE_PATH=/tmp/ortnpm/node_modules node testmodels/export/ort_check.js [name ...]
//
// Each model is run as exported (model.onnx) with ORT graph optimizations disabled and at
// ORT's default level ('all'), and the ORT-optimized copies (ort_basic.onnx,
// ort_extended.onnx, written by ort_optimize.js) with optimizations disabled.
// Exit code 0 when every run is within tolerance, 1 otherwise.
'use strict';

const fs = require('fs');
const path = require('path');
const { ROOT, loadOrt, readManifest, toFloatArray, loadTestData } = require('./ort_lib');

// float32: ORT and PyTorch differ only by summation order and transcendental kernels.
const TOL_FP32 = 1e-5;
// float16: the reference is computed in float32 on the float16 weights and rounded to
// float16 at the end, while ORT computes every fp16 node in fp16 (rounding each
// intermediate to 11 significant bits, ~5e-4 relative per op), so the reference and ORT
// differ by accumulated fp16 rounding; outputs are O(1..10) logits.
const TOL_FP16 = 1e-2;

async function runOne(ort, file, level, td) {
  const session = await ort.InferenceSession.create(file, {
    graphOptimizationLevel: level,
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  if (session.inputNames.length !== td.inputs.length) {
    throw new Error(`${session.inputNames.length} graph inputs, ${td.inputs.length} test inputs`);
  }
  const feeds = {};
  session.inputNames.forEach((n, k) => {
    const t = td.inputs[k];
    if (t.name && t.name !== n) throw new Error(`input ${k} is ${t.name}, graph says ${n}`);
    feeds[n] = new ort.Tensor(t.dtype === 'float32' ? 'float32' : t.dtype, t.data, t.dims);
  });
  const results = await session.run(feeds);
  let maxErr = 0;
  session.outputNames.forEach((n, k) => {
    const want = td.outputs[k];
    const got = results[n];
    if (got.dims.join(',') !== want.dims.join(',')) {
      throw new Error(`output ${n}: shape [${got.dims}] want [${want.dims}]`);
    }
    const g = toFloatArray(got);
    const w = toFloatArray(want);
    for (let i = 0; i < w.length; i++) {
      const d = Math.abs(g[i] - w[i]);
      if (!(d <= maxErr)) maxErr = Number.isNaN(d) ? Infinity : Math.max(maxErr, d);
    }
  });
  if (typeof session.release === 'function') await session.release();
  return maxErr;
}

async function main() {
  const ort = loadOrt();
  const manifest = readManifest();
  const only = new Set(process.argv.slice(2));
  const rows = [];
  let failed = 0;
  let passed = 0;
  for (const m of manifest.models) {
    if (only.size && !only.has(m.name)) continue;
    const dir = path.join(ROOT, 'models', m.name);
    const td = loadTestData(path.join(ROOT, m.test_data));
    const tol = m.dtype === 'float16' ? TOL_FP16 : TOL_FP32;
    const runs = [
      ['model.onnx', 'disabled'],
      ['model.onnx', 'all'],
      ['ort_basic.onnx', 'disabled'],
      ['ort_extended.onnx', 'disabled'],
    ];
    const cells = [];
    let ok = true;
    for (const [file, level] of runs) {
      const p = path.join(dir, file);
      if (!fs.existsSync(p)) {
        cells.push('missing');
        if (file !== 'model.onnx') { ok = false; }
        continue;
      }
      try {
        const err = await runOne(ort, p, level, td);
        cells.push(err.toExponential(2));
        if (!(err <= tol)) ok = false;
      } catch (e) {
        cells.push('ERROR');
        ok = false;
        console.error(`${m.name} ${file} (${level}): ${e.message}`);
      }
    }
    if (ok) passed++; else failed++;
    rows.push([m.name, m.opset, m.dtype, tol.toExponential(0), ...cells, ok ? 'ok' : 'FAIL']);
  }
  const header = ['model', 'opset', 'dtype', 'tol', 'exported', 'exported@all', 'ort_basic', 'ort_extended', 'status'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (r) => r.map((c, i) => String(c).padEnd(widths[i])).join('  ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
  console.log(`\nmax abs error vs PyTorch reference; ${passed} passed, ${failed} failed`);
  process.exitCode = failed ? 1 : 0;
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
