// Tabs (WAI-ARIA tablist): a page split into panels, one shown at a time, the choice kept in the URL (#/d/<id>/<tab>).
import { h } from './dom.js';

/**
 * Builds a tablist over `tabs` ([{id, label}]) and returns `{node, panel(id), select(id)}`.
 * `panel(id)` is the (initially empty) element to fill for that tab. Arrow keys, Home and End move
 * between tabs (the roving tabindex pattern); the selected tab's id goes into the URL with
 * `urlFor(id)` without a new history entry, so a reload or a shared link opens the same tab.
 */
export function tabbed(tabs, initial, urlFor) {
  const list = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Sections' });
  const panels = new Map();
  const buttons = new Map();
  for (const tab of tabs) {
    const button = h('button', { type: 'button', role: 'tab', id: `tab-${tab.id}`, 'aria-controls': `panel-${tab.id}`, text: tab.label, dataset: { tab: tab.id } });
    const panel = h('div', { role: 'tabpanel', id: `panel-${tab.id}`, 'aria-labelledby': `tab-${tab.id}`, class: 'tab-panel', tabindex: '-1' });
    button.addEventListener('click', () => select(tab.id, true));
    buttons.set(tab.id, button);
    panels.set(tab.id, panel);
    list.append(button);
  }
  const ids = tabs.map((t) => t.id);
  list.addEventListener('keydown', (event) => {
    const at = ids.indexOf(document.activeElement?.dataset?.tab);
    if (at < 0) return;
    const next = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: ids.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    const id = ids[(next + ids.length) % ids.length];
    select(id, true);
    buttons.get(id).focus();
  });
  let selected = null;
  function select(id, fromUser = false) {
    if (!panels.has(id)) id = ids[0];
    selected = id;
    for (const [tid, button] of buttons) {
      const on = tid === id;
      button.setAttribute('aria-selected', String(on));
      button.tabIndex = on ? 0 : -1;
      panels.get(tid).hidden = !on;
    }
    if (fromUser) history.replaceState(history.state, '', urlFor(id));
    for (const fn of listeners) fn(id);
  }
  const listeners = [];
  // On a narrow screen the tabs scroll sideways: a fade on the side that holds more says so.
  const strip = h('div', { class: 'tabs-strip' }, list);
  const edges = () => {
    strip.classList.toggle('more-left', list.scrollLeft > 1);
    strip.classList.toggle('more-right', list.scrollLeft + list.clientWidth < list.scrollWidth - 1);
  };
  list.addEventListener('scroll', edges, { passive: true });
  new ResizeObserver(edges).observe(list);
  // The chosen tab in the middle of the strip (clear of the fades), once the strip is on the page.
  listeners.push((id) => requestAnimationFrame(() => { if (list.isConnected) list.scrollLeft += buttons.get(id).getBoundingClientRect().left + buttons.get(id).offsetWidth / 2 - list.getBoundingClientRect().left - list.clientWidth / 2; edges(); }));
  const node = h('div', { class: 'tabbed' }, strip, [...panels.values()]);
  select(initial);
  return {
    node,
    panel: (id) => panels.get(id),
    select,
    get selected() { return selected; },
    /** `fn(id)` runs whenever another tab is shown (a panel that draws only when visible). */
    onSelect(fn) { listeners.push(fn); },
  };
}
