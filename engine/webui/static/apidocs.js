// The REST API reference at /api/v3/docs: the embedded OpenAPI document
// (GET /api/v3/openapi.json) rendered as one page, operations grouped by
// tag, each with its parameters, request body and responses; schema
// references are resolved in place to a few levels.

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];
const MAX_DEPTH = 4;

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function resolve(doc, schema) {
  if (!schema || !schema.$ref) return [schema, ''];
  const name = schema.$ref.split('/').pop();
  const target = schema.$ref.replace(/^#\//, '').split('/').reduce((o, k) => (o ? o[k] : undefined), doc);
  return [target || {}, name];
}

// schemaView renders a schema as a nested list: properties with their
// types, required marks and descriptions.
function schemaView(doc, schema, depth = 0, seen = new Set()) {
  const [s, name] = resolve(doc, schema);
  if (!s) return el('span', { class: 'muted' }, 'any');
  const label = name ? el('code', { class: 'schema-name' }, name) : null;
  if (name && (seen.has(name) || depth >= MAX_DEPTH)) return label;
  const inner = new Set(seen);
  if (name) inner.add(name);
  if (s.type === 'array') {
    return el('span', {}, label, label ? ' ' : '', 'array of ', schemaView(doc, s.items || {}, depth + 1, inner));
  }
  for (const key of ['oneOf', 'anyOf', 'allOf']) {
    if (Array.isArray(s[key])) {
      return el('span', {}, label, ` ${key}: `, ...s[key].map((x, i) => [i ? ' | ' : '', schemaView(doc, x, depth + 1, inner)]));
    }
  }
  const props = s.properties || {};
  const keys = Object.keys(props);
  const type = s.type || (keys.length ? 'object' : 'any');
  const extra = [s.enum ? ` one of ${s.enum.join(', ')}` : '', s.format ? ` (${s.format})` : ''].join('');
  if (!keys.length) return el('span', {}, label, label ? ' ' : '', el('span', { class: 'muted' }, type + extra));
  const required = new Set(s.required || []);
  return el('div', { class: 'schema' }, label,
    el('ul', {}, keys.map((k) => el('li', {},
      el('code', {}, k), required.has(k) ? el('span', { class: 'req' }, ' required') : '', ': ',
      schemaView(doc, props[k], depth + 1, inner),
      props[k].description ? el('span', { class: 'muted' }, ' — ' + props[k].description) : ''))));
}

function contentView(doc, content) {
  return Object.entries(content || {}).map(([type, media]) =>
    el('div', { class: 'media' }, el('span', { class: 'muted' }, type), ' ',
      media.schema ? schemaView(doc, media.schema) : ''));
}

function operationView(doc, path, method, op) {
  const params = (op.parameters || []).map((p) => resolve(doc, p)[0]);
  const body = op.requestBody ? resolve(doc, op.requestBody)[0] : null;
  return el('details', { class: 'op', id: op.operationId || `${method}-${path}` },
    el('summary', {}, el('span', { class: `verb verb-${method}` }, method.toUpperCase()), ' ', el('code', {}, path),
      ' ', el('span', { class: 'muted' }, op.summary || '')),
    op.description ? el('p', {}, op.description) : '',
    params.length ? [el('h3', {}, 'Parameters'), el('table', { class: 'list compact' },
      el('tbody', {}, params.map((p) => el('tr', {},
        el('td', {}, el('code', {}, p.name)), el('td', {}, p.in), el('td', {}, p.required ? 'required' : ''),
        el('td', {}, p.schema ? schemaView(doc, p.schema) : ''), el('td', { class: 'muted' }, p.description || '')))))] : '',
    body ? [el('h3', {}, 'Request body'), body.description ? el('p', { class: 'muted' }, body.description) : '',
      contentView(doc, body.content)] : '',
    el('h3', {}, 'Responses'),
    Object.entries(op.responses || {}).map(([code, r]) => {
      const [resp] = resolve(doc, r);
      return el('div', { class: 'resp' }, el('b', {}, code), ' ', resp.description || '', contentView(doc, resp.content));
    }));
}

async function main() {
  const main = document.getElementById('main');
  let doc;
  try {
    const resp = await fetch('/api/v3/openapi.json');
    if (!resp.ok) throw new Error(`GET /api/v3/openapi.json: ${resp.status}`);
    doc = await resp.json();
  } catch (e) {
    main.replaceChildren(el('div', { class: 'error' }, String(e.message || e)));
    return;
  }
  const byTag = new Map((doc.tags || []).map((t) => [t.name, { tag: t, ops: [] }]));
  for (const [path, item] of Object.entries(doc.paths || {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const tag = (op.tags && op.tags[0]) || 'other';
      if (!byTag.has(tag)) byTag.set(tag, { tag: { name: tag }, ops: [] });
      byTag.get(tag).ops.push([path, method, op]);
    }
  }
  const filter = el('input', { type: 'search', placeholder: 'filter operations: path, method or words of the summary' });
  const sections = [...byTag.values()].filter((g) => g.ops.length).map((g) =>
    el('section', { class: 'tag-group' }, el('h2', {}, g.tag.name),
      g.tag.description ? el('p', { class: 'muted' }, g.tag.description) : '',
      g.ops.map(([path, method, op]) => operationView(doc, path, method, op))));
  filter.addEventListener('input', () => {
    const q = filter.value.trim().toLowerCase();
    for (const d of main.querySelectorAll('details.op')) {
      d.hidden = q !== '' && !d.querySelector('summary').textContent.toLowerCase().includes(q);
    }
    for (const sec of main.querySelectorAll('section.tag-group')) {
      sec.hidden = !sec.querySelector('details.op:not([hidden])');
    }
  });
  main.replaceChildren(
    el('h1', {}, (doc.info && doc.info.title) || 'REST API', ' ', el('span', { class: 'muted' }, (doc.info && doc.info.version) || '')),
    doc.info && doc.info.description ? el('p', { class: 'muted' }, doc.info.description) : '',
    filter, ...sections);
  document.body.dataset.ready = 'apidocs';
}

main();
