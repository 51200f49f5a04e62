// An app's Jobs (decisions §22): its scheduled commands, a form to add one, run now, the last runs of a job and a run's log (followed while it runs).
import { call, streamText } from './api.js';
import { badge, confirmAction, duration, h, replaceKeepingFocus, when } from './dom.js';

/**
 * Fills `panel`; `page` is `{id, ctx, dep()}` (the app page's). The jobs and the shown job's runs
 * are polled while the page is open.
 */
export function renderJobsTab(panel, page) {
  const { id, ctx } = page;
  const rows = h('tbody', { id: 'job-rows' });
  const error = h('p', { class: 'panel-error', role: 'alert' });
  const field = (name, props = {}) => h('input', { name, id: `job-${name}`, ...props });
  const name = field('name', { required: true, maxlength: '100', placeholder: 'nightly cleanup', autocomplete: 'off' });
  const schedule = field('schedule', { required: true, placeholder: '0 3 * * *', autocomplete: 'off' });
  const timezone = field('timezone', { value: 'UTC', autocomplete: 'off' });
  const timeout = field('timeout', { type: 'number', min: '1', max: '86400', value: '3600' });
  const concurrency = h('select', { name: 'concurrency', id: 'job-concurrency' }, h('option', { value: 'forbid', text: 'skip a due time while a run goes' }), h('option', { value: 'allow', text: 'run alongside' }));
  const command = h('textarea', { name: 'command', id: 'job-command', rows: '3', required: true, placeholder: 'sh\n-c\necho hello' });
  const form = h('form', { id: 'job-form' },
    h('div', { class: 'grid' },
      h('label', {}, 'Name', name),
      h('label', {}, 'Schedule (cron, or @hourly, @daily, @weekly, @monthly)', schedule),
      h('label', {}, 'Time zone', timezone),
      h('label', {}, 'Timeout (seconds)', timeout),
      h('label', {}, 'While a run goes', concurrency)),
    h('label', {}, 'Command: one argument per line (no shell runs it)', command),
    h('button', { class: 'primary', text: 'Add job' }));
  const runsTitle = h('h3', { id: 'job-runs-title', text: 'Runs', hidden: true });
  const runRows = h('tbody', { id: 'job-run-rows' });
  const runsTable = h('table', { class: 'stack', hidden: true }, h('thead', {}, h('tr', {}, ['Run', 'Status', 'Trigger', 'Exit code', 'Started', 'Took', 'Note'].map((t) => h('th', { scope: 'col', text: t })))), runRows);
  const logTitle = h('h3', { id: 'job-log-title', text: 'Run log', hidden: true });
  const log = h('pre', { class: 'log', id: 'job-log', tabindex: '0', 'aria-label': 'Run log', hidden: true });
  panel.append(h('section', { class: 'card', id: 'jobs', 'aria-labelledby': 'jobs-title' },
    h('h2', { id: 'jobs-title', text: 'Jobs' }),
    h('p', { class: 'hint', text: "Each run is one container of the live release's image with the app's variables and linked databases, never reachable from outside. A stopped app runs no job; the last 100 runs of each job are kept." }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Job', 'Schedule', 'Command', 'Next run', ''].map((t) => h('th', { scope: 'col', text: t })))), rows),
    form, runsTitle, runsTable, logTitle, log, error));

  const run = async (fn) => {
    error.textContent = '';
    try { await fn(); } catch (err) { if (err.name !== 'AbortError') error.textContent = err.message; }
  };

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    run(async () => {
      const argv = command.value.split('\n').map((line) => line.replace(/\r$/, '')).filter((line, i, all) => line !== '' || i < all.length - 1);
      await call('POST', `/deployments/${id}/jobs`, {
        name: name.value.trim(), schedule: schedule.value.trim(), timezone: timezone.value.trim() || 'UTC',
        timeout_seconds: Number(timeout.value), concurrency: concurrency.value, command: argv,
      });
      form.reset();
      await load(ctx.signal);
    });
  });

  let shownJob = null;
  let logController = null;
  ctx.signal.addEventListener('abort', () => logController?.abort(), { once: true });

  async function showLog(job, r) {
    logController?.abort();
    logController = new AbortController();
    logTitle.hidden = false;
    log.hidden = false;
    logTitle.textContent = `Log of run ${r.id.slice(0, 8)} of ${job.name}`;
    log.textContent = '';
    const follow = r.status === 'running' ? '?follow=true' : '';
    await streamText(`/deployments/${id}/jobs/${job.id}/runs/${r.id}/logs${follow}`, (text) => log.append(text), logController.signal);
  }

  function runRow(job, r) {
    const open = h('button', { type: 'button', text: r.id.slice(0, 8), 'aria-label': `Log of run ${r.id.slice(0, 8)}`, dataset: { key: r.id } });
    open.addEventListener('click', () => run(() => showLog(job, r)));
    return h('tr', {},
      h('td', { 'data-label': 'Run' }, open),
      h('td', { 'data-label': 'Status' }, badge(r.status)),
      h('td', { 'data-label': 'Trigger', text: r.trigger }),
      h('td', { 'data-label': 'Exit code', text: r.exit_code === null ? '' : String(r.exit_code) }),
      h('td', { 'data-label': 'Started' }, h('time', { datetime: r.started_at, title: new Date(r.started_at).toLocaleString(), text: when(r.started_at) })),
      h('td', { 'data-label': 'Took', text: r.finished_at ? duration(r.started_at, r.finished_at) : '' }),
      h('td', { 'data-label': 'Note', text: r.message || '' }));
  }

  async function loadRuns(signal) {
    if (shownJob === null) return;
    const job = shownJob;
    const runs = await call('GET', `/deployments/${id}/jobs/${job.id}/runs`, undefined, { signal });
    runsTitle.hidden = false;
    runsTable.hidden = false;
    runsTitle.textContent = `Runs of ${job.name}`;
    replaceKeepingFocus(runRows, ...runs.map((r) => runRow(job, r)));
    if (runs.length === 0) runRows.replaceChildren(h('tr', {}, h('td', { colspan: '7', class: 'empty', text: 'No run yet.' })));
  }

  function row(job) {
    const runNow = h('button', { type: 'button', text: 'Run now', 'aria-label': `Run ${job.name} now`, dataset: { key: `run-${job.id}` } });
    runNow.addEventListener('click', () => run(async () => {
      const started = await call('POST', `/deployments/${id}/jobs/${job.id}/runs`);
      shownJob = job;
      await loadRuns(ctx.signal);
      if (started.status === 'running') await showLog(job, started);
      else error.textContent = `Skipped: ${started.message || ''}`;
    }));
    const runs = h('button', { type: 'button', text: 'Runs', 'aria-label': `Runs of ${job.name}`, dataset: { key: `runs-${job.id}` } });
    runs.addEventListener('click', () => run(async () => { shownJob = job; await loadRuns(ctx.signal); }));
    const remove = h('button', { type: 'button', class: 'danger', text: 'Delete', 'aria-label': `Delete job ${job.name}` });
    remove.addEventListener('click', () => run(async () => {
      if (!(await confirmAction({ title: `Delete job ${job.name}?`, body: 'Its schedule and its runs with their logs are removed; a run going now ends on its own.', confirm: 'Delete' }))) return;
      await call('DELETE', `/deployments/${id}/jobs/${job.id}`);
      if (shownJob?.id === job.id) { shownJob = null; runsTitle.hidden = true; runsTable.hidden = true; logController?.abort(); log.hidden = true; logTitle.hidden = true; }
      await load(ctx.signal);
    }));
    return h('tr', { dataset: { key: job.id } },
      h('td', { 'data-label': 'Job' }, h('strong', { text: job.name })),
      h('td', { 'data-label': 'Schedule' }, h('code', { text: job.schedule }), job.timezone === 'UTC' ? '' : ` (${job.timezone})`),
      h('td', { 'data-label': 'Command' }, h('code', { text: job.command.join(' ') })),
      h('td', { 'data-label': 'Next run' }, job.next_run_at ? h('time', { datetime: job.next_run_at, title: new Date(job.next_run_at).toLocaleString(), text: new Date(job.next_run_at).toLocaleString() }) : ''),
      h('td', { class: 'actions' }, runNow, runs, remove));
  }

  async function load(signal) {
    const jobs = await call('GET', `/deployments/${id}/jobs`, undefined, { signal });
    replaceKeepingFocus(rows, ...jobs.map(row));
    if (jobs.length === 0) rows.replaceChildren(h('tr', {}, h('td', { colspan: '5', class: 'empty', text: 'No jobs: add one below.' })));
    await loadRuns(signal);
  }
  ctx.poll(4000, (signal) => run(() => load(signal)));
  return { update: () => undefined };
}
