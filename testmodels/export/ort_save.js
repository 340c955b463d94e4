// Save ONNX Runtime's optimized version of every model of a test set at the given levels:
// OUT/<name>/ort_<level>.onnx for each SRC/<name>/model.onnx, and OUT/ort_saves.json recording,
// per model and level, the saved file's size and SHA-256 (and same_as naming a lower level whose
// save is the same bytes: the file is then not kept twice) or the error ONNX Runtime gave (a model
// it cannot load: custom ops, absent external weights, a newer opset). The metamorphic test of
// passes/audit (TestAuditIsInvariant) audits every save and reads ort_saves.json for the rest.
//
//   NODE_PATH=.cache/ort/node_modules node testmodels/export/ort_save.js [--levels basic,extended,all] SRC OUT
//
// made passes/testdata/ortsaves: realmodels/ and hfmodels/ (the models of passes/testdata/realmodels
// and passes/testdata/hfmodels, all three levels) and corpus/ (testmodels/models at --levels all;
// the corpus's ort_basic and ort_extended beside its models come from ort_optimize.js). A save is
// looked for in OUT/<name>, then SRC/<name>, when deciding whether it equals a lower level's. One thread, sequential execution, as ort_optimize.js: the saved
// graphs depend only on the model and the ORT version. 'all' adds layout transformations for
// this CPU (ONNX Runtime warns that such a save may only run where it was made); the audit
// reads it like any other model.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { loadOrt } = require('./ort_lib');

const LEVELS = ['basic', 'extended', 'all'];

async function main() {
  const ort = loadOrt();
  let args = process.argv.slice(2);
  let levels = ['basic', 'extended', 'all'];
  if (args[0] === '--levels') {
    levels = args[1].split(',');
    args = args.slice(2);
  }
  if (args.length !== 2) throw new Error('usage: ort_save.js [--levels basic,extended,all] SRC OUT');
  const [srcDir, dir] = args;
  const version = require(path.join(path.dirname(require.resolve('onnxruntime-node')), '..', 'package.json')).version;
  {
    const record = path.join(dir, 'ort_saves.json');
    const saves = fs.existsSync(record) ? JSON.parse(fs.readFileSync(record, 'utf8')) : { onnxruntime_node: version, models: {} };
    saves.onnxruntime_node = version;
    const names = fs.readdirSync(srcDir).filter((n) => fs.existsSync(path.join(srcDir, n, 'model.onnx'))).sort();
    for (const name of names) {
      const src = path.join(srcDir, name, 'model.onnx');
      fs.mkdirSync(path.join(dir, name), { recursive: true });
      saves.models[name] = saves.models[name] || {};
      for (const level of levels) {
        const out = path.join(dir, name, `ort_${level}.onnx`);
        const tmp = out + '.tmp';
        try {
          const session = await ort.InferenceSession.create(src, {
            graphOptimizationLevel: level,
            optimizedModelFilePath: tmp,
            intraOpNumThreads: 1,
            interOpNumThreads: 1,
            executionMode: 'sequential',
          });
          if (typeof session.release === 'function') await session.release();
          const data = fs.readFileSync(tmp);
          const rec = { bytes: data.length, sha256: crypto.createHash('sha256').update(data).digest('hex') };
          // A save equal byte for byte to a lower level's is recorded, not kept twice.
          const lower = (l) => [path.join(dir, name, `ort_${l}.onnx`), path.join(srcDir, name, `ort_${l}.onnx`)].find((f) => fs.existsSync(f));
          const same = ['basic', 'extended'].find((l) => LEVELS.indexOf(l) < LEVELS.indexOf(level) && lower(l) &&
            data.equals(fs.readFileSync(lower(l))));
          if (same) {
            rec.same_as = same;
            fs.rmSync(tmp);
            fs.rmSync(out, { force: true });
          } else {
            fs.renameSync(tmp, out);
          }
          saves.models[name][level] = rec;
          console.log(`${name.padEnd(48)} ${level.padEnd(8)} ${(data.length / 1024).toFixed(1).padStart(8)} KiB${same ? ' (the same as ' + same + ': not kept)' : ''}`);
        } catch (e) {
          fs.rmSync(tmp, { force: true });
          fs.rmSync(out, { force: true });
          const msg = String(e.message || e).split('\n')[0].split(srcDir).join('SRC');
          saves.models[name][level] = { error: msg };
          console.log(`${name.padEnd(48)} ${level.padEnd(8)} not saved: ${msg}`);
        }
      }
    }
    for (const name of names) {
      if (fs.readdirSync(path.join(dir, name)).length === 0) fs.rmdirSync(path.join(dir, name));
    }
    fs.writeFileSync(record, JSON.stringify(saves, null, 1) + '\n');
  }
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
