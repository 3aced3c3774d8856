// app.js: the Maestro web UI. Plain ES modules, no build step: hash routes
// #/ (workflows), #/workflows/ID (a workflow), #/runs/ID/INSTANCE/RUN (a run)
// and #/backfills/ID (a backfill).
import { api, ApiError, currentUser, setUser, terminalRun, time } from './api.js';
import { esc, graph, layout, svg } from './dag.js';

const main = document.getElementById('main');
const STEP_ROWS = 200; // rows of a run's steps table before "Show all"
let cleanup = () => {};

/** h builds an element: h('a', {href: '#/'}, 'text', child, ...). */
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

function fmtTime(d) { return d ? d.toLocaleString(undefined, { hour12: false }) : '–'; }
function fmtDur(ms) {
  if (ms === null || ms === undefined || ms < 0) return '–';
  if (ms < 1000) return ms + 'ms';
  if (ms < 60000) return (ms / 1000).toFixed(1) + 's';
  if (ms < 3600000) return Math.floor(ms / 60000) + 'm' + String(Math.floor(ms / 1000) % 60).padStart(2, '0') + 's';
  return Math.floor(ms / 3600000) + 'h' + String(Math.floor(ms / 60000) % 60).padStart(2, '0') + 'm';
}
function elapsed(start, end) { return start ? fmtDur((end || new Date()) - start) : '–'; }
function badge(status) { return h('span', { class: `badge st-${status || 'NONE'}` }, status || '–'); }
function json(v) { return h('pre', { class: 'json' }, v === undefined || v === null ? '–' : JSON.stringify(v, null, 2)); }

function errorBox(err) {
  const box = h('div', { class: 'error', role: 'alert' }, err instanceof ApiError ? `${err.httpStatus}: ${err.message}` : String(err.message || err));
  if (err.errors && err.errors.length) box.append(h('ul', {}, err.errors.map(e => h('li', {}, e))));
  return box;
}

/** confirmAction asks before an action, then runs it and reports the outcome. */
function confirmAction(title, detail, run) {
  const dlg = h('dialog', { class: 'confirm' },
    h('form', { method: 'dialog' },
      h('h3', {}, title), detail ? h('p', {}, detail) : null,
      h('div', { class: 'buttons' },
        h('button', { value: 'cancel', class: 'secondary' }, 'Cancel'),
        h('button', { value: 'ok', class: 'primary', autofocus: true }, 'Confirm'))));
  document.body.append(dlg);
  dlg.addEventListener('close', async () => {
    dlg.remove();
    if (dlg.returnValue !== 'ok') return;
    try { await run(); } catch (e) { toast(errorBox(e)); }
  });
  dlg.showModal();
}

function toast(content) {
  const t = h('div', { class: 'toast' }, content);
  document.body.append(t);
  setTimeout(() => t.remove(), 6000);
}

// ---- workflows list ----------------------------------------------------------

async function workflowsPage() {
  const input = h('input', { type: 'search', placeholder: 'Search workflows by id, name or description', 'aria-label': 'search', id: 'search' });
  const body = h('div', { id: 'workflows' });
  main.replaceChildren(h('h1', {}, 'Workflows'), input, body);
  let timer;
  const load = async () => {
    try {
      const list = await api.workflows(input.value.trim());
      if (!list.length) { body.replaceChildren(h('p', { class: 'empty' }, input.value ? 'No workflow matches.' : 'No workflows yet: push one with `maestro push`.')); return; }
      body.replaceChildren(h('table', { class: 'list' },
        h('thead', {}, h('tr', {}, ['Workflow', 'Name', 'Owner', 'Active', 'Latest', 'Last run', 'Modified'].map(x => h('th', {}, x)))),
        h('tbody', {}, list.map(w => h('tr', {},
          h('td', {}, h('a', { href: `#/workflows/${encodeURIComponent(w.workflow_id)}` }, w.workflow_id)),
          h('td', {}, w.name || ''), h('td', {}, w.owner || ''),
          h('td', {}, w.active_version_id ?? '–'), h('td', {}, w.latest_version_id ?? '–'),
          h('td', {}, w.latest_instance_id ? h('a', { href: `#/runs/${encodeURIComponent(w.workflow_id)}/${w.latest_instance_id}/latest` }, '#' + w.latest_instance_id) : '–'),
          h('td', {}, fmtTime(time(w.modify_time))))))));
    } catch (e) { body.replaceChildren(errorBox(e)); }
  };
  input.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(load, 200); });
  await load();
}

// ---- workflow page -----------------------------------------------------------

async function workflowPage(id) {
  main.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
  const [ov, ver, versions, triggers, runs, backfills, marks] = await Promise.all([
    api.overview(id), api.version(id, 'latest'),
    api.versions(id).catch(() => []), api.triggers(id).catch(() => []), api.instances(id).catch(() => []),
    api.backfills(id).catch(() => []), api.watermarks(id).catch(() => null),
  ]);
  const wf = ver.workflow || {};
  const g = graph(wf);
  const lay = layout(g);
  const dag = h('div', { class: 'dag-wrap' });
  dag.innerHTML = svg(g, lay);

  const paramsArea = h('textarea', { rows: 3, placeholder: 'run params, one per line: name=value (numbers and true/false are typed)', id: 'start-params' });
  const startBtn = h('button', { class: 'primary', id: 'start', onclick: () => {
    let rp;
    try { rp = parseParams(paramsArea.value); } catch (e) { toast(errorBox(e)); return; }
    confirmAction(`Start ${id}?`, Object.keys(rp).length ? 'with ' + Object.keys(rp).join(', ') : 'with default params', async () => {
      const r = await api.start(id, rp);
      location.hash = `#/runs/${encodeURIComponent(id)}/${r.instanceId}/${r.runId}`;
    });
  } }, 'Start run');

  main.replaceChildren(
    h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Workflows'), ' / ', id),
    h('header', { class: 'page-head' },
      h('div', {}, h('h1', {}, wf.name || id), wf.description ? h('p', { class: 'desc' }, wf.description) : null,
        h('p', { class: 'meta' }, `owner ${ov.owner || (ov.properties_snapshot && ov.properties_snapshot.owner) || '–'} · active version ${ov.active_version_id ?? '–'} · latest ${ov.latest_version_id} · ${g.nodes.length} steps`)),
      h('div', { class: 'start-box' }, paramsArea, startBtn)),
    h('section', {}, h('h2', {}, 'DAG'), dag),
    h('div', { class: 'two-col' },
      h('section', {}, h('h2', {}, 'Runs'), runsTable(id, runs)),
      h('section', {},
        h('h2', {}, 'Time triggers'), triggersTable(triggers, wf),
        ...watermarksSection(id, marks),
        h('h2', {}, 'Backfills'), backfillsTable(backfills),
        h('h2', {}, 'Versions'), versionsTable(versions, ov))));
}

// watermarksSection shows an incremental workflow's watermark per table and
// the snapshot ranges its latest runs covered (docs/incremental.md);
// nothing for a workflow without one.
function watermarksSection(id, marks) {
  if (!marks || !(marks.watermarks || []).length) return [];
  const range = r => `(${r.from_snapshot_id}, ${r.to_snapshot_id}]`;
  return [
    h('h2', {}, 'Watermarks'),
    h('table', { class: 'list', id: 'watermarks' },
      h('thead', {}, h('tr', {}, ['Table', 'Watermark', 'Committed', 'Latest', 'Pending', 'In flight'].map(x => h('th', {}, x)))),
      h('tbody', {}, marks.watermarks.map(w => h('tr', {},
        h('td', {}, w.table), h('td', {}, String(w.snapshot_id)), h('td', {}, w.commit_time ? fmtTime(new Date(w.commit_time)) : '–'),
        h('td', {}, String(w.latest_snapshot_id)), h('td', {}, String(w.pending_changes)),
        h('td', {}, w.inflight_instance_id ? h('a', { href: runHref(id, w.inflight_instance_id, 'latest') }, `#${w.inflight_instance_id}`) : '–'))))),
    h('table', { class: 'list', id: 'ranges' },
      h('thead', {}, h('tr', {}, ['Run', 'Table', 'Range', 'Snapshots', 'State'].map(x => h('th', {}, x)))),
      h('tbody', {}, (marks.runs || []).map(r => h('tr', {},
        h('td', {}, h('a', { href: runHref(id, r.workflow_instance_id, 'latest') }, `#${r.workflow_instance_id}`)),
        h('td', {}, r.table), h('td', {}, range(r) + (r.has_overwrite ? ' overwrite' : '') + (r.has_delete ? ' delete' : '')),
        h('td', {}, String(r.snapshot_count)), h('td', {}, badge(r.state)))))),
  ];
}

function backfillsTable(list) {
  if (!list.length) return h('p', { class: 'empty' }, 'No backfills: start one with `maestro backfill start`.');
  return h('table', { class: 'list', id: 'backfills' },
    h('thead', {}, h('tr', {}, ['Backfill', 'Status', 'Param', 'Range', 'Partitions'].map(x => h('th', {}, x)))),
    h('tbody', {}, list.map(b => h('tr', {},
      h('td', {}, h('a', { href: `#/backfills/${encodeURIComponent(b.backfill_id)}` }, b.backfill_id.slice(0, 8))),
      h('td', {}, badge(b.status)), h('td', {}, b.param), h('td', {}, backfillRange(b)), h('td', {}, b.partition_count)))));
}

function backfillRange(b) {
  const i = b.incremental;
  if (i) return `${i.table} (${i.from_snapshot_id ?? i.from_date}, ${i.to_snapshot_id ?? i.to_date}]` + (i.reset_watermark ? ' reset watermark' : '');
  if (b.values && b.values.length) return b.values.length > 4 ? b.values.slice(0, 4).join(', ') + ', …' : b.values.join(', ');
  return `${b.from} … ${b.to}${b.interval ? ' every ' + b.interval : ''}`;
}

// ---- backfill page -----------------------------------------------------------

const BACKFILL_ENDED = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
const PARTITION_ENDED = ['SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT', 'SKIPPED', 'CANCELLED'];
// The actions each status allows (docs/backfill.md, the state machine).
const BACKFILL_ACTIONS = { RUNNING: ['pause', 'cancel', 'retry'], PAUSED: ['resume', 'cancel', 'retry'], FAILED: ['retry', 'cancel'] };

/** partitionGrid draws one cell per partition, coloured by status, as one
 * string of HTML: 10,000 cells stay one cheap assignment. */
function partitionGrid(b) {
  const wf = encodeURIComponent(b.workflow_id);
  const cells = (b.partitions || []).map(p => {
    const title = esc(`${p.value}: ${p.status}${p.workflow_instance_id ? ' (instance ' + p.workflow_instance_id + ')' : ''}`);
    const cls = `cell st-${esc(p.status)}`;
    return p.workflow_instance_id
      ? `<a class="${cls}" title="${title}" data-value="${esc(p.value)}" href="#/runs/${wf}/${p.workflow_instance_id}/latest"></a>`
      : `<span class="${cls}" title="${title}" data-value="${esc(p.value)}"></span>`;
  });
  const grid = h('div', { class: 'grid', id: 'partitions', role: 'list', 'aria-label': 'partitions' });
  grid.innerHTML = cells.join('');
  return grid;
}

function downstreamTable(ds) {
  const ids = Object.keys(ds || {}).sort();
  if (!ids.length) return h('p', { class: 'empty' }, 'No downstream runs.');
  return h('table', { class: 'list', id: 'downstream' },
    h('thead', {}, h('tr', {}, ['Workflow', 'Runs', 'By status'].map(x => h('th', {}, x)))),
    h('tbody', {}, ids.map(id => {
      const d = ds[id];
      return h('tr', {},
        h('td', {}, h('a', { href: `#/workflows/${encodeURIComponent(id)}` }, id)),
        h('td', {}, d.runs.slice(0, 20).map(r => h('a', { href: runHref(id, r.workflow_instance_id, r.workflow_run_id), class: 'run-link' },
          badge(r.status), ' #' + r.workflow_instance_id)), d.runs.length > 20 ? ` … ${d.runs.length - 20} more` : ''),
        h('td', {}, Object.entries(d.counts).map(([k, v]) => `${k} ${v}`).join(', ')));
    })));
}

async function backfillPage(bid) {
  const render = b => {
    const counts = b.counts || {};
    const done = PARTITION_ENDED.reduce((n, s) => n + (counts[s] || 0), 0);
    const pct = b.partition_count ? Math.round(100 * done / b.partition_count) : 0;
    const actions = (BACKFILL_ACTIONS[b.status] || []).map(a => h('button', {
      class: a === 'cancel' ? 'danger' : 'secondary', id: `backfill-${a}`,
      onclick: () => confirmAction(`${a === 'retry' ? 'Retry the failed partitions of' : a[0].toUpperCase() + a.slice(1)} backfill ${bid.slice(0, 8)}?`,
        a === 'cancel' ? 'Its runs in flight are stopped' + (b.downstream_enabled ? ', and its downstream runs.' : '.') : null,
        async () => { await api.actOnBackfill(bid, a); render(await api.backfill(bid)); }),
    }, a === 'retry' ? 'Retry failed' : a[0].toUpperCase() + a.slice(1)));
    main.replaceChildren(
      h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Workflows'), ' / ',
        h('a', { href: `#/workflows/${encodeURIComponent(b.workflow_id)}` }, b.workflow_id), ' / backfill ', bid.slice(0, 8)),
      h('header', { class: 'page-head' },
        h('div', {}, h('h1', {}, 'Backfill of ', b.workflow_id, ' ', badge(b.status)),
          h('p', { class: 'meta' }, `${b.param} (${b.param_type}, ${b.format}) ${backfillRange(b)} · version ${b.workflow_version} · concurrency ${b.concurrency} · ${b.order} first · downstream ${b.downstream_enabled ? 'yes' : 'no'} · rerun ${b.rerun ? 'yes' : 'no'}`),
          h('p', { class: 'meta', id: 'backfill-progress' }, `${done} of ${b.partition_count} partitions ended (${pct}%) · `,
            Object.entries(counts).sort().map(([k, v]) => `${k} ${v}`).join(', '))),
        h('div', { class: 'actions' }, actions)),
      h('section', {}, h('h2', {}, 'Partitions'), partitionGrid(b)),
      h('section', {}, h('h2', {}, 'Downstream'), downstreamTable(b.downstream)));
    document.body.dataset.backfill = b.status;
  };
  render(await api.backfill(bid));
  // Live: refreshed every 2 s while it runs, every 10 s once it ended (a
  // retry or a late downstream run changes it again).
  let last = 0;
  const timer = setInterval(async () => {
    if (BACKFILL_ENDED.has(document.body.dataset.backfill) && Date.now() - last < 10000) return;
    last = Date.now();
    try { render(await api.backfill(bid)); } catch { /* the next refresh tries again */ }
  }, 2000);
  cleanup = () => clearInterval(timer);
}

function parseParams(text) {
  const out = {};
  for (const line of text.split('\n').map(l => l.trim()).filter(Boolean)) {
    const i = line.indexOf('=');
    if (i <= 0) throw new Error(`param "${line}" is not name=value`);
    const name = line.slice(0, i).trim(), v = line.slice(i + 1).trim();
    if (/^-?\d+$/.test(v)) out[name] = { type: 'LONG', value: Number(v) };
    else if (/^-?\d*\.\d+([eE][-+]?\d+)?$/.test(v)) out[name] = { type: 'DOUBLE', value: Number(v) };
    else if (v === 'true' || v === 'false') out[name] = { type: 'BOOLEAN', value: v === 'true' };
    else out[name] = { type: 'STRING', value: v };
  }
  return out;
}

function runsTable(id, runs) {
  if (!runs.length) return h('p', { class: 'empty' }, 'No runs yet.');
  return h('table', { class: 'list', id: 'runs' },
    h('thead', {}, h('tr', {}, ['Instance', 'Run', 'Version', 'Status', 'Created', 'Elapsed'].map(x => h('th', {}, x)))),
    h('tbody', {}, runs.map(r => h('tr', {},
      h('td', {}, h('a', { href: `#/runs/${encodeURIComponent(id)}/${r.instanceId}/${r.runId}` }, '#' + r.instanceId)),
      h('td', {}, r.runId), h('td', {}, r.versionId), h('td', {}, badge(r.status)),
      h('td', {}, fmtTime(r.created)), h('td', {}, elapsed(r.start, r.end))))));
}

function triggersTable(triggers, wf) {
  if (!triggers.length) {
    const defs = wf.time_triggers || [];
    return h('p', { class: 'empty' }, defs.length ? `${defs.length} defined; none active (the workflow has no active version).` : 'None.');
  }
  return h('table', { class: 'list', id: 'triggers' },
    h('thead', {}, h('tr', {}, ['Schedule', 'Time zone', 'State', 'Next fire', 'Last run'].map(x => h('th', {}, x)))),
    h('tbody', {}, triggers.map(t => h('tr', {},
      h('td', {}, h('code', {}, (t.time_trigger && (t.time_trigger.cron || t.time_trigger.expression)) || JSON.stringify(t.time_trigger))),
      h('td', {}, t.timezone || 'UTC'), h('td', {}, t.state || ''),
      h('td', {}, fmtTime(time(t.next_fire_time))),
      h('td', {}, t.last_workflow_instance_id ? '#' + t.last_workflow_instance_id + (t.last_run_status ? ' ' + t.last_run_status : '') : '–')))));
}

function versionsTable(versions, ov) {
  if (!versions.length) return h('p', { class: 'empty' }, '–');
  return h('table', { class: 'list', id: 'versions' },
    h('thead', {}, h('tr', {}, ['Version', 'Steps', 'By', 'Created'].map(x => h('th', {}, x)))),
    h('tbody', {}, versions.slice(0, 20).map(v => {
      const m = v.metadata || {};
      const num = m.workflow_version_id || v.workflow_version_id;
      return h('tr', {},
        h('td', {}, num, num === ov.active_version_id ? h('span', { class: 'tag' }, 'active') : null),
        h('td', {}, v.step_count ?? (v.workflow && v.workflow.steps ? v.workflow.steps.length : '')),
        h('td', {}, m.version_author || v.created_by || ''), h('td', {}, fmtTime(time(m.create_time || v.create_time))));
    })));
}

// ---- run page ----------------------------------------------------------------

/** runHref is the run page of a run ('latest' when run is unknown). */
function runHref(wf, iid, run) {
  return `#/runs/${encodeURIComponent(wf)}/${iid}/${run || 'latest'}`;
}

async function runPage(id, iid, runArg) {
  main.replaceChildren(h('p', { class: 'loading' }, 'Loading…'));
  // The run and its steps load at once; the page is drawn from the run
  // (header, DAG) and the steps colour it when they arrive.
  const runNo = runArg === 'latest' ? 0 : Number(runArg);
  const stepsLoad = runNo ? api.stepsLater(id, iid, runNo) : null;
  let run = await api.run(id, iid, runNo);
  performance.mark('run-fetched');
  let steps = [];
  let selected = null, showAll = false;
  const g = graph(run.workflow || {});
  let lay = layout(g);

  const head = h('header', { class: 'page-head' });
  const rollup = h('div', { class: 'rollup', id: 'rollup' });
  const dag = h('div', { class: 'dag-wrap', id: 'dag' });
  const stepTable = h('div', { id: 'steps' });
  const detail = h('aside', { class: 'detail', id: 'detail' }, h('p', { class: 'empty' }, 'Select a step in the DAG or the table.'));
  const tl = h('div', { id: 'timeline' });
  const live = h('span', { class: 'live', id: 'live' }, '');

  const byId = () => new Map(steps.map(s => [s.stepId, s]));
  const render = () => {
    const m = byId();
    head.replaceChildren(
      h('div', {},
        h('h1', {}, `${id} `, h('span', { class: 'muted' }, `#${run.instanceId} run ${run.runId}`), ' ', badge(run.status), ' ', live),
        h('p', { class: 'meta' }, `version ${run.versionId} · started ${fmtTime(run.start || run.created)} · elapsed ${elapsed(run.start, run.end)} · ${initiator(run.initiator)}`),
        incrementalRange(run.initiator)),
      actions());
    // The DAG is drawn once; each refresh recolours its nodes in place.
    if (!dag.firstChild) {
      dag.innerHTML = svg(g, lay, sid => (m.get(sid) || {}).status, sid => nodeExtra(m.get(sid)));
      dag.addEventListener('click', e => { const n = e.target.closest('.node'); if (n) select(n.dataset.step); });
      dag.addEventListener('keydown', e => { const n = e.target.closest('.node'); if (n && e.key === 'Enter') select(n.dataset.step); });
    } else {
      for (const el of dag.querySelectorAll('.node')) {
        const s = m.get(el.dataset.step);
        const st = (s && s.status) || 'NONE';
        el.setAttribute('class', el.getAttribute('class').replace(/st-\S+/, 'st-' + st));
        const sub = el.querySelector('.node-sub');
        const text = nodeExtra(s) || (s ? st.toLowerCase().replace(/_/g, ' ') : sub.textContent);
        if (sub.textContent !== text) sub.textContent = text;
      }
    }
    for (const el of dag.querySelectorAll('.node.selected')) el.classList.remove('selected');
    if (selected) { const el = dag.querySelector(`.node[data-step="${CSS.escape(selected)}"]`); if (el) el.classList.add('selected'); }
    renderRollup();
    // A long run lists its first rows; the rest on demand.
    const rows = showAll || steps.length <= STEP_ROWS ? steps : steps.slice(0, STEP_ROWS);
    stepTable.replaceChildren(h('table', { class: 'list' },
      h('thead', {}, h('tr', {}, ['Step', 'Type', 'Attempt', 'Status', 'Started', 'Elapsed', 'Message'].map(x => h('th', {}, x)))),
      h('tbody', {}, rows.map(s => h('tr', { class: s.stepId === selected ? 'selected' : '', 'data-step': s.stepId, onclick: () => select(s.stepId) },
        h('td', {}, s.stepId), h('td', {}, s.type || ''), h('td', {}, s.attemptId), h('td', {}, badge(s.status)),
        h('td', {}, fmtTime(s.start)), h('td', {}, elapsed(s.start, s.end)), h('td', { class: 'msg' }, s.message || ''))))),
      ...(rows.length < steps.length ? [h('button', { class: 'secondary', id: 'all-steps', onclick: () => { showAll = true; render(); } }, `Show all ${steps.length} steps`)] : []));
    renderTimeline();
  };
  const nodeExtra = s => {
    if (!s) return '';
    const st = s.status.toLowerCase().replace(/_/g, ' ');
    return s.end || s.start ? `${st} · ${elapsed(s.start, s.end)}` : st;
  };
  const renderRollup = () => {
    const r = run.rollup;
    if (!r || !r.total) { rollup.replaceChildren(); return; }
    const done = Object.entries(r.counts).filter(([k]) => !['RUNNING', 'CREATED', 'NOT_CREATED', 'INITIALIZED', 'STARTING', 'PAUSED', 'WAITING_FOR_SIGNALS', 'WAITING_FOR_PERMITS', 'EVALUATING_PARAMS', 'FINISHING'].includes(k)).reduce((a, [, n]) => a + n, 0);
    const segs = Object.entries(r.counts).filter(([, n]) => n > 0).sort();
    rollup.replaceChildren(
      h('div', { class: 'rollup-head' }, h('strong', {}, 'Leaf steps '), `${done} / ${r.total} done`),
      h('div', { class: 'bar', role: 'progressbar', 'aria-valuenow': done, 'aria-valuemax': r.total },
        segs.map(([k, n]) => h('span', { class: `seg st-${k}`, style: `width:${(100 * n / r.total).toFixed(3)}%`, title: `${k}: ${n}` }))),
      h('div', { class: 'legend' }, segs.map(([k, n]) => h('span', {}, badge(k), ' ', n))));
  };
  const renderTimeline = () => {
    const rows = run.timeline.map(e => ({ ...e, source: 'workflow' }));
    for (const s of steps) for (const e of s.timeline) rows.push({ ...e, source: s.stepId });
    rows.sort((a, b) => (a.time || 0) - (b.time || 0));
    const shown = rows.slice(-300);
    tl.replaceChildren(h('table', { class: 'list compact' },
      h('thead', {}, h('tr', {}, ['Time', 'Source', 'Event'].map(x => h('th', {}, x)))),
      h('tbody', {}, shown.map(e => h('tr', {}, h('td', {}, fmtTime(e.time)), h('td', {}, e.source),
        h('td', {}, e.type === 'STATUS' ? badge(e.status) : (e.message || e.action || e.type)))))),
    ...(rows.length > shown.length ? [h('p', { class: 'muted' }, `${rows.length - shown.length} earlier events not shown`)] : []));
  };
  const initiator = i => i ? (i.type || '') + (i.user ? ` by ${i.user}` : '') : '';
  // The snapshot range an incremental run covers (docs/incremental.md).
  const incrementalRange = i => {
    const r = i && i.incremental;
    if (!r) return null;
    return h('p', { class: 'meta', id: 'range' }, `${r.table}: snapshots (${r.from_snapshot_id}, ${r.to_snapshot_id}]` +
      (r.to_commit_time ? ` · committed up to ${fmtTime(new Date(r.to_commit_time))}` : ''));
  };

  const actions = () => {
    const box = h('div', { class: 'actions' });
    if (!terminalRun(run.status)) {
      box.append(h('button', { class: 'secondary', id: 'stop', onclick: () => confirmAction(`Stop ${id} #${iid}?`, 'Running steps are stopped; the run ends STOPPED.', async () => { await api.act(id, iid, 'stop'); refresh(); }) }, 'Stop'));
      box.append(h('button', { class: 'danger', id: 'kill', onclick: () => confirmAction(`Kill ${id} #${iid}?`, 'Running steps are killed; the run ends FAILED.', async () => { await api.act(id, iid, 'kill'); refresh(); }) }, 'Kill'));
    } else {
      box.append(h('button', { class: 'primary', id: 'restart', onclick: () => confirmAction(`Restart ${id} #${iid}?`, 'A new run restarts from the incomplete steps.', async () => {
        const r = await api.restart(id, iid); location.hash = `#/runs/${encodeURIComponent(id)}/${iid}/${r.runId}`;
      }) }, 'Restart'));
    }
    return box;
  };

  // nested links a composite step to the runs it started: a subworkflow's
  // child run, a while step's current iteration, a foreach step's
  // iterations (the newest 50, and any one by number).
  const nested = a => {
    const d = (a.runtimeState && a.runtimeState.data) || {};
    const type = (a.type || '').toLowerCase();
    const out = [];
    if (d.subworkflow_id) {
      const label = type === 'while' ? 'Current iteration' : 'Child run';
      out.push(h('h3', {}, label), h('p', {}, h('a', { class: 'child-run',
        href: runHref(d.subworkflow_id, d.subworkflow_instance_id, d.subworkflow_run_id) },
        `${d.subworkflow_id} #${d.subworkflow_instance_id}`), d.subworkflow_status ? [' ', badge(d.subworkflow_status)] : ''));
    }
    if (type === 'foreach') {
      const fid = `${id}:${iid}:${a.stepId}`;
      const list = h('div', { class: 'iterations' }, h('p', { class: 'muted' }, 'Loading iterations…'));
      const jump = h('input', { type: 'number', min: 1, placeholder: 'iteration', 'aria-label': 'iteration number', size: 8 });
      const go = h('button', { class: 'secondary', onclick: () => { if (jump.value) location.hash = runHref(fid, jump.value, 'latest'); } }, 'Open');
      out.push(h('h3', {}, 'Iterations'), h('div', { class: 'start-box' }, jump, go), list);
      api.instances(fid).then(runs => {
        list.replaceChildren(runs.length ? h('table', { class: 'list compact' },
          h('tbody', {}, runs.map(r => h('tr', {}, h('td', {}, h('a', { class: 'iteration', href: runHref(fid, r.instanceId, r.runId) }, `#${r.instanceId}`)),
            h('td', {}, badge(r.status)), h('td', {}, `run ${r.runId}`), h('td', {}, elapsed(r.start, r.end))))))
          : h('p', { class: 'empty' }, 'No iteration started yet.'));
      }, e => list.replaceChildren(errorBox(e)));
    }
    return out;
  };

  let shownKey = '';
  const select = async stepId => {
    selected = stepId;
    render();
    const s = byId().get(stepId);
    shownKey = s ? `${s.attemptId}:${s.status}` : '';
    if (!s) { detail.replaceChildren(h('h2', {}, stepId), h('p', { class: 'empty' }, 'Not started in this run.')); return; }
    const attemptSel = h('select', { 'aria-label': 'attempt', id: 'attempt' },
      Array.from({ length: s.attemptId }, (_, i) => h('option', { value: i + 1, selected: i + 1 === s.attemptId }, `attempt ${i + 1}`)));
    const body = h('div', {});
    const show = a => body.replaceChildren(...[
      h('p', {}, badge(a.status), ` ${a.type || ''} · started ${fmtTime(a.start)} · elapsed ${elapsed(a.start, a.end)}`),
      a.message ? h('p', { class: 'msg' }, a.message) : null,
      h('h3', {}, 'Params'), json(a.params), h('h3', {}, 'Outputs'), json(a.outputs),
      h('h3', {}, 'Retries'), json(a.retry),
      h('h3', {}, 'Errors and log'), h('ul', { class: 'events' }, a.timeline.filter(e => e.type !== 'STATUS').map(e => h('li', {}, fmtTime(e.time), ' ', e.message || e.action || e.type))),
      ...nested(a),
      h('h3', {}, 'Runtime state'), json(a.runtimeState)].filter(Boolean));
    attemptSel.addEventListener('change', async () => { try { show(await api.attempt(id, iid, run.runId, stepId, attemptSel.value)); } catch (e) { body.replaceChildren(errorBox(e)); } });
    const acts = h('div', { class: 'actions' });
    if (terminalRun(run.status)) {
      acts.append(h('button', { class: 'secondary', id: 'restart-from', onclick: () => confirmAction(`Restart ${id} #${iid} from ${stepId}?`, 'A new run starts from this step.', async () => {
        const r = await api.restart(id, iid, stepId); location.hash = `#/runs/${encodeURIComponent(id)}/${iid}/${r.runId}`;
      }) }, 'Restart from here'));
    }
    if (s.status === 'PAUSED') {
      acts.append(h('button', { class: 'primary', id: 'resume', onclick: () => confirmAction(`Resume ${stepId}?`, 'The step paused at a breakpoint continues.', async () => { await api.resume(id, iid, run.runId, stepId, s.attemptId); refresh(); }) }, 'Resume breakpoint'));
    }
    detail.replaceChildren(h('h2', {}, stepId), attemptSel, acts, body);
    show(s);
  };

  let pending = null, closed = false;
  const refresh = () => {
    if (pending || closed) return;
    pending = setTimeout(async () => {
      try {
        [run, steps] = await Promise.all([api.run(id, iid, run.runId), api.steps(id, iid, run.runId)]);
        render();
        // The selected step's details follow its newest attempt and status.
        const s = selected && byId().get(selected);
        if (s && `${s.attemptId}:${s.status}` !== shownKey) select(selected);
      } catch { /* the next event or poll retries */ }
      pending = null;
    }, 250);
  };
  // Live: the event stream where the server has one, else polling.
  let poll = null;
  const es = api.events(id, iid, refresh, src => {
    if (src.readyState === EventSource.CLOSED && !poll) poll = setInterval(() => { if (!terminalRun(run.status)) refresh(); }, 2000);
    live.textContent = 'polling';
  });
  es.onopen = () => { live.textContent = '● live'; };
  const tick = setInterval(() => { if (!terminalRun(run.status)) refresh(); }, 5000);
  cleanup = () => { closed = true; es.close(); clearInterval(tick); if (poll) clearInterval(poll); };

  // A nested run (foreach or while iteration, subworkflow child) leads
  // back to the step of its parent run that started it.
  const parent = run.initiator && run.initiator.parent;
  const crumbs = parent && parent.workflow_id
    ? h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Workflows'), ' / ',
      h('a', { class: 'parent-run', href: runHref(parent.workflow_id, parent.instance_id, parent.run_id) },
        `${parent.workflow_id} #${parent.instance_id}`), ` / step ${parent.step_id}`,
      parent.iteration ? ` / iteration ${parent.iteration}` : '', ` / ${id} #${iid}`)
    : h('nav', { class: 'crumbs' }, h('a', { href: '#/' }, 'Workflows'), ' / ', h('a', { href: `#/workflows/${encodeURIComponent(id)}` }, id), ` / #${iid}`);
  main.replaceChildren(
    crumbs,
    head, rollup,
    h('div', { class: 'run-grid' },
      h('div', {}, h('section', {}, h('h2', {}, 'DAG'), dag), h('section', {}, h('h2', {}, 'Steps'), stepTable),
        h('section', {}, h('h2', {}, 'Timeline'), tl)),
      detail));
  render();
  document.body.dataset.ready = 'run';
  // The first frame with the run drawn, and the one with its steps (read
  // by the browser tests).
  const frame = name => requestAnimationFrame(() => setTimeout(() => { window[name] = performance.now(); }));
  frame('maestroRunPaint');
  performance.mark('run-rendered');
  // Parse the steps once the first frame is out.
  await new Promise(resolve => requestAnimationFrame(() => setTimeout(resolve)));
  steps = await (stepsLoad || api.stepsLater(id, iid, run.runId))();
  performance.mark('steps-fetched');
  // Steps run but missing from the definition (none, normally) still show.
  const known = new Set(g.nodes.map(n => n.id));
  const extra = steps.filter(st => !known.has(st.stepId));
  if (extra.length) {
    for (const st of extra) g.nodes.push({ id: st.stepId, kind: 'step', type: st.type });
    lay = layout(g);
    dag.replaceChildren();
  }
  render();
  document.body.dataset.steps = 'loaded';
  performance.mark('steps-rendered');
  frame('maestroStepsPaint');
}

// ---- router ------------------------------------------------------------------

async function route() {
  cleanup();
  cleanup = () => {};
  delete document.body.dataset.ready;
  delete document.body.dataset.steps;
  delete document.body.dataset.backfill;
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  try {
    if (parts[0] === 'workflows' && parts[1]) await workflowPage(parts[1]);
    else if (parts[0] === 'runs' && parts.length >= 3) await runPage(parts[1], Number(parts[2]), parts[3] || 'latest');
    else if (parts[0] === 'backfills' && parts[1]) await backfillPage(parts[1]);
    else await workflowsPage();
    if (!document.body.dataset.ready) document.body.dataset.ready = parts[0] || 'workflows';
  } catch (e) {
    main.replaceChildren(errorBox(e));
    document.body.dataset.ready = 'error';
  }
}

const userInput = document.getElementById('user');
userInput.value = currentUser();
userInput.addEventListener('change', () => setUser(userInput.value.trim()));
window.addEventListener('hashchange', route);
route();

export { esc };
