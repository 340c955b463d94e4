// Save ONNX Runtime's optimized version of every corpus model at the 'basic' and
// 'extended' levels: testmodels/models/<name>/ort_basic.onnx and ort_extended.onnx.
// These contain ORT's fused com.microsoft ops and are used to test the Go executor.
//
//   NODE_PATH=/tmp/ortnpm/node_modules node testmodels/export/ort_optimize.js [name ...]
//
// One thread, sequential execution: the saved graphs depend only on the model and the ORT
// version (run twice and compare sha256 to check; see testmodels/README.md).
'use strict';

const fs = require('fs');
const path = require('path');
const { ROOT, loadOrt, readManifest } = require('./ort_lib');

async function main() {
  const ort = loadOrt();
  const manifest = readManifest();
  const only = new Set(process.argv.slice(2));
  for (const m of manifest.models) {
    if (only.size && !only.has(m.name)) continue;
    const dir = path.join(ROOT, 'models', m.name);
    const src = path.join(dir, 'model.onnx');
    for (const level of ['basic', 'extended']) {
      const out = path.join(dir, `ort_${level}.onnx`);
      const tmp = out + '.tmp';
      const session = await ort.InferenceSession.create(src, {
        graphOptimizationLevel: level,
        optimizedModelFilePath: tmp,
        intraOpNumThreads: 1,
        interOpNumThreads: 1,
        executionMode: 'sequential',
      });
      if (typeof session.release === 'function') await session.release();
      fs.renameSync(tmp, out);
      console.log(`${m.name.padEnd(34)} ${level.padEnd(8)} ${(fs.statSync(out).size / 1024).toFixed(1).padStart(8)} KiB`);
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
