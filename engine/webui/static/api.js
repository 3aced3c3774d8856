// api.js: the one place the UI talks to the REST API and reads its answers.
// It reads both this implementation's first shapes (RFC 3339 times, wrapped
// answers) and Maestro's (epoch milliseconds, flat answers, PaginationResult).

const BASE = '/api/v3';

/** The caller named in the `user` header (maestro dev); empty: anonymous. */
export function currentUser() { return localStorage.getItem('maestro.user') || ''; }
export function setUser(u) { localStorage.setItem('maestro.user', u); }

/** ApiError carries Maestro's {status, message, errors} error body. */
export class ApiError extends Error {
  constructor(httpStatus, body) {
    super(body && body.message ? body.message : `HTTP ${httpStatus}`);
    this.httpStatus = httpStatus;
    this.errors = (body && body.errors) || [];
  }
}

/** send makes a request and returns its status and body text. */
async function send(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (currentUser()) headers.user = currentUser();
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const resp = await fetch(BASE + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { ok: resp.ok, status: resp.status, text: await resp.text() };
}

/** decode parses an answer; an error answer throws ApiError. */
function decode({ ok, status, text }) {
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = { message: text }; }
  if (!ok) throw new ApiError(status, data);
  return data;
}

async function call(method, path, body) { return decode(await send(method, path, body)); }

const enc = encodeURIComponent;

/** time reads epoch milliseconds or an RFC 3339 string; null when unset. */
export function time(v) {
  if (v === null || v === undefined || v === '') return null;
  const d = typeof v === 'number' ? new Date(v) : new Date(v);
  return isNaN(d.getTime()) ? null : d;
}

/** items reads a listing: an array, {elements}, {items} or {key}. */
function items(data, key) {
  if (Array.isArray(data)) return data;
  if (!data) return [];
  return data[key] || data.elements || data.items || [];
}

function count(v) { return typeof v === 'number' ? v : (v && v.cnt) || 0; }

function timeline(t) {
  const evs = Array.isArray(t) ? t : (t && t.timeline_events) || [];
  return evs.map(e => ({ ...e, time: time(e.timestamp) }));
}

export function normRun(r) {
  const ov = r.runtime_overview || {};
  const counts = {};
  for (const [k, v] of Object.entries(ov.step_overview || {})) counts[k] = count(v);
  let rollup = null;
  if (ov.rollup_overview) {
    rollup = { total: ov.rollup_overview.total_leaf_count || 0, counts: {} };
    for (const [k, v] of Object.entries(ov.rollup_overview.overview || {})) rollup.counts[k] = count(v);
  }
  return {
    workflowId: r.workflow_id, instanceId: r.workflow_instance_id, runId: r.workflow_run_id,
    versionId: r.workflow_version_id, status: r.status, initiator: r.initiator,
    created: time(r.create_time), start: time(r.start_time), end: time(r.end_time),
    runParams: r.run_params, params: r.params, timeline: timeline(r.timeline),
    counts, totalSteps: ov.total_step_count || 0, rollup, workflow: r.runtime_workflow || null, raw: r,
  };
}

export function normStep(s) {
  // Maestro keeps the status and its times in runtime_state.
  const rs = (s.runtime_state && typeof s.runtime_state === 'object') ? s.runtime_state : {};
  return {
    stepId: s.step_id, attemptId: s.step_attempt_id, type: s.step_type, runId: s.workflow_run_id,
    status: rs.status || s.status,
    start: time(rs.start_time || s.start_time),
    end: time(rs.end_time || s.end_time),
    message: typeof rs.message === 'string' ? rs.message : '',
    params: s.params, outputs: s.outputs, retry: s.step_retry, runtimeState: s.runtime_state,
    timeline: timeline(s.timeline), raw: s,
  };
}

export function normVersion(v) {
  if (v.workflow_definition) return { ...normVersion(v.workflow_definition), created: v.created };
  const m = v.metadata || {};
  return {
    workflowId: m.workflow_id || v.workflow_id, versionId: m.workflow_version_id || v.workflow_version_id,
    isActive: !!v.is_active, createdBy: m.version_author || v.created_by, created: time(m.create_time || v.create_time),
    workflow: v.workflow || v.definition || {}, raw: v,
  };
}

function normStart(r) {
  const inst = r.workflow_instance || r;
  return { status: r.status, workflowId: inst.workflow_id, instanceId: inst.workflow_instance_id, runId: inst.workflow_run_id };
}

export const api = {
  async workflows(q) {
    const d = await call('GET', '/workflows?limit=100' + (q ? '&q=' + enc(q) : ''));
    return items(d, 'items');
  },
  async overview(id) { return call('GET', `/workflows/${enc(id)}/overview`); },
  async version(id, v) { return normVersion(await call('GET', `/workflows/${enc(id)}/versions/${enc(v)}`)); },
  async versions(id) { return items(await call('GET', `/workflows/${enc(id)}/versions`), 'versions'); },
  async triggers(id) { return items(await call('GET', `/workflows/${enc(id)}/time-triggers`), 'time_triggers'); },
  async instances(id) { return items(await call('GET', `/workflows/${enc(id)}/instances?limit=50`), 'items').map(normRun); },
  async run(id, iid, run) {
    return normRun(await call('GET', `/workflows/${enc(id)}/instances/${iid}` + (run ? `/runs/${run}` : '')));
  },
  async steps(id, iid, run) { return api.stepsLater(id, iid, run)(); },
  /**
   * stepsLater fetches a run's steps at once but parses them only when the
   * returned function is called: a page can draw first, then parse.
   */
  stepsLater(id, iid, run) {
    const headers = { Accept: 'application/json' };
    if (currentUser()) headers.user = currentUser();
    // Only the headers are awaited here; the body is read when asked for.
    const resp = fetch(`${BASE}/workflows/${enc(id)}/instances/${iid}/runs/${run}/steps`, { headers });
    resp.catch(() => {}); // reported when the steps are asked for
    return async () => {
      const r = await resp;
      return items(decode({ ok: r.ok, status: r.status, text: await r.text() }), 'steps').map(normStep);
    };
  },
  async attempt(id, iid, run, step, attempt) {
    return normStep(await call('GET', `/workflows/${enc(id)}/instances/${iid}/runs/${run}/steps/${enc(step)}/attempts/${attempt}`));
  },
  async start(id, runParams) {
    const body = {};
    if (runParams && Object.keys(runParams).length) body.run_params = runParams;
    return normStart(await call('POST', `/workflows/${enc(id)}/versions/default/actions/start`, body));
  },
  async act(id, iid, action) { return call('PUT', `/workflows/${enc(id)}/instances/${iid}/actions/${action}`); },
  async restart(id, iid, fromStep) {
    const body = fromStep ? { restart_config: { restart_policy: 'RESTART_FROM_SPECIFIC',
      restart_path: [{ workflow_id: id, instance_id: iid, step_id: fromStep }] } } : {};
    return normStart(await call('POST', `/workflows/${enc(id)}/instances/${iid}/actions/restart`, body));
  },
  async resume(id, iid, run, step, attempt) {
    return call('PUT', `/workflows/steps/breakpoints/${enc(id)}/instances/${iid}/runs/${run}/steps/${enc(step)}/attempts/${attempt}/actions/resume`);
  },
  /** backfill reads a backfill with its partitions and downstream runs. */
  async backfill(id) { return call('GET', `/backfills/${enc(id)}`); },
  /** backfills lists a workflow's backfills, newest first. */
  /** watermarks reads an incremental workflow's watermarks and the ranges of its latest runs. */
  async watermarks(id) { return call('GET', `/workflows/${enc(id)}/watermarks`); },
  async backfills(id) { return items(await call('GET', `/workflows/${enc(id)}/backfills`), 'backfills'); },
  /** actOnBackfill pauses, resumes, cancels or retries a backfill. */
  async actOnBackfill(id, action) { return call('POST', `/backfills/${enc(id)}/actions/${enc(action)}`); },
  /** events opens the live stream of a run's events; onEvent gets each. */
  events(id, iid, onEvent, onError) {
    const es = new EventSource(`${BASE}/events?workflow_id=${enc(id)}&workflow_instance_id=${iid}`);
    es.onmessage = e => { try { onEvent(JSON.parse(e.data)); } catch { /* a malformed event is skipped */ } };
    es.onerror = () => onError && onError(es);
    return es;
  },
};

/** Terminal statuses. */
const TERMINAL_RUN = new Set(['SUCCEEDED', 'FAILED', 'STOPPED', 'TIMED_OUT']);
export function terminalRun(s) { return TERMINAL_RUN.has(s); }
