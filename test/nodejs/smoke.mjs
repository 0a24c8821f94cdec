// A second implementation of the Python SDK's transport, in JavaScript: nats.js
// (@nats-io/transport-node) for NATS, protobufjs loading the repository's .proto files
// at run time (no generated code), jsonwebtoken for the service tokens. It drives a
// running abi-engine through cases a, b, e and f of the Python client contract (the
// same cases test/sdkemu runs in Go) and exits 0 when every check held, 1 otherwise.
//
// Environment: ABI_NATS_URL (the broker), ABI_TEST_SECRET (the engine's HS256
// secret), ABI_PROTO_DIR (the repository's proto/ directory). The broker's max payload
// must be 64 KiB, so that case f's 192 KiB object is three times it.
import { connect, headers as natsHeaders } from "@nats-io/transport-node";
import protobuf from "protobufjs";
import jwt from "jsonwebtoken";
import { randomUUID } from "node:crypto";
import { readdirSync } from "node:fs";
import { join } from "node:path";

const url = process.env.ABI_NATS_URL;
const secret = process.env.ABI_TEST_SECRET;
const protoDir = process.env.ABI_PROTO_DIR;
if (!url || !secret || !protoDir) {
  console.error("ABI_NATS_URL, ABI_TEST_SECRET and ABI_PROTO_DIR are required");
  process.exit(2);
}

// --- the contracts, loaded from the .proto files as they are in the repository
const root = new protobuf.Root();
// Imports are relative to proto/ (abi/common/v1/common.proto); protobufjs has the
// well-known google/protobuf types built in.
root.resolvePath = (origin, target) => (target.startsWith("google/protobuf/") ? target : join(protoDir, target));
const files = [];
for (const pkg of ["common", "keyvalue", "object_storage", "transfer"]) {
  for (const f of readdirSync(join(protoDir, "abi", pkg, "v1"))) {
    if (f.endsWith(".proto")) files.push(`abi/${pkg}/v1/${f}`);
  }
}
root.loadSync(files, { keepCase: true });
const T = (name) => root.lookupType(name);
const kv = (op) => `abi.svc.keyvalue.v1.${op}`;
const objects = (op) => `abi.svc.object_storage.v1.${op}`;
const OBJECTS = "abi.svc.object_storage.v1.transfer";
const OVERFLOW = "abi.rpc.overflow";
const hex = (b) => Buffer.from(b).toString("hex");

class RPCError extends Error {
  constructor(code, message, response) {
    super(`${code}: ${message}`);
    this.code = code;
    this.response = response;
  }
}

// --- the transport: the Python SDK's rules (docs of test/sdkemu)
class Transport {
  constructor(nc, token, timeoutMs = 10000) {
    this.nc = nc;
    this.token = token;
    this.timeoutMs = timeoutMs;
  }

  headers(overflow) {
    if (!this.token || /[\r\n]/.test(this.token)) throw new Error("A nonempty service token without newlines is required");
    const h = natsHeaders();
    h.set("Nats-Auth-Token", this.token);
    if (overflow) h.set("Abi-Overflow", "1");
    return h;
  }

  // encode fills the context on a copy: trace_id when empty, timeout_ms always.
  encode(typeName, req) {
    const type = T(typeName);
    const context = { ...(req.context || {}) };
    if (!context.trace_id) context.trace_id = randomUUID();
    context.timeout_ms = this.timeoutMs;
    return type.encode(type.fromObject({ ...req, context })).finish();
  }

  async request(subject, body, h) {
    return this.nc.request(subject, body, { timeout: this.timeoutMs, headers: h });
  }

  // call is Transport.call: micro's headers before decoding, a parked reply
  // downloaded, the error field raised. It returns { msg, body, resp, parked }.
  async call(subject, reqType, req, respType) {
    const msg = await this.request(subject, this.encode(reqType, req), this.headers(true));
    microError(msg);
    let body = msg.data;
    const parked = header(msg, "Abi-Overflow-Reply");
    if (parked) body = await this.download(parked, header(msg, "Abi-Overflow-Size"));
    const resp = T(respType).decode(body);
    const out = { msg, body, resp, parked };
    raiseError(resp, out);
    return out;
  }

  // exchange is one request of a session: Abi-Overflow: 1 except on the overflow
  // host's chunk exchanges, the error at field 15 raised.
  async exchange(prefix, op, id, reqType, req, respType) {
    const msg = await this.request(transferSubject(prefix, op, id), this.encode(reqType, req), this.headers(prefix !== OVERFLOW));
    microError(msg);
    const resp = T(respType).decode(msg.data);
    raiseError(resp, { msg, resp });
    return resp;
  }

  async open(prefix, operation, metadata, chunk_bytes) {
    const r = await this.exchange(prefix, "open", "", "abi.transfer.v1.OpenRequest", { operation, metadata, chunk_bytes }, "abi.transfer.v1.OpenResponse");
    transferSubject(prefix, "read", r.id); // the owner must be 32 lowercase hex
    return { id: r.id, chunk: r.chunk_bytes };
  }
  write(prefix, id, sequence, data) {
    return this.exchange(prefix, "write", id, "abi.transfer.v1.WriteRequest", { id, sequence, data }, "abi.transfer.v1.WriteResponse");
  }
  start(prefix, id) {
    return this.exchange(prefix, "start", id, "abi.transfer.v1.StartRequest", { id }, "abi.transfer.v1.StartResponse");
  }
  close(prefix, id) {
    return this.exchange(prefix, "close", id, "abi.transfer.v1.CloseRequest", { id }, "abi.transfer.v1.CloseResponse");
  }
  async read(prefix, id, sequence) {
    const r = await this.exchange(prefix, "read", id, "abi.transfer.v1.ReadRequest", { id, sequence }, "abi.transfer.v1.ReadResponse");
    if (Number(r.sequence) !== sequence) throw new Error(`Transfer sequence mismatch: asked ${sequence}, got ${r.sequence}`);
    return r;
  }

  // readAll: done first (its data dropped), pending waits 20 ms, else keep and advance.
  async readAll(prefix, id, stopAfter = 0) {
    const chunks = [];
    const replies = [];
    let size = 0;
    for (let seq = 0; ; ) {
      const r = await this.read(prefix, id, seq);
      replies.push(r);
      if (r.done) break;
      if (r.pending) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      chunks.push(Buffer.from(r.data));
      size += r.data.length;
      seq++;
      if (stopAfter > 0 && size > stopAfter) break;
    }
    return { data: Buffer.concat(chunks), replies };
  }

  // download reads a parked reply without a start, checks its size, closes it always.
  async download(id, sizeHeader) {
    try {
      const size = Number.parseInt(sizeHeader, 10);
      if (!/^[0-9]+$/.test(sizeHeader)) throw new RPCError("INTERNAL", "Overflowed reply without a valid size");
      if (size > 256 << 20) throw new RPCError("PAYLOAD_TOO_LARGE", "Reply exceeds the overflow limit");
      const { data } = await this.readAll(OVERFLOW, id, size);
      if (data.length !== size) throw new RPCError("INTERNAL", `overflow reply has ${data.length} bytes, announced ${size}`);
      return data;
    } finally {
      await this.close(OVERFLOW, id).catch(() => {});
    }
  }
}

function header(msg, name) {
  return msg.headers ? msg.headers.get(name) : "";
}

function microError(msg) {
  const text = header(msg, "Nats-Service-Error");
  const code = header(msg, "Nats-Service-Error-Code");
  if (text || code) throw new RPCError(code || "UNKNOWN", text || "Remote error");
}

function raiseError(resp, out) {
  const e = resp.error;
  if (e) {
    const err = new RPCError(e.code, e.message, resp);
    err.reply = out;
    throw err;
  }
}

function transferSubject(prefix, op, id) {
  if (!id.includes(":")) return `${prefix}.${op}`;
  const owner = id.split(":", 1)[0];
  if (!/^[0-9a-f]{32}$/.test(owner)) throw new Error(`Invalid transfer owner ${owner}`);
  return `${prefix}.${owner}.${op}`;
}

function objectMetadata(prefix, key) {
  const type = T("abi.object_storage.v1.GetObjectRequest");
  return type.encode(type.fromObject({ prefix, key })).finish();
}

function pattern(n) {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7 + Math.floor(i / 251)) & 0xff;
  return b;
}

// --- checks
let failures = 0;
function check(ok, what) {
  if (!ok) {
    failures++;
    console.log(`FAIL ${what}`);
  }
}
function checkBytes(got, want, what) {
  check(hex(got) === want, `${what}: body ${hex(got)}, want ${want}`);
}
function noMicroHeaders(msg, what) {
  check(!header(msg, "Nats-Service-Error") && !header(msg, "Nats-Service-Error-Code"), `${what}: micro error headers on the reply`);
}
async function expectCode(promise, code, what) {
  try {
    await promise;
    check(false, `${what}: succeeded, want ${code}`);
  } catch (e) {
    check(e.code === code, `${what}: ${e.message}, want ${code}`);
    if (e.reply) {
      noMicroHeaders(e.reply.msg, what);
      check(header(e.reply.msg, "Abi-Error-Code") === code, `${what}: Abi-Error-Code ${header(e.reply.msg, "Abi-Error-Code")}`);
    }
    return e;
  }
}

const token = (sub) => jwt.sign({ sub }, secret, { algorithm: "HS256", expiresIn: "1h" });

async function caseA(t) {
  checkBytes((await t.call(kv("set"), "abi.keyvalue.v1.SetRequest", { key: "node/a", value: Buffer.from("v") }, "abi.keyvalue.v1.SetResponse")).body, "", "set");
  checkBytes((await t.call(kv("get"), "abi.keyvalue.v1.GetRequest", { key: "node/a" }, "abi.keyvalue.v1.GetResponse")).body, "0a0176", "get");
  checkBytes((await t.call(kv("exists"), "abi.keyvalue.v1.ExistsRequest", { key: "node/a" }, "abi.keyvalue.v1.ExistsResponse")).body, "0801", "exists");
  checkBytes((await t.call(kv("set_if_not_exists"), "abi.keyvalue.v1.SetIfNotExistsRequest", { key: "node/a", value: Buffer.from("x") }, "abi.keyvalue.v1.SetIfNotExistsResponse")).body, "0800", "set_if_not_exists on a live key");
  const dvm = (value) => t.call(kv("delete_if_value_matches"), "abi.keyvalue.v1.DeleteIfValueMatchesRequest", { key: "node/a", value: Buffer.from(value) }, "abi.keyvalue.v1.DeleteIfValueMatchesResponse");
  checkBytes((await dvm("w")).body, "0800", "delete_if_value_matches, wrong value");
  checkBytes((await dvm("v")).body, "0801", "delete_if_value_matches, right value");
  await t.call(kv("set"), "abi.keyvalue.v1.SetRequest", { key: "node/empty", value: Buffer.alloc(0) }, "abi.keyvalue.v1.SetResponse");
  checkBytes((await t.call(kv("get"), "abi.keyvalue.v1.GetRequest", { key: "node/empty" }, "abi.keyvalue.v1.GetResponse")).body, "0a00", "get of an empty value");
}

async function caseB(t) {
  const e = await expectCode(t.call(kv("get"), "abi.keyvalue.v1.GetRequest", { key: "node/nope" }, "abi.keyvalue.v1.GetResponse"), "KV_NOT_FOUND", "get of a missing key");
  check(e && e.response && e.response.error.message === "Key not found: node/nope", "get of a missing key: message");
  await expectCode(t.call(kv("delete"), "abi.keyvalue.v1.DeleteRequest", { key: "node/nope" }, "abi.keyvalue.v1.DeleteResponse"), "KV_NOT_FOUND", "delete of a missing key");
  await expectCode(t.call(kv("get_ttl"), "abi.keyvalue.v1.GetTtlRequest", { key: "node/nope" }, "abi.keyvalue.v1.GetTtlResponse"), "KV_NOT_FOUND", "get_ttl of a missing key");
  await t.call(kv("set"), "abi.keyvalue.v1.SetRequest", { key: "node/ttl", value: Buffer.from("v"), ttl: 60 }, "abi.keyvalue.v1.SetResponse");
  const left = (await t.call(kv("get_ttl"), "abi.keyvalue.v1.GetTtlRequest", { key: "node/ttl" }, "abi.keyvalue.v1.GetTtlResponse")).resp;
  check(left.seconds != null && Number(left.seconds) >= 1 && Number(left.seconds) <= 60, `get_ttl of a 60 s key: ${left.seconds}`);
  await t.call(kv("set"), "abi.keyvalue.v1.SetRequest", { key: "node/forever", value: Buffer.from("v") }, "abi.keyvalue.v1.SetResponse");
  const never = (await t.call(kv("get_ttl"), "abi.keyvalue.v1.GetTtlRequest", { key: "node/forever" }, "abi.keyvalue.v1.GetTtlResponse")).body;
  checkBytes(never, "", "get_ttl of a key without TTL (seconds unset)");
  for (const k of ["node/list/c", "node/list/a", "node/list/b"]) {
    await t.call(kv("set"), "abi.keyvalue.v1.SetRequest", { key: k, value: Buffer.from("v") }, "abi.keyvalue.v1.SetResponse");
  }
  const list = (after) => t.call(kv("list_keys"), "abi.keyvalue.v1.ListKeysRequest", after ? { prefix: "node/list/", limit: 2, after } : { prefix: "node/list/", limit: 2 }, "abi.keyvalue.v1.ListKeysResponse");
  const first = (await list()).resp;
  check(first.keys.join(",") === "node/list/a,node/list/b" && first.next_after === "node/list/b", `list_keys first page: ${JSON.stringify(first)}`);
  const last = (await list(first.next_after)).resp;
  check(last.keys.join(",") === "node/list/c" && last.next_after == null, `list_keys last page: ${JSON.stringify(last)}`);
  await expectCode(t.call(kv("list_keys"), "abi.keyvalue.v1.ListKeysRequest", { prefix: "node/list/" }, "abi.keyvalue.v1.ListKeysResponse"), "INVALID_ARGUMENT", "list_keys limit 0");
}

async function caseE(t, other) {
  const put = await t.open(OBJECTS, "put", objectMetadata("node", "big.bin"), 32768);
  check(put.chunk >= 1024 && put.chunk <= 32768, `open: chunk ${put.chunk}`);
  const data = pattern(3 * put.chunk);
  for (let s = 0; s < 3; s++) await t.write(OBJECTS, put.id, s, data.subarray(s * put.chunk, (s + 1) * put.chunk));
  await t.start(OBJECTS, put.id);
  const stored = await t.readAll(OBJECTS, put.id);
  check(stored.data.length === 0 && stored.replies.at(-1).done, "a put's reads end with done");
  await t.close(OBJECTS, put.id);

  const get = await t.open(OBJECTS, "get", objectMetadata("node", "big.bin"), 32768);
  await t.start(OBJECTS, get.id);
  const back = await t.readAll(OBJECTS, get.id);
  check(back.data.equals(data), `get: ${back.data.length} bytes, want ${data.length}`);
  const pieces = back.replies.filter((r) => !r.pending && !r.done);
  const end = back.replies.at(-1);
  check(pieces.length >= 3 && pieces.every((r) => !r.done), `get: ${pieces.length} data replies, none done`);
  check(end.done && end.data.length === 0 && Number(end.sequence) === pieces.length, `get's end: ${JSON.stringify(end)}`);
  await t.close(OBJECTS, get.id);

  const missing = await t.open(OBJECTS, "get", objectMetadata("node", "missing.bin"), 32768);
  await expectCode(t.start(OBJECTS, missing.id).then(() => t.readAll(OBJECTS, missing.id)), "OBJECT_NOT_FOUND", "get of a missing object");
  await t.close(OBJECTS, missing.id).catch(() => {});

  const mine = await t.open(OBJECTS, "get", objectMetadata("node", "big.bin"), 32768);
  await expectCode(other.start(OBJECTS, mine.id), "PERMISSION_DENIED", "another caller's start");
  await t.start(OBJECTS, mine.id);
  await expectCode(other.read(OBJECTS, mine.id, 0), "PERMISSION_DENIED", "another caller's read");
  await t.close(OBJECTS, mine.id);
}

async function caseF(t, other) {
  const value = pattern(3 * 65536);
  const put = await t.open(OBJECTS, "put", objectMetadata("node", "parked.bin"), 32768);
  for (let s = 0, off = 0; off < value.length; s++, off += put.chunk) await t.write(OBJECTS, put.id, s, value.subarray(off, off + put.chunk));
  await t.start(OBJECTS, put.id);
  await t.readAll(OBJECTS, put.id);
  await t.close(OBJECTS, put.id);

  const reqType = T("abi.object_storage.v1.GetObjectRequest");
  const body = reqType.encode(reqType.fromObject({ prefix: "node", key: "parked.bin" })).finish();
  const notice = await t.request(objects("get_object"), body, t.headers(true));
  const id = header(notice, "Abi-Overflow-Reply");
  const respType = T("abi.object_storage.v1.GetObjectResponse");
  const want = respType.encode(respType.fromObject({ content: value })).finish();
  check(notice.data.length === 0 && /^[0-9a-f]{32}:/.test(id) && header(notice, "Abi-Overflow-Size") === String(want.length), `the notice: ${notice.data.length} bytes, id ${id}, size ${header(notice, "Abi-Overflow-Size")} (want ${want.length})`);
  check(!header(notice, "Abi-Error-Code"), "the notice carries Abi-Error-Code");
  noMicroHeaders(notice, "the notice");
  await expectCode(other.read(OVERFLOW, id, 0), "PERMISSION_DENIED", "another caller's read of the parked reply");
  const bytes = await t.download(id, header(notice, "Abi-Overflow-Size"));
  check(Buffer.from(bytes).equals(Buffer.from(want)), "the parked reply's bytes");

  const through = await t.call(objects("get_object"), "abi.object_storage.v1.GetObjectRequest", { prefix: "node", key: "parked.bin" }, "abi.object_storage.v1.GetObjectResponse");
  check(through.parked && Buffer.from(through.resp.content).equals(value), "get_object through the transport: parked and equal");
}

const nc = await connect({ servers: url, name: "abi-engine-nodejs-smoke" });
check(nc.info.max_payload === 65536, `the broker's max payload is ${nc.info.max_payload}, want 65536`);
const sdk = new Transport(nc, token("node-ci"));
const other = new Transport(nc, token("other"));
for (const [name, run] of [["a_kv_round_trip", caseA], ["b_kv_misses", caseB], ["e_object_transfers", caseE], ["f_overflow_reply", caseF]]) {
  const before = failures;
  try {
    await run(sdk, other);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e.stack || e}`);
  }
  console.log(`${failures === before ? "ok  " : "FAIL"} ${name}`);
}
await nc.close();
process.exit(failures === 0 ? 0 : 1);
