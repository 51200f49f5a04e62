// Teams (decisions §18): the team switcher, the teams page (create), a team's page (members, roles, delete).
import { call } from './api.js';
import { confirmAction, h, when } from './dom.js';

const KEY = 'slipway-team';
const ROLES = ['viewer', 'developer', 'owner'];

/** The team chosen in the switcher ('' = every app: yours and your teams'). */
export function currentTeam() {
  return sessionStorage.getItem(KEY) || '';
}

/** Fills the header's team switcher with the user's teams; changing it re-renders the page. */
export async function loadSwitcher(onChange) {
  const select = document.getElementById('team-switch');
  if (!select) return;
  const teams = await call('GET', '/teams');
  if (currentTeam() && !teams.some((t) => t.id === currentTeam())) sessionStorage.removeItem(KEY);
  select.replaceChildren(
    h('option', { value: '', text: 'All apps' }),
    h('option', { value: 'personal', text: 'Personal' }),
    ...teams.map((t) => h('option', { value: t.id, text: `${t.name} (${t.role})` })),
  );
  select.value = currentTeam();
  select.onchange = () => {
    if (select.value) sessionStorage.setItem(KEY, select.value);
    else sessionStorage.removeItem(KEY);
    onChange();
  };
  document.getElementById('team-switch-label').hidden = false;
}

/** Whether an app belongs in the switcher's current choice. */
export function inCurrentTeam(app) {
  const team = currentTeam();
  if (team === '') return true;
  if (team === 'personal') return app.team_id == null;
  return app.team_id === team;
}

/** The team a new app goes to (the switcher's team), or undefined for the user's own. */
export function teamForNewApp() {
  const team = currentTeam();
  return team === '' || team === 'personal' ? undefined : team;
}

export function renderTeams(view, ctx) {
  const rows = h('tbody', { id: 'team-rows' });
  const name = h('input', { name: 'name', required: true, maxlength: '100', placeholder: 'acme', autocomplete: 'off' });
  const form = h('form', { id: 'team-form', class: 'row' }, h('label', {}, 'Name of a new team', name), h('button', { class: 'primary', text: 'Create team' }));
  view.append(h('section', { class: 'card', id: 'teams' },
    h('h1', { text: 'Teams' }),
    h('p', { class: 'hint', text: 'A team shares apps with its members: viewers read, developers deploy and change settings, owners also create and delete apps and manage members.' }),
    form,
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Team', 'Your role', 'Created'].map((t) => h('th', { scope: 'col', text: t })))), rows)));
  async function load() {
    const teams = await call('GET', '/teams', undefined, { signal: ctx.signal });
    rows.replaceChildren(...teams.map((t) => h('tr', { dataset: { id: t.id } },
      h('td', { 'data-label': 'Team' }, h('a', { href: `#/teams/${t.id}`, text: t.name })),
      h('td', { 'data-label': 'Your role', text: t.role }),
      h('td', { 'data-label': 'Created', text: when(t.created_at) }))));
  }
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.run(async () => {
      const team = await call('POST', '/teams', { name: name.value });
      form.reset();
      await ctx.teamsChanged?.();
      location.hash = `#/teams/${team.id}`;
    });
  });
  ctx.run(load);
}

export function renderTeam(view, id, ctx) {
  const title = h('h1', { text: 'Team' });
  const rows = h('tbody', { id: 'member-rows' });
  const email = h('input', { name: 'email', type: 'email', required: true, autocomplete: 'off', placeholder: 'colleague@example.com' });
  const role = h('select', { name: 'role' }, ROLES.map((r) => h('option', { value: r, text: r })));
  const addForm = h('form', { id: 'member-form', class: 'row' }, h('label', {}, 'E-mail', email), h('label', {}, 'Role', role), h('button', { class: 'primary', text: 'Add member' }));
  const remove = h('button', { type: 'button', class: 'danger', text: 'Delete team' });
  view.append(h('section', { class: 'card', id: 'team' },
    title,
    h('h2', { text: 'Members' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['E-mail', 'Role', 'Since', ''].map((t) => h('th', { scope: 'col', text: t })))), rows),
    addForm,
    h('p', {}, h('a', { href: `#/audit?team=${id}`, text: "This team's audit log" })),
    remove));
  let team;
  async function load() {
    team = await call('GET', `/teams/${id}`, undefined, { signal: ctx.signal });
    title.textContent = `Team ${team.name}`;
    const owner = team.role === 'owner';
    addForm.hidden = !owner;
    remove.hidden = !owner;
    const members = await call('GET', `/teams/${id}/members`, undefined, { signal: ctx.signal });
    rows.replaceChildren(...members.map((m) => {
      const select = h('select', { 'aria-label': `Role of ${m.email}`, disabled: !owner, onchange: () => ctx.run(async () => {
        try { await call('PATCH', `/teams/${id}/members/${m.user_id}`, { role: select.value }); } finally { await load(); }
      }) }, ROLES.map((r) => h('option', { value: r, text: r, selected: r === m.role })));
      return h('tr', { dataset: { user: m.email } },
        h('td', { 'data-label': 'E-mail', text: m.email }),
        h('td', { 'data-label': 'Role' }, select),
        h('td', { 'data-label': 'Since', text: when(m.created_at) }),
        h('td', {}, owner ? h('button', { type: 'button', text: 'Remove', 'aria-label': `Remove ${m.email}`, onclick: () => ctx.run(async () => {
          if (!(await confirmAction({ title: `Remove ${m.email}?`, body: `They lose access to ${team.name}'s apps at once.`, confirm: 'Remove' }))) return;
          await call('DELETE', `/teams/${id}/members/${m.user_id}`);
          await load();
        }) }) : null));
    }));
  }
  addForm.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.run(async () => {
      await call('POST', `/teams/${id}/members`, { email: email.value, role: role.value });
      addForm.reset();
      await load();
    });
  });
  remove.addEventListener('click', () => ctx.run(async () => {
    if (!(await confirmAction({ title: `Delete team ${team.name}?`, body: 'Only a team that holds no app can be deleted.', confirm: 'Delete team' }))) return;
    await call('DELETE', `/teams/${id}`);
    await ctx.teamsChanged?.();
    location.hash = '#/teams';
  }));
  ctx.run(load);
}
