// dag.js: lays a workflow's steps out as a DAG (columns by longest path from
// the roots) and draws it as one SVG string, fast enough for thousands of
// steps. Nodes carry data-step so the page can colour and select them.

const NODE_W = 168, NODE_H = 44, GAP_X = 120, GAP_Y = 18, PAD = 16;
const LABEL_LIMIT = 200; // edges above which conditions move into tooltips

export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

/** graph reads the steps of a workflow definition into nodes and edges. */
export function graph(workflow) {
  const nodes = [], edges = [];
  for (const wrapper of (workflow && workflow.steps) || []) {
    const kind = Object.keys(wrapper)[0];
    const s = wrapper[kind] || {};
    let type = s.type || kind;
    if (kind === 'subworkflow') type = 'subworkflow';
    if (kind === 'foreach') type = 'foreach';
    if (kind === 'while') type = 'while';
    nodes.push({ id: s.id, kind, type, name: s.name || '' });
    const succ = (s.transition && s.transition.successors) || {};
    for (const [to, cond] of Object.entries(succ)) {
      edges.push({ from: s.id, to, cond: typeof cond === 'string' ? cond : String(cond) });
    }
  }
  return { nodes, edges };
}

/** layout assigns each node a column (longest path) and a row. */
export function layout(g) {
  const byId = new Map(g.nodes.map(n => [n.id, n]));
  const preds = new Map(g.nodes.map(n => [n.id, []]));
  const succs = new Map(g.nodes.map(n => [n.id, []]));
  const indeg = new Map(g.nodes.map(n => [n.id, 0]));
  for (const e of g.edges) {
    if (!byId.has(e.from) || !byId.has(e.to)) continue;
    succs.get(e.from).push(e.to);
    preds.get(e.to).push(e.from);
    indeg.set(e.to, indeg.get(e.to) + 1);
  }
  const col = new Map();
  const queue = g.nodes.filter(n => indeg.get(n.id) === 0).map(n => n.id);
  for (const id of queue) col.set(id, 0);
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i];
    for (const t of succs.get(id)) {
      col.set(t, Math.max(col.get(t) || 0, col.get(id) + 1));
      indeg.set(t, indeg.get(t) - 1);
      if (indeg.get(t) === 0) queue.push(t);
    }
  }
  for (const n of g.nodes) if (!col.has(n.id)) col.set(n.id, 0); // a cycle the validator would refuse
  const columns = [];
  for (const n of g.nodes) (columns[col.get(n.id)] ||= []).push(n);
  const row = new Map();
  columns.forEach((nodes, c) => {
    if (c > 0) {
      // Order a column by the mean row of its predecessors: fewer crossings.
      const key = n => { const p = preds.get(n.id).filter(x => row.has(x)); return p.length ? p.reduce((a, x) => a + row.get(x), 0) / p.length : 0; };
      nodes.sort((a, b) => key(a) - key(b));
    }
    nodes.forEach((n, r) => row.set(n.id, r));
  });
  const pos = new Map();
  for (const n of g.nodes) {
    pos.set(n.id, { x: PAD + col.get(n.id) * (NODE_W + GAP_X), y: PAD + row.get(n.id) * (NODE_H + GAP_Y) });
  }
  const width = PAD * 2 + Math.max(1, columns.length) * (NODE_W + GAP_X) - GAP_X;
  const height = PAD * 2 + Math.max(1, ...columns.map(c => (c || []).length)) * (NODE_H + GAP_Y) - GAP_Y;
  return { pos, width, height };
}

const ICON = { foreach: '⟳', while: '↻', subworkflow: '⧉' };

/**
 * svg draws the DAG. status(stepId) gives a node's status (a CSS class
 * st-STATUS), extra(stepId) a second line (e.g. a rollup count).
 */
export function svg(g, lay, status = () => '', extra = () => '') {
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" class="dag" width="${lay.width}" height="${lay.height}" viewBox="0 0 ${lay.width} ${lay.height}" role="img" aria-label="workflow DAG">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker></defs>'];
  // A big DAG keeps its conditions in the nodes' tooltips: thousands of
  // labels and edge tooltips would only slow the page.
  const big = g.edges.length > LABEL_LIMIT;
  const conds = new Map();
  const paths = [], condPaths = [];
  for (const e of g.edges) {
    const a = lay.pos.get(e.from), b = lay.pos.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2, mx = (x1 + x2) / 2;
    const conditional = e.cond && e.cond !== 'true';
    if (big) {
      if (conditional) conds.set(e.to, (conds.get(e.to) || '') + `\nfrom ${e.from} when ${e.cond}`);
      // Straight, without arrowheads (markers are costly by the thousand):
      // edges run left to right.
      (conditional ? condPaths : paths).push(`M${x1},${y1}L${x2},${y2}`);
      continue;
    }
    out.push(`<path class="edge${conditional ? ' cond' : ''}" d="M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}" marker-end="url(#arrow)"><title>${esc(e.from)} → ${esc(e.to)}${conditional ? ' when ' + esc(e.cond) : ''}</title></path>`);
    if (conditional) {
      const label = e.cond.length > 22 ? e.cond.slice(0, 21) + '…' : e.cond;
      out.push(`<text class="edge-label" x="${x2 - 6}" y="${y2 - 6}" text-anchor="end">${esc(label)}</text>`);
    }
  }
  // A big DAG's edges are two paths in all.
  if (paths.length) out.push(`<path class="edge" d="${paths.join('')}"/>`);
  if (condPaths.length) out.push(`<path class="edge cond" d="${condPaths.join('')}"/>`);
  for (const n of g.nodes) {
    const p = lay.pos.get(n.id);
    const st = status(n.id) || '';
    const name = n.id.length > 20 ? n.id.slice(0, 19) + '…' : n.id;
    const sub = extra(n.id) || (st ? st.toLowerCase().replace(/_/g, ' ') : n.type);
    out.push(`<g class="node kind-${esc(n.kind)} st-${esc(st || 'NONE')}" data-step="${esc(n.id)}" transform="translate(${p.x},${p.y})" tabindex="0">` +
      `<title>${esc(n.id)} (${esc(n.type)})${st ? ': ' + esc(st) : ''}${esc(conds.get(n.id) || '')}</title>` +
      `<rect width="${NODE_W}" height="${NODE_H}" rx="6"/>` +
      `<text class="node-id" x="10" y="18">${ICON[n.kind] ? ICON[n.kind] + ' ' : ''}${esc(name)}</text>` +
      `<text class="node-sub" x="10" y="35">${esc(sub)}</text></g>`);
  }
  out.push('</svg>');
  return out.join('');
}
