// Helpers shared by ort_check.js and ort_optimize.js: loading onnxruntime-node, reading
// the manifest and decoding ONNX TensorProto files (test_data_set_0/*.pb).
'use strict';

const fs = require('fs');
const path = require('path');

const ROOT = path.resolve(__dirname, '..'); // testmodels/

function loadOrt() {
  const tried = [];
  const candidates = ['onnxruntime-node'];
  if (process.env.ORT_NODE) candidates.unshift(process.env.ORT_NODE);
  candidates.push(path.resolve(ROOT, '..', '.cache', 'ort', 'node_modules', 'onnxruntime-node')); // make ort
  for (const c of candidates) {
    try {
      return require(c);
    } catch (e) {
      tried.push(`${c}: ${e.message.split('\n')[0]}`);
    }
  }
  throw new Error('cannot load onnxruntime-node (set NODE_PATH or ORT_NODE):\n  ' + tried.join('\n  '));
}

function readManifest() {
  return JSON.parse(fs.readFileSync(path.join(ROOT, 'manifest.json'), 'utf8'));
}

// ---- minimal protobuf decoding of onnx.TensorProto -------------------------------------

function readVarint(buf, pos) {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    const b = buf[pos++];
    result |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) break;
    shift += 7n;
  }
  return [result, pos];
}

const DTYPES = {
  1: { name: 'float32', size: 4 },
  6: { name: 'int32', size: 4 },
  7: { name: 'int64', size: 8 },
  9: { name: 'bool', size: 1 },
  10: { name: 'float16', size: 2 },
  11: { name: 'float64', size: 8 },
};

// Returns {name, dtype, dims: number[], data: typed array}. Only raw_data tensors
// (what onnx.numpy_helper.from_array writes) are supported.
function decodeTensorProto(buf) {
  let pos = 0;
  const dims = [];
  let dataType = 0;
  let name = '';
  let raw = null;
  while (pos < buf.length) {
    let key;
    [key, pos] = readVarint(buf, pos);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      let v;
      [v, pos] = readVarint(buf, pos);
      if (field === 1) dims.push(Number(v));
      else if (field === 2) dataType = Number(v);
    } else if (wire === 2) {
      let len;
      [len, pos] = readVarint(buf, pos);
      len = Number(len);
      const bytes = buf.subarray(pos, pos + len);
      pos += len;
      if (field === 1) {
        // packed dims
        let p = 0;
        while (p < bytes.length) {
          let v;
          [v, p] = readVarint(bytes, p);
          dims.push(Number(v));
        }
      } else if (field === 8) name = bytes.toString('utf8');
      else if (field === 9) raw = Buffer.from(bytes); // copy: aligned
    } else if (wire === 5) pos += 4;
    else if (wire === 1) pos += 8;
    else throw new Error(`unsupported wire type ${wire}`);
  }
  const dt = DTYPES[dataType];
  if (!dt) throw new Error(`unsupported data_type ${dataType} in tensor ${name}`);
  if (raw === null) throw new Error(`tensor ${name} has no raw_data`);
  const ab = raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength);
  let data;
  switch (dt.name) {
    case 'float32': data = new Float32Array(ab); break;
    case 'int32': data = new Int32Array(ab); break;
    case 'int64': data = new BigInt64Array(ab); break;
    case 'bool': data = new Uint8Array(ab); break;
    case 'float16': data = new Uint16Array(ab); break;
    case 'float64': data = new Float64Array(ab); break;
  }
  return { name, dtype: dt.name, dims, data };
}

function halfToFloat(h) {
  const s = (h & 0x8000) ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * f * Math.pow(2, -24);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * Math.pow(2, e - 15);
}

function toFloatArray(t) {
  // t: {dtype|type, data}
  const type = t.dtype || t.type;
  if (type === 'float16') {
    const out = new Float64Array(t.data.length);
    for (let i = 0; i < t.data.length; i++) out[i] = halfToFloat(t.data[i]);
    return out;
  }
  if (type === 'int64') return Float64Array.from(t.data, (v) => Number(v));
  return Float64Array.from(t.data);
}

function loadTestData(dir) {
  const inputs = [];
  const outputs = [];
  for (let k = 0; fs.existsSync(path.join(dir, `input_${k}.pb`)); k++) {
    inputs.push(decodeTensorProto(fs.readFileSync(path.join(dir, `input_${k}.pb`))));
  }
  for (let k = 0; fs.existsSync(path.join(dir, `output_${k}.pb`)); k++) {
    outputs.push(decodeTensorProto(fs.readFileSync(path.join(dir, `output_${k}.pb`))));
  }
  return { inputs, outputs };
}

module.exports = { ROOT, loadOrt, readManifest, decodeTensorProto, toFloatArray, loadTestData };
