// An app's Builds tab: the builds with rollback, and the selected build's log (the newest one's streaming while it builds).
import { streamText } from './api.js';
import { badge, duration, h, replaceKeepingFocus, when } from './dom.js';
import { terminal } from './terminal.js';
import { buildDockerfileSection } from './build-dockerfile.js';

/**
 * Fills `panel`. `page.rollback(build)` asks and rolls back; `update(dep, builds, allowed)` redraws
 * from the page's poll; `followLatest()` makes the next new build's log show (after a deploy).
 */
export function renderBuildsTab(panel, page) {
  const { id, ctx } = page;
  const buildRows = h('tbody', { id: 'build-rows' });
  const logTitle = h('h3', { id: 'log-title', text: 'Build log' });
  const buildLog = h('pre', { class: 'log', id: 'build-log', tabindex: '0', 'aria-label': 'Build log', 'aria-live': 'off' });
  const dockerfile = buildDockerfileSection();
  panel.append(h('section', { class: 'card', 'aria-labelledby': 'builds-title' },
    h('h2', { id: 'builds-title', text: 'Builds' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Build', 'Status', 'Commit', 'Started', 'Took', ''].map((t) => h('th', { scope: 'col', text: t })))), buildRows),
    logTitle, buildLog, dockerfile.section));

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
    void dockerfile.show(id, build.id, signal);
    streamText(`/deployments/${id}/builds/${build.id}/logs?follow=true`, (text) => buildTerm.append(text), signal)
      .then(() => dockerfile.show(id, build.id, signal))
      .catch((err) => { if (err.name !== 'AbortError') buildTerm.append(`\n[${err.message}]\n`); });
  }

  let lastBuilds = '';
  return {
    followLatest() { followLatest = true; },
    update(dep, builds, allowed) {
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
              h('button', { type: 'button', text: 'Roll back', 'aria-label': `Roll back to build ${build.id.slice(0, 8)}`, disabled: !canRollback, dataset: { key: `rb-${build.id}` }, onclick: () => page.rollback(build) })));
        }));
        if (builds.length === 0) buildRows.replaceChildren(h('tr', {}, h('td', { colspan: '6', class: 'empty', text: dep.source_type === 'archive' ? 'No builds yet: upload a source above, then deploy.' : 'No builds yet: deploy to build the repository.' })));
      }
      // A build started anywhere (the CLI, a push) shows up here and its log streams.
      if (builds[0] && (followLatest || shownBuild === null)) showBuildLog(builds[0]);
    },
  };
}
