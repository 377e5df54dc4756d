// tests/e2e/node/sdk_checks.js: what the gRPC SDK tests share (grpc_e2e.js against one server,
// cluster_grpc.js against a cluster's proxy): deterministic vectors, brute-force top-k over the
// rows a test's model holds, and the checks of the SDK's answers (a Status that is Success, an
// error with its code and reason, hits against the brute-force answer).
'use strict';

const assert = require('node:assert/strict');

// Row i's vector of dim dimensions: exactly representable as float32, so client and server agree.
function vec(i, dim) {
  const v = [];
  for (let j = 0; j < dim; j++) v.push(Math.fround(Math.sin(i * 0.37 + j * 1.1) * (1 + (i % 7) * 0.1)));
  return v;
}

function l2(a, b) {
  let s = 0;
  for (let j = 0; j < a.length; j++) {
    const d = a[j] - b[j];
    s += d * d;
  }
  return s;
}

// The exact top-k of q over rows (an iterable of {id, vector, ...}) that pred keeps, by L2
// distance then id, from offset on.
function topK(rows, q, k, pred = () => true, offset = 0) {
  const all = [];
  for (const r of rows) if (pred(r)) all.push({ id: r.id, distance: l2(q, r.vector) });
  all.sort((x, y) => x.distance - y.distance || x.id - y.id);
  return all.slice(offset, offset + k);
}

// st (an answer or its status) is Success; returns st.
function ok(step, st) {
  const s = st && st.status ? st.status : st;
  assert.ok(s && typeof s === 'object', `${step}: no status`);
  assert.equal(s.error_code, 'Success', `${step}: ${s.error_code} ${s.code}: ${s.reason}`);
  return st;
}

// st is an error (with code, when given) and a reason; returns its status.
function failed(step, st, code) {
  const s = st && st.status ? st.status : st;
  assert.ok(s && s.error_code !== 'Success', `${step}: expected an error, got ${JSON.stringify(s)}`);
  if (code !== undefined) assert.equal(s.code, code, `${step}: code ${s.code} (${s.reason})`);
  assert.ok(s.reason && s.reason.length > 0, `${step}: error without a reason`);
  return s;
}

// hits are expect's ids in order, scores within 1e-4 of its distances.
function checkHits(hits, expect, what) {
  assert.ok(Array.isArray(hits), `${what}: hits is not an array`);
  assert.equal(hits.length, expect.length, `${what}: ${hits.length} hits, want ${expect.length}`);
  for (let h = 0; h < hits.length; h++) {
    assert.equal(String(hits[h].id), String(expect[h].id), `${what}: hit ${h} id`);
    assert.ok(Math.abs(hits[h].score - expect[h].distance) <= 1e-4,
      `${what}: hit ${h} score ${hits[h].score} vs ${expect[h].distance}`);
  }
}

module.exports = { vec, l2, topK, ok, failed, checkHits };
