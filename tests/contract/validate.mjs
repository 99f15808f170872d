// validate.mjs - the contract check: every exchange the API and persistence suites had with
// a live dpbudgetd, validated against openapi.yaml.
//
//   node validate.mjs OPENAPI_YAML EXCHANGES_JSONL
//
// EXCHANGES_JSONL is written by the tests' libcurl client (tests/api/client.c) when
// $DPB_CONTRACT_LOG names it: one JSON line per exchange, plus one line with the routing and
// problem tables (tests/api/test_contract.c). Checked:
//   - each exchange: path -> operation -> status -> Content-Type -> schema. An undocumented
//     status, content type or a body that does not match its schema fails; so do a 401
//     without WWW-Authenticate, a 429 without Retry-After and a 405 whose Allow header does
//     not name exactly the path's operations (and OPTIONS). OPTIONS on a documented path is
//     the convention of info.description: 204, no body, Allow as a 405's. A request answered 2xx must be valid by the
//     request's schemas (path and query parameters, body: the schema may not be stricter
//     than the server), and one refused 400
//     for its structure (missing_field, unknown_field, wrong_type, too_many_values) invalid
//     by it (nor looser);
//   - the routing table: every route has its operation and every operation its route, with
//     the security its scope implies (open routes: security []) and exactly the statuses
//     the table implies (scoped: 401, 429; charge or admin: 403; JSON body: 413, 415; every
//     route: 400 and 431 from the checks before routing);
//   - the problem table: the Problem schema's code enum lists exactly the server's codes, and
//     each operation's problem responses name only codes of their status;
//   - every example in the document validates against its schema.
// Prints the coverage (operation x status exercised) and closes with
// "contract: N passed, M failed"; exits 1 on any failure.
import fs from 'node:fs';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';

const [specPath, logPath] = process.argv.slice(2);
if (!specPath || !logPath) {
  console.error('usage: node validate.mjs OPENAPI_YAML EXCHANGES_JSONL');
  process.exit(2);
}
const spec = YAML.parse(fs.readFileSync(specPath, 'utf8'));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

let passed = 0;
let failed = 0;
const failures = new Map(); // message -> count (the same mismatch is reported once)
function fail(msg) {
  failed++;
  failures.set(msg, (failures.get(msg) || 0) + 1);
}
let inExchange = false; // an exchange counts once: passed when none of its checks failed
function check(ok, msg) {
  if (!ok) fail(msg);
  else if (!inExchange) passed++;
  return ok;
}

// --- schemas: components.schemas become $defs of one schema, refs rewritten ------------------
function rewriteRefs(node) {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (node && typeof node === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(node)) {
      // ajv's discriminator reads the values from each branch's class_name; it has no mapping
      if (k === 'discriminator' && v && typeof v === 'object' && v.mapping) out[k] = { propertyName: v.propertyName };
      else if (k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/'))
        out[k] = 'spec#/$defs/' + v.slice('#/components/schemas/'.length);
      else out[k] = rewriteRefs(v);
    }
    return out;
  }
  return node;
}
function resolve(obj) {
  // a $ref to components.responses / parameters / headers (not schemas: ajv resolves those)
  let seen = 0;
  while (obj && obj.$ref && seen++ < 10) {
    const parts = obj.$ref.replace(/^#\//, '').split('/');
    obj = parts.reduce((o, p) => (o ? o[p.replace(/~1/g, '/').replace(/~0/g, '~')] : undefined), spec);
  }
  return obj;
}
// strictSchema: an unknown keyword (a typo) is an error; types and tuples as OpenAPI writes them
const ajv = new Ajv2020({ allErrors: true, strictSchema: true, strictTypes: false, strictTuples: false, discriminator: true });
ajv.addSchema({ $id: 'spec', $defs: rewriteRefs(spec.components?.schemas || {}) });
const compiled = new Map();
function validator(schema) {
  const key = JSON.stringify(schema);
  if (!compiled.has(key)) compiled.set(key, ajv.compile(rewriteRefs(schema)));
  return compiled.get(key);
}
function errorsText(v) {
  return (v.errors || [])
    .slice(0, 4)
    .map((e) => `${e.instancePath || '/'} ${e.message}${e.params && e.params.allowedValues && e.params.allowedValues.length <= 8 ? ' ' + JSON.stringify(e.params.allowedValues) : ''}`)
    .join('; ');
}

// --- paths ------------------------------------------------------------------------------------
const pathEntries = Object.entries(spec.paths || {}).map(([tmpl, item]) => {
  const re = new RegExp('^' + tmpl.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$');
  return { tmpl, item, re, literal: !tmpl.includes('{') };
});
function findPath(p) {
  return pathEntries.find((e) => e.literal && e.re.test(p)) || pathEntries.find((e) => e.re.test(p));
}
function opsOf(item) {
  return METHODS.filter((m) => item[m]);
}
function bareType(ct) {
  return (ct || '').split(';')[0].trim().toLowerCase();
}

// --- exchanges --------------------------------------------------------------------------------
const lines = fs.readFileSync(logPath, 'utf8').split('\n').filter((l) => l.trim());
const exchanges = [];
let tables = null;
for (const l of lines) {
  const o = JSON.parse(l);
  if (o.kind === 'tables') tables = o;
  else if (o.kind === 'exchange') exchanges.push(o);
}
const coverage = new Map(); // "METHOD tmpl" -> Map(status -> count)
function cover(key, status) {
  if (!coverage.has(key)) coverage.set(key, new Map());
  const m = coverage.get(key);
  m.set(status, (m.get(status) || 0) + 1);
}

// A path segment percent-decoded; bytes that are not UTF-8 stay escaped.
function decodeSegment(seg) {
  try {
    return decodeURIComponent(seg);
  } catch {
    return seg;
  }
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

// What is wrong with an exchange's request by the operation's schemas: the path and query
// parameters (query values are strings: numbers are compared as numbers) and the JSON body.
// Returns {errors: [...], body} (body undefined when there is none to check).
function requestErrors(entry, op, ex) {
  const errors = [];
  const [urlPath, query = ''] = ex.path.split('?');
  const segs = urlPath.split('/');
  const tsegs = entry.tmpl.split('/');
  const params = [...(entry.item.parameters || []), ...(op.parameters || [])].map(resolve);
  const q = new URLSearchParams(query);
  for (const prm of params) {
    let value;
    if (prm.in === 'path') {
      const i = tsegs.indexOf(`{${prm.name}}`);
      value = i >= 0 ? decodeSegment(segs[i]) : undefined;
    } else if (prm.in === 'query' && q.has(prm.name)) {
      value = q.get(prm.name);
      const t = prm.schema?.type;
      if ((t === 'integer' || t === 'number') && value.trim() !== '' && !Number.isNaN(Number(value))) value = Number(value);
    } else {
      continue;
    }
    if (value === undefined || !prm.schema) continue;
    const v = validator(prm.schema);
    if (!v(value)) errors.push(`${prm.in} parameter ${prm.name} = ${JSON.stringify(value)}: ${errorsText(v)}`);
  }
  let body;
  const rb = op.requestBody ? resolve(op.requestBody) : undefined;
  const media = rb?.content?.[bareType(ex.request_content_type) || 'application/json'];
  if (media?.schema && ex.request_body !== null) body = parseJson(ex.request_body);
  if (body !== undefined) {
    const v = validator(media.schema);
    if (!v(body)) errors.push(`${errorsText(v)} (request ${ex.request_body.slice(0, 160)})`);
  }
  return { errors, body };
}

// An answer to a path or method the document does not list: a problem, with the headers
// its status promises.
function checkUnroutedProblem(where, ex) {
  if (ex.status === 401) check(ex.www_authenticate !== '', `${where}: no WWW-Authenticate`);
  if (ex.status === 429) check(ex.retry_after !== '', `${where}: no Retry-After`);
  if (ex.method === 'HEAD') return;
  if (check(bareType(ex.content_type) === 'application/problem+json', `${where}: content type ${ex.content_type}`)) {
    const body = parseJson(ex.body);
    if (check(body !== undefined, `${where}: the body is not JSON`)) checkProblemBody(where, ex, body);
  }
}

function checkProblemBody(where, ex, body) {
  const v = validator({ $ref: '#/components/schemas/Problem' });
  return check(v(body), `${where}: problem body does not match Problem: ${errorsText(v)}`) &&
    check(body.status === ex.status, `${where}: problem status ${body.status} in a ${ex.status} answer`);
}

function validateExchange(ex) {
  const urlPath = ex.path.split('?')[0];
  const entry = findPath(urlPath);
  if (!entry) {
    // no operation at this path (info.description): 404 not_found, after the key check
    // (401, 429) and the checks before routing (400, 431)
    cover('(no path)', ex.status);
    const where = `${ex.method} (undocumented path) -> ${ex.status}`;
    if (!check([404, 401, 429, 400, 431].includes(ex.status), `${where}: a path without operations gets 404 (or 401, 429, 400, 431)`)) return;
    checkUnroutedProblem(where, ex);
    return;
  }
  const m = ex.method.toLowerCase();
  const opMethod = entry.item[m] ? m : m === 'head' && entry.item.get ? 'get' : null;
  // the path's methods as Allow names them: HEAD wherever GET is, and OPTIONS, which every
  // path answers by the convention of info.description (CORS preflights)
  const allowOf = () => {
    const methods = opsOf(entry.item).map((x) => x.toUpperCase());
    if (methods.includes('GET') && !methods.includes('HEAD')) methods.push('HEAD');
    methods.push('OPTIONS');
    return methods.sort().join(', ');
  };
  const sameAllow = (a) => a.split(',').map((s) => s.trim()).sort().join(', ');
  if (!opMethod && m === 'options') {
    // the convention: 204 without a body and without a key, Allow naming the path's methods
    cover(`OPTIONS ${entry.tmpl} (convention)`, ex.status);
    const where = `OPTIONS ${entry.tmpl} (convention) -> ${ex.status}`;
    if (!check([204, 400, 431].includes(ex.status), `${where}: OPTIONS on a path gets 204 (or 400, 431 before routing)`)) return;
    if (ex.status !== 204) return checkUnroutedProblem(where, ex);
    check(sameAllow(ex.allow) === allowOf(), `${where}: Allow '${ex.allow}', the document has ${allowOf()}`);
    check(ex.body === '' || ex.body === null, `${where}: a body in a 204`);
    return;
  }
  if (!opMethod) {
    // a method the path does not have: 405 with Allow naming the path's methods
    cover(`${ex.method} ${entry.tmpl} (no operation)`, ex.status);
    const where = `${ex.method} ${entry.tmpl} (no such operation) -> ${ex.status}`;
    const allow = allowOf();
    if (!check([405, 401, 403, 429, 400, 431].includes(ex.status), `${where}: a method without an operation gets 405 (or 401, 403, 429, 400, 431)`)) return;
    if (ex.status === 405)
      check(sameAllow(ex.allow) === allow, `${where}: Allow '${ex.allow}', the document has ${allow}`);
    checkUnroutedProblem(where, ex);
    return;
  }
  const op = entry.item[opMethod];
  const opName = `${opMethod.toUpperCase()} ${entry.tmpl}`;
  const where = `${ex.method} ${entry.tmpl} -> ${ex.status}`;
  cover(opName, ex.status);
  const resp = resolve(op.responses?.[String(ex.status)]);
  if (!check(resp !== undefined, `${where}: status ${ex.status} is not documented for ${op.operationId}`)) return;
  // headers the document marks required
  const captured = { 'www-authenticate': ex.www_authenticate, 'retry-after': ex.retry_after, allow: ex.allow };
  for (const [name, h] of Object.entries(resp.headers || {})) {
    const hh = resolve(h);
    if (hh.required && name.toLowerCase() in captured)
      check(captured[name.toLowerCase()] !== '', `${where}: required header ${name} is missing`);
  }
  // The request against its schemas: answered 2xx, it must be valid (the schema may not be
  // stricter than the server); refused 400 for its structure (a missing, unknown or
  // mistyped field, a list too long), it must be invalid too (nor looser).
  const problemCode = ex.status === 400 ? parseJson(ex.body)?.code : undefined;
  const structural = ['missing_field', 'unknown_field', 'wrong_type', 'too_many_values'].includes(problemCode);
  const req = requestErrors(entry, op, ex);
  if (ex.status >= 200 && ex.status < 300)
    for (const e of req.errors) fail(`${where}: the server accepted a request its schema refuses: ${e}`);
  if (structural && req.body !== undefined)
    check(req.errors.length > 0, `${where}: the server refused a request (${problemCode}) that its schema accepts (request ${ex.request_body.slice(0, 160)})`);
  if (ex.method === 'HEAD' || !resp.content) {
    check(ex.body === '' || ex.body === null, `${where}: a body where the document defines none`);
    return;
  }
  const ct = bareType(ex.content_type);
  const media = resp.content[ct];
  if (!check(media !== undefined, `${where}: content type '${ct}' is not documented (${Object.keys(resp.content).join(', ')})`)) return;
  if (!media.schema) return;
  const body = parseJson(ex.body);
  if (!check(body !== undefined, `${where}: the body is not JSON`)) return;
  const v = validator(media.schema);
  if (!check(v(body), `${where}: body does not match its schema: ${errorsText(v)} (body ${ex.body.slice(0, 200)})`)) return;
  if (ct === 'application/problem+json') checkProblemBody(where, ex, body);
}

for (const ex of exchanges) {
  const before = failed;
  inExchange = true;
  try {
    validateExchange(ex);
  } catch (e) {
    fail(`${ex.method} ${ex.path} -> ${ex.status}: ${e.message}`);
  }
  inExchange = false;
  if (failed === before) passed++;
}

// --- the routing and problem tables ---------------------------------------------------------
if (check(tables !== null, 'no routing table was recorded (tests/api/test_contract.c)')) {
  const seen = new Set();
  for (const r of tables.routes) {
    // a prefix route's parameter is "{id}" in the table, named as the document likes
    const same = (a) => a.replace(/\{[^}]*\}/g, '{}');
    const entry = pathEntries.find((e) => same(e.tmpl) === same(r.path));
    const item = entry?.item;
    const op = item?.[r.method.toLowerCase()];
    const name = `${r.method} ${entry ? entry.tmpl : r.path}`;
    seen.add(name);
    if (!check(op !== undefined, `route ${name} has no operation in the document`)) continue;
    // a keyed route: its scope, or nothing at all (the empty alternative: a daemon started
    // without --api-keys asks for no key); an open route: no security
    const want = r.scope ? [{ bearer: [r.scope] }, {}] : [];
    const ops = [[name, op]];
    // HEAD is GET without the body: declared beside every GET, with the same security
    if (r.method === 'GET' && item.head !== undefined) {
      ops.push([`HEAD ${entry.tmpl}`, item.head]);
      seen.add(`HEAD ${entry.tmpl}`);
    }
    for (const [n, o] of ops)
      check(JSON.stringify(o.security) === JSON.stringify(want), `${n}: security ${JSON.stringify(o.security)}, the routing table implies ${JSON.stringify(want)}`);
    // what the table implies, both ways: a key is needed (401, 429), a key may lack the
    // scope (403: every valid key has read, so only charge and admin), a JSON body (413,
    // 415); without them the status cannot occur and is not documented. Every route can
    // get the answers given before routing (400 bad_request / invalid_framing, 431).
    const implied = {
      401: r.scope !== null,
      429: r.scope !== null,
      403: r.scope === 'charge' || r.scope === 'admin',
      413: r.json_body,
      415: r.json_body,
    };
    for (const st of ['400', '431']) check(op.responses?.[st] !== undefined, `${name}: status ${st} is not documented (every request is checked before routing)`);
    for (const [s, yes] of Object.entries(implied))
      check((op.responses?.[s] !== undefined) === yes, yes ? `${name}: status ${s} is not documented (the routing table implies it)` : `${name}: status ${s} is documented but cannot occur (routing table: scope ${r.scope}, JSON body ${r.json_body})`);
  }
  for (const e of pathEntries)
    for (const m of opsOf(e.item))
      check(seen.has(`${m.toUpperCase()} ${e.tmpl}`), `operation ${m.toUpperCase()} ${e.tmpl} has no route`);
  const codes = new Map(tables.problems.map((p) => [p.code, p.status]));
  const en = spec.components?.schemas?.Problem?.properties?.code?.enum || [];
  check(JSON.stringify([...en].sort()) === JSON.stringify([...codes.keys()].sort()), `Problem.code lists ${JSON.stringify([...en].sort())}, the server has ${JSON.stringify([...codes.keys()].sort())}`);
}

// --- examples -----------------------------------------------------------------------------------
let examples = 0;
function walkExamples(node, path) {
  if (Array.isArray(node)) return node.forEach((x, i) => walkExamples(x, `${path}/${i}`));
  if (!node || typeof node !== 'object') return;
  if (node.schema && ('example' in node || 'examples' in node)) {
    const v = validator(node.schema);
    const list = 'example' in node ? [node.example] : Object.values(node.examples).map((x) => resolve(x).value);
    for (const x of list) {
      examples++;
      check(v(x), `${path}: example does not match its schema: ${errorsText(v)}`);
    }
  }
  if (path.startsWith('#/components/schemas/') && Array.isArray(node.examples) && !node.schema) {
    const v = validator(node);
    for (const x of node.examples) {
      examples++;
      check(v(x), `${path}: schema example ${JSON.stringify(x)} does not match: ${errorsText(v)}`);
    }
  }
  for (const [k, v] of Object.entries(node)) if (k !== 'example' && k !== 'examples') walkExamples(v, `${path}/${k}`);
}
walkExamples(spec, '#');

// --- report -------------------------------------------------------------------------------------
let documented = 0;
let exercised = 0;
console.log('contract coverage (operation: statuses exercised / documented):');
for (const e of pathEntries)
  for (const m of opsOf(e.item)) {
    const name = `${m.toUpperCase()} ${e.tmpl}`;
    const doc = Object.keys(e.item[m].responses || {});
    const got = coverage.get(name) || new Map();
    documented += doc.length;
    exercised += doc.filter((s) => got.has(Number(s))).length;
    const line = doc.map((s) => (got.has(Number(s)) ? `${s}x${got.get(Number(s))}` : `(${s})`)).join(' ');
    console.log(`  ${e.item[m].operationId.padEnd(12)} ${name.padEnd(28)} ${line}`);
  }
const undeclared = new Map(); // status -> count, for methods a path does not have
for (const [k, m] of coverage) {
  if (k === '(no path)') console.log(`  ${''.padEnd(12)} ${'(paths not in the document)'.padEnd(28)} ${[...m].map(([s, n]) => `${s}x${n}`).join(' ')}`);
  else if (k.endsWith('(no operation)')) for (const [s, n] of m) undeclared.set(s, (undeclared.get(s) || 0) + n);
}
if (undeclared.size) console.log(`  ${''.padEnd(12)} ${'(methods a path lacks)'.padEnd(28)} ${[...undeclared].map(([s, n]) => `${s}x${n}`).join(' ')}`);
console.log(`contract: ${exchanges.length} exchanges, ${examples} examples; ${exercised} of ${documented} documented operation statuses exercised`);
for (const [msg, n] of failures) console.log(`FAIL ${msg}${n > 1 ? ` (x${n})` : ''}`);
console.log(`contract: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
