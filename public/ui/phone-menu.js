// The header on a phone: one line (the brand and a Menu button); the navigation, team switch, user and log-out open under it on demand.
const $ = (id) => document.getElementById(id);

/** Wires the Menu button (shown by the stylesheet on narrow screens only, and only while the navigation is). */
export function phoneMenu() {
  const header = document.querySelector('header.top');
  const button = $('menu-toggle');
  const nav = $('nav');
  if (!header || !button || !nav) return;
  const setOpen = (open) => {
    header.classList.toggle('open', open);
    button.setAttribute('aria-expanded', String(open));
  };
  button.addEventListener('click', () => setOpen(!header.classList.contains('open')));
  // A page chosen from the menu closes it; so does Escape.
  window.addEventListener('hashchange', () => setOpen(false));
  header.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && header.classList.contains('open')) { setOpen(false); button.focus(); }
  });
  // Signed out, there is nothing to open.
  const follow = () => { button.hidden = nav.hidden; if (nav.hidden) setOpen(false); };
  new MutationObserver(follow).observe(nav, { attributes: true, attributeFilter: ['hidden'] });
  follow();
}
