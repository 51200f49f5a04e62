// The audit log page (decisions §18): newest first, filtered by team and object, a page at a time.
import { call, send } from './api.js';
import { h, when } from './dom.js';

export function renderAudit(view, ctx, params) {
  const team = h('select', { name: 'team_id', id: 'audit-team' }, h('option', { value: '', text: 'Every team' }));
  const target = h('input', { name: 'target_id', id: 'audit-target', placeholder: 'an app, build, key or user id', autocomplete: 'off', value: params.get('target') || '' });
  const filters = h('form', { id: 'audit-filters', class: 'row' }, h('label', {}, 'Team', team), h('label', {}, 'Object id', target), h('button', { class: 'primary', text: 'Filter' }));
  const rows = h('tbody', { id: 'audit-rows' });
  const more = h('button', { type: 'button', id: 'audit-more', text: 'Older entries', hidden: true });
  view.append(h('section', { class: 'card', id: 'audit' },
    h('h1', { text: 'Audit log' }),
    h('p', { class: 'hint', text: 'Your own actions, and everything done in the teams you own. Entries never hold a variable’s value, a key or a password.' }),
    filters,
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['When', 'Who', 'Via', 'Action', 'Object', 'From'].map((t) => h('th', { scope: 'col', text: t })))), rows),
    more));
  let next = null;

  function row(e) {
    return h('tr', { dataset: { action: e.action, outcome: e.outcome } },
      h('td', { 'data-label': 'When' }, h('time', { datetime: e.at, title: new Date(e.at).toLocaleString(), text: when(e.at) })),
      h('td', { 'data-label': 'Who', text: e.actor_email || '—' }),
      h('td', { 'data-label': 'Via', text: e.via }),
      h('td', { 'data-label': 'Action', text: e.outcome === 'success' ? e.action : `${e.action} (${e.outcome})` }),
      h('td', { 'data-label': 'Object' }, e.target_id ? h('code', { text: `${e.target_type} ${e.target_id}` }) : e.target_type),
      h('td', { 'data-label': 'From', text: e.ip || '—' }));
  }

  async function page(url, replace) {
    const { data, res } = await send('GET', url, undefined, { signal: ctx.signal });
    if (replace) rows.replaceChildren();
    rows.append(...data.map(row));
    const link = /<([^>]*)>\s*;\s*rel="next"/.exec(res.headers.get('link') || '');
    next = link ? new URL(link[1], location.href).href : null;
    more.hidden = next === null;
  }

  function query() {
    const q = new URLSearchParams({ limit: '50' });
    if (team.value) q.set('team_id', team.value);
    if (target.value.trim()) q.set('target_id', target.value.trim());
    return `/api/v1/audit?${q}`;
  }

  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.run(() => page(query(), true));
  });
  more.addEventListener('click', () => ctx.run(() => page(next, false)));
  ctx.run(async () => {
    const teams = await call('GET', '/teams', undefined, { signal: ctx.signal });
    team.append(...teams.map((t) => h('option', { value: t.id, text: t.name })));
    team.value = params.get('team') || '';
    await page(query(), true);
  });
}
