// grpc_kill9.js MODE ROUND ACKFILE: the kill -9 durability check over gRPC (reliability.md T1),
// driven by run_grpc_kill9.sh. MODE setup: create the collection. MODE load: insert batches of
// 50 rows (ids ROUND*1e6 + batch*50 + i) through the Node SDK's gRPC MilvusClient, and after
// every 4th batch delete the batch before it by filter; append each acknowledged operation to
// ACKFILE ("i B" / "d B", fsync'd; "D B" before a delete is sent) until the server dies. MODE verify: every acknowledged insert
// is there in full (unless its delete was acknowledged: then none of it), every batch is all or
// nothing (the one in flight at the kill included), and the server answers.
'use strict';

const fs = require('node:fs');
const assert = require('node:assert/strict');
const { MilvusClient, DataType } = require('@zilliz/milvus2-sdk-node');

const [mode, roundArg, ackFile] = process.argv.slice(2);
const ROUND = Number(roundArg || 0);
const COLL = 'kill9';
const B = 50;
const client = new MilvusClient({ address: process.env.MILVUS_ADDR, timeout: 10000 });
const base = (b) => ROUND * 1e6 + b * B;

async function setup() {
  const st = await client.createCollection({
    collection_name: COLL,
    fields: [
      { name: 'id', data_type: DataType.Int64, is_primary_key: true, autoID: false },
      { name: 'vector', data_type: DataType.FloatVector, dim: 4 },
    ],
  });
  assert.equal(st.error_code, 'Success', st.reason);
  assert.equal((await client.createIndex({ collection_name: COLL, field_name: 'vector', index_type: 'FLAT', metric_type: 'L2' })).error_code, 'Success');
  assert.equal((await client.loadCollectionSync({ collection_name: COLL })).error_code, 'Success');
}

function ack(line) {
  const fd = fs.openSync(ackFile, 'a');
  fs.writeSync(fd, `${line}\n`);
  fs.fsyncSync(fd);
  fs.closeSync(fd);
}

async function load() {
  for (let b = 0; ; b++) {
    const rows = [];
    for (let i = 0; i < B; i++) rows.push({ id: base(b) + i, vector: [b, i, ROUND, 1] });
    let r;
    try {
      r = await client.insert({ collection_name: COLL, data: rows });
    } catch (e) {
      return; // the server is gone
    }
    if (r.status.error_code !== 'Success') return;
    ack(`i ${b}`);
    if (b % 4 === 3) {
      ack(`D ${b - 1}`); // intent: a delete in flight at the kill may or may not be applied
      let d;
      try {
        d = await client.delete({ collection_name: COLL, filter: `id >= ${base(b - 1)} and id < ${base(b)}` });
      } catch (e) {
        return;
      }
      if (d.status.error_code !== 'Success') return;
      ack(`d ${b - 1}`);
    }
  }
}

async function count(lo, hi) {
  const r = await client.query({ collection_name: COLL, filter: `id >= ${lo} and id < ${hi}`, output_fields: ['count(*)'] });
  assert.equal(r.status.error_code, 'Success', r.status.reason);
  return Number(r.data[0]['count(*)']);
}

async function verify() {
  const lines = fs.existsSync(ackFile) ? fs.readFileSync(ackFile, 'utf8').trim().split('\n').filter(Boolean) : [];
  const ins = new Set();
  const del = new Set();
  const delTried = new Set();
  for (const l of lines) {
    const [k, b] = l.split(' ');
    (k === 'i' ? ins : k === 'd' ? del : delTried).add(Number(b));
  }
  const maxB = Math.max(-1, ...ins) + 2; // the batch in flight, and one more
  let present = 0;
  for (let b = 0; b <= maxB; b++) {
    const n = await count(base(b), base(b + 1));
    assert.ok(n === 0 || n === B, `round ${ROUND} batch ${b}: ${n} of ${B} rows (torn)`);
    if (ins.has(b) && !del.has(b) && !delTried.has(b))
      assert.equal(n, B, `round ${ROUND}: acknowledged batch ${b} lost`);
    if (del.has(b)) assert.equal(n, 0, `round ${ROUND}: acknowledged delete of batch ${b} undone`);
    present += n / B;
  }
  console.log(`round ${ROUND}: ${ins.size} inserts and ${del.size} deletes acknowledged, ${present} batches present`);
}

// The SDK's own background calls (Connect, telemetry) reject when the server is killed: in load
// mode that is the expected end, elsewhere a failure.
process.on('unhandledRejection', (e) => {
  if (mode === 'load') process.exit(0);
  console.error(`FAIL ${mode}: unhandled ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});

(async () => {
  if (mode === 'setup') await setup();
  else if (mode === 'load') await load();
  else await verify();
  await client.closeConnection().catch(() => {});
  process.exit(0);
})().catch((e) => {
  console.error(`FAIL ${mode}: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
