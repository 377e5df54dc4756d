// cluster_grpc.js: the Milvus Node SDK's gRPC MilvusClient against the cluster proxy at
// $MILVUS_ADDR (run_cluster_grpc.sh starts `sextant cluster up`). Every answer is checked against
// a model kept here: search ids and distances against brute force over the rows the model holds,
// counts, query and get rows, describe and list answers. Covers a collection sharded over the
// writers (shards_num 3), an unsharded one, autoID keys over shards, Eventually reads served by
// the query node, errors, and drop. Prints "N passed, M failed"; exits non-zero on failure.
'use strict';

const assert = require('node:assert/strict');
const { MilvusClient, DataType } = require('@zilliz/milvus2-sdk-node');
const shared = require('./sdk_checks');

const { topK, ok, failed, checkHits } = shared;

const ADDR = process.env.MILVUS_ADDR;
const client = new MilvusClient({ address: ADDR, timeout: 30000 });
const DIM = 8;
const COLORS = ['red', 'green', 'blue'];

const vec = (i) => shared.vec(i, DIM);
function row(i) {
  return { id: i, vector: vec(i), color: COLORS[i % 3], n: i % 10 };
}
const brute = (model, q, k, pred, offset) => topK(model.values(), q, k, pred, offset);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let passed = 0;
let nfailed = 0;
async function step(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    nfailed++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

const SH = 'g_sharded';
const ONE = 'g_one';
const AUTO = 'g_auto';
const fields = (autoID) => [
  { name: 'id', data_type: DataType.Int64, is_primary_key: true, autoID },
  { name: 'vector', data_type: DataType.FloatVector, dim: DIM },
  { name: 'color', data_type: DataType.VarChar, max_length: 16 },
  { name: 'n', data_type: DataType.Int64 },
];
const model = { [SH]: new Map(), [ONE]: new Map() };

async function makeColl(name, shards, autoID = false) {
  ok(`create ${name}`, await client.createCollection({ collection_name: name, shards_num: shards, fields: fields(autoID) }));
  ok(`index ${name}`, await client.createIndex({ collection_name: name, field_name: 'vector', index_type: 'FLAT', metric_type: 'L2' }));
  ok(`load ${name}`, await client.loadCollectionSync({ collection_name: name }));
}

async function main() {
  for (const c of [SH, ONE, AUTO]) await client.dropCollection({ collection_name: c });

  await step('create a collection with shards_num 3 and one with 1', async () => {
    await makeColl(SH, 3);
    await makeColl(ONE, 1);
  });

  await step('describe, has, list: the sharded collection as one', async () => {
    const d = ok('describe', await client.describeCollection({ collection_name: SH }));
    assert.equal(d.schema.name, SH);
    assert.equal(Number(d.shards_num), 3);
    assert.deepEqual(d.schema.fields.map((f) => f.name), ['id', 'vector', 'color', 'n']);
    const vf = d.schema.fields.find((f) => f.name === 'vector');
    assert.equal(String(vf.type_params.find((p) => p.key === 'dim').value), String(DIM));
    const h = ok('has', await client.hasCollection({ collection_name: SH }));
    assert.equal(h.value, true);
    const h2 = ok('has missing', await client.hasCollection({ collection_name: 'g_nope' }));
    assert.equal(h2.value, false);
    const ls = ok('show', await client.showCollections());
    const names = ls.data.map((x) => x.name);
    assert.ok(names.includes(SH) && names.includes(ONE), `list: ${names}`);
    assert.ok(!names.some((x) => /__s\d+$/.test(x)), `list shows shards: ${names}`);
  });

  await step('insert 300 rows into each (rows split over the shards by key)', async () => {
    for (const c of [SH, ONE]) {
      const rows = [];
      for (let i = 0; i < 300; i++) rows.push(row(i));
      for (let b = 0; b < 300; b += 100) {
        const r = ok(`insert ${c}`, await client.insert({ collection_name: c, data: rows.slice(b, b + 100) }));
        assert.equal(Number(r.insert_cnt), 100);
        const ids = r.IDs.int_id.data.map(Number);
        assert.deepEqual(ids, rows.slice(b, b + 100).map((x) => x.id), `${c}: insert ids in request order`);
      }
      for (const r of rows) model[c].set(r.id, r);
    }
    const st = ok('stats', await client.getCollectionStatistics({ collection_name: SH }));
    assert.equal(Number(st.data.row_count), 300);
  });

  await step('count(*) through the proxy', async () => {
    for (const c of [SH, ONE]) {
      const r = ok('count', await client.query({ collection_name: c, filter: '', output_fields: ['count(*)'], consistency_level: 'Strong' }));
      assert.equal(Number(r.data[0]['count(*)']), 300, `${c}`);
    }
  });

  await step('search (nq 3, offset, filter) equals brute force', async () => {
    const qs = [vec(1000), vec(7), vec(123.5)];
    for (const c of [SH, ONE]) {
      const r = ok('search', await client.search({ collection_name: c, data: qs, limit: 6, consistency_level: 'Strong' }));
      for (let i = 0; i < qs.length; i++) checkHits(r.results[i], brute(model[c], qs[i], 6), `${c} q${i}`);
      const r2 = ok('search offset', await client.search({ collection_name: c, data: qs[0], limit: 4, offset: 3, consistency_level: 'Strong' }));
      checkHits(r2.results, brute(model[c], qs[0], 4, () => true, 3), `${c} offset`);
      const r3 = ok('search filter', await client.search({
        collection_name: c, data: qs[1], limit: 5, filter: 'color == "red" and n < 6', output_fields: ['color', 'n'], consistency_level: 'Strong',
      }));
      checkHits(r3.results, brute(model[c], qs[1], 5, (x) => x.color === 'red' && x.n < 6), `${c} filter`);
      for (const h of r3.results) {
        assert.equal(h.color, 'red');
        assert.ok(Number(h.n) < 6);
      }
    }
  });

  await step('query by filter and get by ids', async () => {
    const q = ok('query', await client.query({ collection_name: SH, filter: 'id in [5, 150, 299, 1000]', output_fields: ['id', 'color', 'n'], consistency_level: 'Strong' }));
    const got = q.data.map((x) => Number(x.id)).sort((a, b) => a - b);
    assert.deepEqual(got, [5, 150, 299]);
    for (const x of q.data) {
      assert.equal(x.color, COLORS[Number(x.id) % 3]);
      assert.equal(Number(x.n), Number(x.id) % 10);
    }
    const g = ok('get', await client.get({ collection_name: SH, ids: [7, 8, 9], output_fields: ['color', 'vector'] }));
    assert.equal(g.data.length, 3);
    for (const x of g.data) {
      assert.equal(x.color, COLORS[Number(x.id) % 3]);
      const want = vec(Number(x.id));
      for (let j = 0; j < DIM; j++) assert.ok(Math.abs(x.vector[j] - want[j]) < 1e-6);
    }
  });

  await step('delete by filter and by ids, upsert', async () => {
    ok('delete filter', await client.delete({ collection_name: SH, filter: 'id < 20' }));
    ok('delete ids', await client.delete({ collection_name: SH, ids: [100, 101] }));
    for (let i = 0; i < 20; i++) model[SH].delete(i);
    model[SH].delete(100);
    model[SH].delete(101);
    const up = { id: 50, vector: vec(5000), color: 'green', n: 9 };
    ok('upsert', await client.upsert({ collection_name: SH, data: [up] }));
    model[SH].set(50, up);
    const r = ok('count', await client.query({ collection_name: SH, filter: '', output_fields: ['count(*)'], consistency_level: 'Strong' }));
    assert.equal(Number(r.data[0]['count(*)']), model[SH].size);
    const s = ok('search upserted', await client.search({ collection_name: SH, data: vec(5000), limit: 3, consistency_level: 'Strong' }));
    checkHits(s.results, brute(model[SH], vec(5000), 3), 'after upsert');
    assert.equal(String(s.results[0].id), '50');
  });

  await step('Eventually reads after a flush are served by the query node and equal Strong', async () => {
    ok('flush', await client.flushSync({ collection_names: [SH] }));
    const want = model[SH].size;
    let n = -1;
    for (let t = 0; t < 100 && n !== want; t++) {
      const r = await client.query({ collection_name: SH, filter: '', output_fields: ['count(*)'], consistency_level: 'Eventually' });
      if (r.status.error_code === 'Success') n = Number(r.data[0]['count(*)']);
      if (n !== want) await sleep(200);
    }
    assert.equal(n, want, 'Eventually count never reached the flushed rows');
    const q = vec(77);
    let r;
    for (let t = 0; t < 50; t++) { // each shard may reach the query node at its own time
      r = await client.search({ collection_name: SH, data: q, limit: 5, consistency_level: 'Eventually' });
      if (r.status.error_code === 'Success') break;
      await sleep(200);
    }
    ok('eventually search', r);
    checkHits(r.results, brute(model[SH], q, 5), 'eventually');
  });

  await step('autoID over 2 shards: unique keys, rows found by them', async () => {
    await makeColl(AUTO, 2, true);
    const rows = [];
    for (let i = 0; i < 200; i++) rows.push({ vector: vec(i), color: COLORS[i % 3], n: i % 10 });
    const r = ok('insert auto', await client.insert({ collection_name: AUTO, data: rows }));
    const ids = r.IDs.int_id.data.map(String);
    assert.equal(ids.length, 200);
    assert.equal(new Set(ids).size, 200, 'autoID keys repeat');
    const g = ok('get auto', await client.get({ collection_name: AUTO, ids: [ids[0], ids[199]], output_fields: ['n'] }));
    const byId = new Map(g.data.map((x) => [String(x.id), Number(x.n)]));
    assert.equal(byId.get(ids[0]), 0);
    assert.equal(byId.get(ids[199]), 199 % 10);
    const d = ok('describe auto', await client.describeCollection({ collection_name: AUTO }));
    assert.equal(d.schema.fields.find((f) => f.name === 'id').autoID, true);
  });

  await step('a database over the writers: collections in it on both, reads, drop refused then done', async () => {
    const DB = 'g_db';
    const dbs = ok('listDatabases', await client.listDatabases());
    assert.ok(!dbs.db_names.includes(DB), `${dbs.db_names}`);
    ok('createDatabase', await client.createDatabase({ db_name: DB }));
    failed('createDatabase again', await client.createDatabase({ db_name: DB }));
    assert.ok(ok('list', await client.listDatabases()).db_names.includes(DB));
    const c2 = new MilvusClient({ address: ADDR, timeout: 30000, database: DB });
    // four unsharded collections (placed by name hash: both writers get some) and a sharded one
    const names = ['d_a', 'd_b', 'd_c', 'd_d', 'd_sh'];
    for (const nm of names) {
      ok(`create ${nm}`, await c2.createCollection({ collection_name: nm, shards_num: nm === 'd_sh' ? 2 : 1, fields: fields(false) }));
      ok(`index ${nm}`, await c2.createIndex({ collection_name: nm, field_name: 'vector', index_type: 'FLAT', metric_type: 'L2' }));
      ok(`load ${nm}`, await c2.loadCollectionSync({ collection_name: nm }));
      const rows = [];
      for (let i = 0; i < 40; i++) rows.push(row(i));
      ok(`insert ${nm}`, await c2.insert({ collection_name: nm, data: rows }));
      const m = new Map(rows.map((x) => [x.id, x]));
      const r = ok(`search ${nm}`, await c2.search({ collection_name: nm, data: vec(3.3), limit: 4, consistency_level: 'Strong' }));
      checkHits(r.results, brute(m, vec(3.3), 4), `${DB}.${nm}`);
      // Eventually: a query node without the database passes the read to the writer
      const e = ok(`eventually ${nm}`, await c2.query({ collection_name: nm, filter: '', output_fields: ['count(*)'], consistency_level: 'Eventually' }));
      assert.ok(Number(e.data[0]['count(*)']) <= 40);
    }
    const shown = ok('show in db', await c2.showCollections()).data.map((x) => x.name).sort();
    assert.deepEqual(shown, names);
    assert.equal((await client.hasCollection({ collection_name: 'd_a' })).value, false, 'the default database sees d_a');
    failed('drop a database with collections', await client.dropDatabase({ db_name: DB }));
    for (const nm of names) ok(`drop ${nm}`, await c2.dropCollection({ collection_name: nm }));
    ok('dropDatabase', await client.dropDatabase({ db_name: DB }));
    assert.ok(!ok('list', await client.listDatabases()).db_names.includes(DB));
    await c2.closeConnection();
  });

  await step('errors: unknown collection, wrong dimension; the proxy keeps serving', async () => {
    // (the SDK's search and query describe the collection first and fail on its absent schema)
    failed('describe missing', await client.describeCollection({ collection_name: 'g_nope' }), 100);
    failed('stats missing', await client.getCollectionStatistics({ collection_name: 'g_nope' }), 100);
    const bad = await client.insert({ collection_name: SH, data: [{ id: 9999, vector: [1, 2, 3], color: 'red', n: 1 }] });
    failed('wrong dim', bad);
    const r = ok('count', await client.query({ collection_name: SH, filter: '', output_fields: ['count(*)'], consistency_level: 'Strong' }));
    assert.equal(Number(r.data[0]['count(*)']), model[SH].size, 'a refused insert changed the rows');
  });

  await step('drop: gone from has and list, the name is free again', async () => {
    ok('drop', await client.dropCollection({ collection_name: SH }));
    const h = ok('has', await client.hasCollection({ collection_name: SH }));
    assert.equal(h.value, false);
    const ls = ok('show', await client.showCollections());
    assert.ok(!ls.data.map((x) => x.name).includes(SH));
    await makeColl(SH, 2);
    const d = ok('describe', await client.describeCollection({ collection_name: SH }));
    assert.equal(Number(d.shards_num), 2);
  });

  console.log(`${passed} passed, ${nfailed} failed`);
  client.closeConnection && client.closeConnection();
  process.exit(nfailed ? 1 : 0);
}

main().catch((e) => {
  console.log(`FAIL ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
