// The Tunnels page: the caller's live tunnels (name, URL, key, since when, open streams), kept current.
import { callAll } from './api.js';
import { badge, h, replaceKeepingFocus, when } from './dom.js';

export function renderTunnels(view, ctx) {
  const rows = h('tbody', { id: 'tunnel-rows' });
  const empty = h('div', { class: 'empty', id: 'tunnels-empty', hidden: true },
    h('p', {}, 'No live tunnels. A tunnel serves a port of your machine at ', h('code', { text: '<name>.<domain>' }), ' for as long as the command runs:'),
    h('pre', { class: 'snippet', text: 'slipway login --api-key slw_k1_…   # a key from the API keys page\nslipway tunnel 3000 --subdomain demo' }));
  view.append(h('section', { class: 'card', id: 'tunnels' },
    h('h1', { text: 'Tunnels' }),
    h('table', { class: 'stack' }, h('thead', {}, h('tr', {}, ['Name', 'URL', 'Since', 'State', 'Open streams'].map((t) => h('th', { scope: 'col', text: t })))), rows),
    empty));
  let last = '';
  ctx.poll(3000, async (signal) => {
    const tunnels = await callAll('/tunnels', { signal });
    const sig = JSON.stringify(tunnels) + Math.floor(Date.now() / 60000);
    if (sig === last) return;
    last = sig;
    empty.hidden = tunnels.length > 0;
    replaceKeepingFocus(rows, tunnels.map((t) => h('tr', {},
      h('td', { 'data-label': 'Name' }, h('code', { text: t.subdomain })),
      h('td', { 'data-label': 'URL' }, h('a', { href: t.url, text: t.url, rel: 'noopener noreferrer', target: '_blank' })),
      h('td', { 'data-label': 'Since' }, h('time', { datetime: t.connected_at, title: new Date(t.connected_at).toLocaleString(), text: when(t.connected_at) })),
      h('td', { 'data-label': 'State' }, badge(t.state === 'connected' ? 'running' : 'building', t.state)),
      h('td', { 'data-label': 'Open streams', text: String(t.streams) }))));
  });
}
