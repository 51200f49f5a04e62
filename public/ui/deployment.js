// One deployment's page: status and actions (as the state table allows), metrics, builds with the live build log, runtime logs.
import { ApiError, call, streamText } from './api.js';
import { badge, bytes, confirmAction, duration, h, replaceKeepingFocus, when } from './dom.js';
import { sparkline } from './charts.js';
import { renderSettings } from './settings.js';

/**
 * Which actions the state table (decisions §4) lets a deployment take now. Where the table allows an
 * action only as a no-op (stop when stopped) or only when a release exists, the button says so by
 * being disabled.
 */
export function allowedActions(dep) {
  const live = dep.live_build_id != null;
  const s = dep.status;
  return {
    deploy: true,
    cancel: s === 'building',
    stop: s === 'building' || s === 'running' || (s === 'failed' && live),
    restart: s === 'running' || ((s === 'stopped' || s === 'failed') && live),
    rollback: s !== 'pending',
    remove: true,
  };
}

/** A `<pre>` that behaves like a terminal: it follows new output unless the reader scrolled up. */
function terminal(pre) {
  return {
    clear() { pre.textContent = ''; },
    append(text) {
      const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
      pre.append(text);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    },
  };
}

export function renderDeployment(view, id, ctx) {
  let dep = null;
  let builds = [];
  const title = h('h1', { id: 'detail-title', text: 'Loading…' });
  const status = h('span', { id: 'status' });
  const link = h('a', { id: 'app-url', rel: 'noopener noreferrer', target: '_blank' });
  const meta = h('p', { class: 'muted', id: 'meta' });
  const buttons = {
    deploy: h('button', { type: 'button', class: 'primary', text: 'Deploy' }),
    cancel: h('button', { type: 'button', text: 'Cancel build' }),
    stop: h('button', { type: 'button', text: 'Stop' }),
    restart: h('button', { type: 'button', text: 'Restart' }),
    remove: h('button', { type: 'button', class: 'danger', text: 'Delete' }),
  };
  const note = h('p', { class: 'note', id: 'action-note', role: 'status', 'aria-live': 'polite' });
  const head = h('section', { class: 'card' },
    h('p', { class: 'muted' }, h('a', { href: '#/', text: '← Apps' })),
    h('div', { class: 'spread' }, title, status),
    h('p', {}, link), meta,
    h('div', { class: 'actions', id: 'actions' }, Object.values(buttons)), note);

  const metricsBox = h('div', { class: 'charts', id: 'metrics' });
  const metricsNote = h('p', { class: 'muted', id: 'metrics-note' });
  const buildRows = h('tbody', { id: 'build-rows' });
  const logTitle = h('h3', { id: 'log-title', text: 'Build log' });
  const buildLog = h('pre', { class: 'log', id: 'build-log', tabindex: '0', 'aria-label': 'Build log', 'aria-live': 'off' });
  const runtimeLog = h('pre', { class: 'log', id: 'runtime-log', tabindex: '0', 'aria-label': 'Runtime log' });
  const runtimeNote = h('p', { class: 'muted', id: 'runtime-note' });
  const followButton = h('button', { type: 'button', text: 'Pause' });
  const settings = h('div', { class: 'grid', id: 'settings' });
  view.append(
    head,
    h('section', { class: 'card', 'aria-labelledby': 'metrics-title' }, h('h2', { id: 'metrics-title', text: 'Live metrics' }), metricsNote, metricsBox),
    h('section', { class: 'card', 'aria-labelledby': 'builds-title' },
      h('h2', { id: 'builds-title', text: 'Builds' }),
      h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Build', 'Status', 'Commit', 'Started', 'Took', ''].map((t) => h('th', { scope: 'col', text: t })))), buildRows),
      logTitle, buildLog),
    h('section', { class: 'card', 'aria-labelledby': 'runtime-title' },
      h('div', { class: 'spread' }, h('h2', { id: 'runtime-title', text: 'Runtime logs' }), followButton), runtimeNote, runtimeLog),
    settings,
  );

  // ---- actions -------------------------------------------------------------------------------
  const act = (fn) => () => ctx.run(async () => {
    note.textContent = '';
    await fn();
    await refresh(ctx.signal);
  });
  buttons.deploy.addEventListener('click', act(async () => {
    const build = await call('POST', `/deployments/${id}/deploy`);
    note.textContent = `Build ${build.id.slice(0, 8)} started.`;
    followLatest = true;
  }));
  buttons.cancel.addEventListener('click', act(async () => {
    if (!(await confirmAction({ title: 'Cancel the build?', body: `The build in flight is stopped; ${dep.live_build_id ? 'the live release keeps serving' : 'nothing is serving yet'}.`, confirm: 'Cancel build' }))) return;
    note.textContent = (await call('POST', `/deployments/${id}/cancel`)).message;
  }));
  buttons.stop.addEventListener('click', act(async () => {
    if (!(await confirmAction({ title: `Stop ${dep.name}?`, body: `${dep.url || dep.subdomain} will answer 503 until you restart or deploy it.${dep.status === 'building' ? ' The build in flight is cancelled.' : ''}`, confirm: 'Stop' }))) return;
    note.textContent = (await call('POST', `/deployments/${id}/stop`)).message;
  }));
  buttons.restart.addEventListener('click', act(async () => {
    if (!(await confirmAction({ title: `Restart ${dep.name}?`, body: 'A new container of the live build starts with the current environment; traffic moves to it once it is healthy.', confirm: 'Restart', danger: false }))) return;
    note.textContent = (await call('POST', `/deployments/${id}/restart`)).message;
  }));
  buttons.remove.addEventListener('click', () => ctx.run(async () => {
    if (!(await confirmAction({ title: `Delete ${dep.name}?`, body: `Its containers, images, uploaded sources, logs and volumes are removed, and ${dep.subdomain} becomes free. This cannot be undone.`, confirm: 'Delete' }))) return;
    await call('DELETE', `/deployments/${id}`);
    location.hash = '#/';
  }));
  async function rollback(build) {
    if (!(await confirmAction({ title: `Roll back to build ${build.id.slice(0, 8)}?`, body: `Its image is started again with the configuration it was released with; traffic moves to it once it is healthy.${dep.status === 'building' ? ' The build in flight is cancelled.' : ''}`, confirm: 'Roll back', danger: false }))) return;
    note.textContent = (await call('POST', `/deployments/${id}/rollback`, { build_id: build.id })).message;
  }

  // ---- build log: the newest build's, streaming while it builds ----------------------------------
  let followLatest = true;
  let shownBuild = null;
  let logController = null;
  const buildTerm = terminal(buildLog);
  function showBuildLog(build) {
    if (shownBuild === build.id) return;
    shownBuild = build.id;
    logController?.abort();
    logController = new AbortController();
    const signal = AbortSignal.any([ctx.signal, logController.signal]);
    buildTerm.clear();
    logTitle.textContent = `Build log of ${build.id.slice(0, 8)}`;
    for (const tr of buildRows.children) tr.classList.toggle('selected', tr.dataset.id === build.id);
    streamText(`/deployments/${id}/builds/${build.id}/logs?follow=true`, (text) => buildTerm.append(text), signal)
      .catch((err) => { if (err.name !== 'AbortError') buildTerm.append(`\n[${err.message}]\n`); });
  }

  // ---- runtime logs: the live container's, followed -------------------------------------------
  let runtimeKey = null;
  let runtimeController = null;
  let paused = false;
  const runtimeTerm = terminal(runtimeLog);
  followButton.addEventListener('click', () => {
    paused = !paused;
    followButton.textContent = paused ? 'Follow' : 'Pause';
    runtimeKey = null;
    if (paused) { runtimeController?.abort(); runtimeNote.textContent = 'Paused.'; } else syncRuntimeLog();
  });
  function syncRuntimeLog() {
    const key = dep && dep.status === 'running' && dep.live_build_id ? `${dep.live_build_id}` : null;
    if (paused || key === runtimeKey) return;
    runtimeKey = key;
    runtimeController?.abort();
    if (key === null) {
      runtimeNote.textContent = dep && dep.live_build_id ? `Not running (${dep.status}); the last output is below.` : 'No container has run yet.';
      if (dep && dep.live_build_id && runtimeLog.textContent === '') {
        call('GET', `/deployments/${id}/logs?tail=200`, undefined, { signal: ctx.signal }).then((text) => runtimeTerm.append(text), () => {});
      }
      return;
    }
    runtimeController = new AbortController();
    runtimeTerm.clear();
    runtimeNote.textContent = 'Following the live container (last 200 lines, then new output).';
    streamText(`/deployments/${id}/logs?tail=200&follow=true`, (text) => runtimeTerm.append(text), AbortSignal.any([ctx.signal, runtimeController.signal]))
      .catch((err) => { if (err.name !== 'AbortError') runtimeNote.textContent = err.message; })
      .finally(() => { if (runtimeKey === key) runtimeKey = null; });
  }

  // ---- metrics: small live charts ------------------------------------------------------------
  const samples = { cpu: [], mem: [], rx: [], tx: [] };
  const cpuChart = sparkline('CPU use over the last minutes', 100);
  let memChart = null;
  const netChart = sparkline('Network received and sent per second');
  const cpuValue = h('div', { class: 'value', id: 'metric-cpu' });
  const memValue = h('div', { class: 'value', id: 'metric-memory' });
  const memBar = h('progress', { 'aria-label': 'Memory used of the limit' });
  const netValue = h('div', { class: 'value', id: 'metric-network' });
  const restarts = h('p', { class: 'muted', id: 'metric-restarts' });
  let lastNet = null;
  const memSlot = h('div');
  metricsBox.append(
    h('div', { class: 'chart' }, h('div', { class: 'muted', text: 'CPU' }), cpuValue, cpuChart.svg),
    h('div', { class: 'chart' }, h('div', { class: 'muted', text: 'Memory' }), memValue, memBar, memSlot),
    h('div', { class: 'chart' }, h('div', { class: 'muted' }, 'Network ', h('span', { class: 'legend-rx', text: 'in' }), ' / ', h('span', { class: 'legend-tx', text: 'out' })), netValue, netChart.svg),
  );
  metricsBox.after(restarts);
  metricsBox.hidden = true;
  async function sampleMetrics(signal) {
    if (!dep || dep.status !== 'running') {
      metricsBox.hidden = true;
      metricsNote.textContent = 'Metrics appear while the app runs.';
      restarts.textContent = '';
      return;
    }
    let m;
    try {
      m = await call('GET', `/deployments/${id}/metrics`, undefined, { signal });
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) { metricsBox.hidden = true; metricsNote.textContent = err.message; return; }
      throw err;
    }
    const now = Date.now();
    const push = (list, v) => { list.push(v); if (list.length > 40) list.shift(); };
    push(samples.cpu, m.cpu_percent);
    push(samples.mem, m.memory_bytes);
    if (lastNet) {
      const dt = Math.max(0.001, (now - lastNet.at) / 1000);
      push(samples.rx, Math.max(0, (m.network_rx_bytes - lastNet.rx) / dt));
      push(samples.tx, Math.max(0, (m.network_tx_bytes - lastNet.tx) / dt));
    }
    lastNet = { at: now, rx: m.network_rx_bytes, tx: m.network_tx_bytes };
    if (!memChart) { memChart = sparkline('Memory use against its limit', m.memory_limit_bytes); memSlot.append(memChart.svg); }
    cpuValue.textContent = `${m.cpu_percent.toFixed(1)} %`;
    memValue.textContent = `${bytes(m.memory_bytes)} of ${bytes(m.memory_limit_bytes)}`;
    memBar.max = m.memory_limit_bytes;
    memBar.value = m.memory_bytes;
    netValue.textContent = samples.rx.length ? `${bytes(Math.round(samples.rx.at(-1)))}/s in, ${bytes(Math.round(samples.tx.at(-1)))}/s out` : `${bytes(m.network_rx_bytes)} in, ${bytes(m.network_tx_bytes)} out`;
    cpuChart.update(samples.cpu);
    memChart.update(samples.mem);
    netChart.update(samples.rx, samples.tx);
    restarts.textContent = `Up since ${new Date(m.started_at).toLocaleString()}; ${m.restarts === 0 ? 'no crash restarts' : `restarted ${m.restarts} time${m.restarts === 1 ? '' : 's'} after crashes`}.`;
    metricsNote.textContent = '';
    metricsBox.hidden = false;
  }

  // ---- the page, kept current by polling -------------------------------------------------------
  let lastBuilds = '';
  let settingsView = null;
  async function refresh(signal) {
    const [d, b] = await Promise.all([
      call('GET', `/deployments/${id}`, undefined, { signal }),
      call('GET', `/deployments/${id}/builds?limit=20`, undefined, { signal }),
    ]);
    dep = d;
    builds = b;
    title.textContent = dep.name;
    document.title = `${dep.name} · Slipway`;
    status.replaceChildren(badge(dep.status));
    link.href = dep.url || '#';
    link.textContent = dep.url || '';
    meta.textContent = `${dep.source_type === 'git' ? `git ${dep.repo_url}${dep.branch ? ` (${dep.branch})` : ''}` : 'uploaded source'} · subdomain ${dep.subdomain} · ${dep.live_build_id ? `live build ${dep.live_build_id.slice(0, 8)}` : 'no live build'} · updated ${when(dep.updated_at)}`;
    const allowed = allowedActions(dep);
    for (const [name, button] of Object.entries(buttons)) button.disabled = !allowed[name];
    buttons.deploy.textContent = dep.source_type === 'git' ? 'Deploy latest commit' : 'Deploy upload';
    const signature = JSON.stringify([builds, dep.status, dep.live_build_id, Math.floor(Date.now() / 60000), builds.some((b) => b.status === 'building') ? Date.now() : 0]);
    if (signature !== lastBuilds) {
      lastBuilds = signature;
      replaceKeepingFocus(buildRows, builds.map((build) => {
        const live = build.id === dep.live_build_id;
        const canRollback = allowed.rollback && build.status === 'succeeded' && !(live && dep.status === 'running');
        return h('tr', { dataset: { id: build.id }, class: build.id === shownBuild ? 'selected' : '' },
          h('td', { 'data-label': 'Build' }, h('code', { text: build.id.slice(0, 8) }), live ? ' (live)' : ''),
          h('td', { 'data-label': 'Status' }, badge(build.status), build.error ? h('div', { class: 'muted', text: build.error.split('\n')[0].slice(0, 200) }) : ''),
          h('td', { 'data-label': 'Commit' }, h('code', { text: build.commit_sha.slice(0, 12) })),
          h('td', { 'data-label': 'Started', text: when(build.started_at) }),
          h('td', { 'data-label': 'Took', text: duration(build.started_at, build.finished_at) }),
          h('td', { class: 'actions' },
            h('button', { type: 'button', text: 'Log', 'aria-label': `Log of build ${build.id.slice(0, 8)}`, dataset: { key: `log-${build.id}` }, onclick: () => { followLatest = false; showBuildLog(build); buildLog.focus(); } }),
            h('button', { type: 'button', text: 'Roll back', 'aria-label': `Roll back to build ${build.id.slice(0, 8)}`, disabled: !canRollback, dataset: { key: `rb-${build.id}` }, onclick: act(() => rollback(build)) })));
      }));
      if (builds.length === 0) buildRows.replaceChildren(h('tr', {}, h('td', { colspan: '6', class: 'empty', text: dep.source_type === 'archive' ? 'No builds yet: upload a source below, then deploy.' : 'No builds yet: deploy to build the repository.' })));
    }
    // A build started anywhere (the CLI, a push) shows up here and its log streams.
    if (builds[0] && (followLatest || shownBuild === null)) showBuildLog(builds[0]);
    syncRuntimeLog();
    if (!settingsView) settingsView = renderSettings(settings, dep, ctx);
    else settingsView.update(dep);
  }

  ctx.poll(2000, refresh);
  // Metrics take the engine about a second to sample; every 3 s keeps one in flight at most.
  setTimeout(() => ctx.poll(3000, sampleMetrics), 500);
}
