// What a person sees around the conversation and acts with: the status
// line, the connection banner, the plan, the approval panel, the message
// box and the menu. With `access: "read"` every control is left out and the
// page says `read-only`.

import { h, replace } from './dom.js';
import { pasteLabel, previewPre, shortId } from './view.js';
import { shownAgent, viewAddress } from './connection.js';

const $ = (id) => document.getElementById(id);

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];
/** A paste this long becomes a paste chip rather than text in the box. */
const PASTE_CHIP_CHARS = 500;
const PASTE_CHIP_LINES = 4;
const APPROVAL_MODES = [
  ['ask', 'ask before acting'],
  ['edits', 'allow file edits'],
  ['auto', 'allow everything'],
  ['read-only', 'deny all changes'],
];
const SIGILS = { '@': 'file', '#': 'knowledge', '/': 'workflow' };

/** What "Allow for session" adds, as the pod named it. */
function sessionRule(rule, id) {
  return h('p', { class: 'rule', id }, 'Allow for session adds the rule ', h('code', {}, rule));
}

function compactNumber(n) {
  if (typeof n !== 'number') return '?';
  if (n >= 1e6) return `${Math.round(n / 1e5) / 10}M`;
  if (n >= 1e3) return `${Math.round(n / 100) / 10}k`;
  return String(n);
}

/// The sessions (newest first, as `list_sessions` answers) as the tree
/// every pod client draws (crates/protocol/src/session_tree.rs): each rewind and
/// fork under the session it came from, the branches of a session and the
/// groups in the order of their newest activity; `repeats` when a branch's
/// title is its origin's (the usual rewind), which the row then leaves out.
export function sessionTree(sessions) {
  const at = new Map(sessions.map((s, i) => [s.session_id, i]));
  const parent = sessions.map((s, i) => {
    const p = s.forked_from ? at.get(s.forked_from.session_id) : undefined;
    return p === undefined || p === i ? null : p;
  });
  const newest = sessions.map((_, i) => i);
  sessions.forEach((_, i) => {
    for (let up = parent[i], n = 0; up !== null && n < sessions.length; up = parent[up], n++) {
      newest[up] = Math.min(newest[up], i);
    }
  });
  const children = sessions.map(() => []);
  parent.forEach((p, i) => { if (p !== null) children[p].push(i); });
  children.forEach((c) => c.sort((a, b) => newest[a] - newest[b]));
  const tops = sessions.map((_, i) => i).filter((i) => parent[i] === null);
  tops.sort((a, b) => newest[a] - newest[b]);
  const rows = [];
  const seen = new Set();
  const visit = (i, guide, above, from) => {
    if (seen.has(i)) return;
    seen.add(i);
    const s = sessions[i];
    const repeats = from !== null && !!s.title && s.title === sessions[from].title;
    rows.push({ s, guide, repeats });
    const below = children[i].filter((c) => !seen.has(c));
    below.forEach((c, n) => {
      const last = n === below.length - 1;
      visit(c, above + (last ? '└ ' : '├ '), above + (last ? '  ' : '│ '), i);
    });
  };
  // Sessions on a cycle (a hand-edited log) have no top: they come last.
  [...tops, ...sessions.map((_, i) => i)].forEach((i) => visit(i, '', '', null));
  return rows;
}

export class Controls {
  constructor({ view, send, request, upload, forget }) {
    this.view = view;
    this.sendFrame = send;
    this.request = request;
    this.upload = upload;
    this.forgetDevice = forget;
    this.full = false;
    this.statusFrame = null;
    this.greeting = null;
    this.attachments = [];
    this.accepted = new Map();
    this.nextPasteId = 1;
    this.completionSeq = 0;
    this.bind();
  }

  bind() {
    const message = $('message');
    $('composer').addEventListener('submit', (e) => {
      e.preventDefault();
      this.sendMessage();
    });
    message.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.sendMessage();
      } else if (e.key === 'Tab' && this.completions?.length) {
        e.preventDefault();
        this.accept(this.completions[0]);
      } else if (e.key === 'Escape') {
        this.closeCompletions();
      }
    });
    message.addEventListener('input', () => {
      this.autosize();
      this.complete();
    });
    message.addEventListener('paste', (e) => this.paste(e));
    $('stop').addEventListener('click', () => this.sendFrame({ type: 'cancel' }));
    $('attach').addEventListener('click', () => $('file').click());
    $('file').addEventListener('change', (e) => {
      this.attachFiles([...e.target.files]);
      e.target.value = '';
    });
    document.addEventListener('dragover', (e) => {
      if (this.full) e.preventDefault();
    });
    document.addEventListener('drop', (e) => {
      if (!this.full) return;
      e.preventDefault();
      this.attachFiles([...(e.dataTransfer?.files || [])]);
    });
    $('forget').addEventListener('click', () => this.forgetDevice());
    $('notify').addEventListener('click', async () => {
      if (typeof Notification === 'undefined') return;
      await Notification.requestPermission();
      this.drawMenu();
    });
    $('sessions-open').addEventListener('toggle', (e) => {
      if (e.target.open) this.loadSessions();
    });
    $('new-session').addEventListener('click', () => this.act({ type: 'new_session' }));
    $('fork').addEventListener('click', () => this.act({ type: 'fork' }));
    $('mode').addEventListener('change', (e) => this.act({ type: 'set_approval', mode: e.target.value }));
    replace($('mode'), APPROVAL_MODES.map(([value, label]) => h('option', { value }, label)));
  }

  /** A method whose refusal the user should read (busy, forbidden, …). */
  act(frame) {
    this.request(frame).catch((e) => this.say(e.message));
  }

  say(text) {
    $('composer-error').textContent = text || '';
  }

  snapshot(frame) {
    this.greeting = frame.greeting || {};
    this.full = this.greeting.access !== 'read';
    document.body.classList.toggle('read-only', !this.full);
    $('composer').hidden = !this.full;
    $('full-only').hidden = !this.full;
    $('access').hidden = this.full;
    $('access').textContent = this.full
      ? ''
      : `read-only${this.greeting.access_reason === 'descendant' ? ' (a tool of this pod)' : ''}`;
    $('pod-name').textContent = this.greeting.pod ? `pod ${this.greeting.pod}` : 'pod';
    $('pod-name').title = this.greeting.workspace || '';
    this.drawBack();
    this.status(frame.status || {});
    if ($('sessions-open').open) this.loadSessions();
  }

  status(frame) {
    this.statusFrame = frame;
    const s = frame;
    const parts = [h('span', { class: `state state-${s.state}` }, s.state || '?')];
    if (s.model) parts.push(h('span', {}, s.model));
    if (typeof s.context_tokens === 'number') {
      const window = s.context_window;
      const pct = window ? ` (${Math.round((100 * s.context_tokens) / window)}%)` : '';
      parts.push(h('span', { title: 'context use' }, `ctx ${compactNumber(s.context_tokens)}/${compactNumber(window)}${pct}`));
    }
    const pending = (s.pending_approvals || []).length;
    if (pending) parts.push(h('span', { class: 'attention' }, `${pending} pending`));
    if (s.queued) parts.push(h('span', {}, `${s.queued} queued`));
    if (s.jobs) parts.push(h('span', {}, `${s.jobs} job${s.jobs === 1 ? '' : 's'} running`));
    if (s.approval) parts.push(h('span', { title: 'approval mode' }, `mode ${s.approval}`));
    replace($('status'), parts);
    this.drawAgents(s);
    $('stop').hidden = !this.full || !s.state || s.state === 'idle';
    if (s.approval) $('mode').value = s.approval;
    this.refresh();
  }

  connection(state, detail) {
    const banner = $('conn');
    const messages = {
      connecting: 'connecting…',
      open: '',
      disconnected: `disconnected — reconnecting in ${Math.ceil((detail || 0) / 100) / 10}s`,
      unauthorized: 'the pod refused this device’s token (revoked or from another pod): get a new link with `pod url`',
      gone: `this agent (${detail}) was removed or has stopped: it runs no more. Its parent’s view (← PARENT) lists the agents that run`,
      shutdown: `the pod stopped${detail ? ` (${detail})` : ''}; waiting for it to come back`,
      incompatible: detail,
    };
    banner.textContent = messages[state] ?? state;
    banner.hidden = !banner.textContent;
    banner.className = state === 'open' ? '' : `banner ${state}`;
    document.body.classList.toggle('offline', state !== 'open');
  }

  /** Redraws what depends on the view: the plan and the pending approvals. */
  refresh() {
    this.drawPlan();
    this.drawApprovals();
  }

  /**
   * On a child's view, a link back to its parent's: a child's name is its
   * parent's plus `.slug`, and the top pod is the one serving the page.
   */
  drawBack() {
    const agent = shownAgent();
    const back = $('back');
    back.hidden = !agent;
    if (!agent) return;
    const parent = agent.includes('.') ? agent.slice(0, agent.lastIndexOf('.')) : null;
    const top = !parent || !parent.includes('.');
    back.href = viewAddress(top ? null : parent);
    back.textContent = `← ${parent ?? 'back'}`;
    back.setAttribute('aria-label', `Back to ${parent ?? 'the parent pod'}`);
  }

  /**
   * The child pods (subagents) from the status: each one's state, the
   * approvals it waits for and its usage, under the tree's usage — so that
   * what a turn cost is never undercounted.
   */
  drawAgents(s) {
    const agents = Array.isArray(s.agents) ? s.agents : [];
    const el = $('agents');
    el.hidden = agents.length === 0;
    if (el.hidden) return;
    const usage = (u) => `${compactNumber(u?.input_tokens ?? 0)} in · ${compactNumber(u?.output_tokens ?? 0)} out`;
    replace(
      el,
      h(
        'details',
        { open: true },
        h('summary', {}, `agents · ${agents.length} · tree ${usage(s.tree_usage)}`),
        h(
          'ul',
          {},
          agents.map((a) => {
            const waiting = (a?.pending_approvals || []).length;
            const state = waiting ? `waiting for ${waiting} approval${waiting === 1 ? '' : 's'}` : String(a?.state ?? '?');
            return h(
              'li',
              { class: waiting ? 'agent attention' : 'agent' },
              // Opens the child's own view: its log live, its composer, and
              // its approval panel, which answers its requests.
              h('a', { class: 'agent-name', href: viewAddress(String(a?.name ?? '')) }, String(a?.name ?? '?')),
              ' ',
              h('span', { class: `state state-${a?.state}` }, state),
              ' ',
              h('span', { class: 'dim' }, usage(a?.usage)),
              waiting ? h('div', { class: 'dim' }, 'open it to answer') : null,
            );
          }),
        ),
      ),
    );
  }

  drawPlan() {
    const plan = this.view.plan;
    const el = $('plan');
    el.hidden = !plan || plan.length === 0;
    if (el.hidden) return;
    const mark = { done: '✓', in_progress: '▸', pending: '○' };
    replace(
      el,
      h(
        'details',
        { open: true },
        h('summary', {}, `plan · ${plan.filter((i) => i?.status === 'done').length}/${plan.length} done`),
        h(
          'ol',
          {},
          plan.map((item) =>
            h('li', { class: `plan-${item?.status}` }, `${mark[item?.status] || '·'} ${String(item?.text ?? '')}`),
          ),
        ),
      ),
    );
  }

  /**
   * The pending approvals, each with the rule "Allow for session" adds —
   * the `session_rule` the pod put on the request entry, never one worked
   * out here — and a way to deny with a message for the model. Drawn again
   * only when the list changes, so a message being typed survives the
   * status frames that arrive meanwhile.
   */
  drawApprovals() {
    const pending = this.view.pending;
    const el = $('approvals');
    el.hidden = pending.length === 0;
    const key = JSON.stringify([this.full, pending.map((p) => p.call_id)]);
    if (key === this.approvalsKey) return;
    this.approvalsKey = key;
    replace(
      el,
      pending.map((p, i) => {
        const rule = typeof p.session_rule === 'string' ? p.session_rule : null;
        const ruleId = `rule-${i}`;
        return h(
          'section',
          { class: 'approval', 'aria-label': `approval for ${p.tool}` },
          h('h2', {}, `${p.tool} wants to run`, pending.length > 1 ? ` · ${i + 1} of ${pending.length}` : ''),
          h('p', { class: 'summary' }, String(p.summary ?? '')),
          h('p', { class: 'reason' }, `asked because: ${p.reason ?? ''}`),
          String(p.preview ?? '').trim() !== String(p.summary ?? '').trim() ? previewPre(p.tool, p.preview) : null,
          this.full ? this.approvalButtons(p, rule, ruleId) : rule ? sessionRule(rule, ruleId) : null,
        );
      }),
    );
  }

  approvalButtons(p, rule, ruleId) {
    const message = h('textarea', { rows: '2', 'aria-label': 'Message for the model', placeholder: 'what the model should do instead' });
    const denyWithMessage = h(
      'form',
      {
        class: 'deny-message',
        onsubmit: (e) => {
          e.preventDefault();
          this.approve(p, 'deny', 'once', message.value.trim() || undefined);
        },
      },
      message,
      h('button', { type: 'submit', class: 'deny' }, 'Deny with this message'),
    );
    return h(
      'div',
      { class: 'answers' },
      h(
        'div',
        { class: 'buttons' },
        h('button', { type: 'button', class: 'allow', onclick: () => this.approve(p, 'allow', 'once') }, 'Allow'),
        h(
          'button',
          { type: 'button', 'aria-describedby': rule ? ruleId : null, onclick: () => this.approve(p, 'allow', 'session') },
          'Allow for session',
        ),
        h('button', { type: 'button', class: 'deny', onclick: () => this.approve(p, 'deny', 'once') }, 'Deny'),
      ),
      rule ? sessionRule(rule, ruleId) : null,
      h('details', { class: 'deny-with-message' }, h('summary', {}, 'Deny with a message'), denyWithMessage),
    );
  }

  approve(p, decision, scope, message) {
    const frame = { type: 'approve', call_id: p.call_id, decision, scope };
    if (message !== undefined) frame.message = message;
    this.request(frame).catch((e) => {
      if (e.code !== 'not_pending') this.say(e.message);
    });
  }

  drawMenu() {
    const granted = typeof Notification !== 'undefined' && Notification.permission === 'granted';
    $('notify').hidden = typeof Notification === 'undefined' || granted;
  }

  async loadSessions() {
    const list = $('sessions');
    replace(list, h('li', {}, 'loading…'));
    let sessions;
    try {
      sessions = (await this.request({ type: 'list_sessions' })).sessions || [];
    } catch (e) {
      replace(list, h('li', { class: 'error' }, e.message));
      return;
    }
    replace(
      list,
      sessionTree(sessions).slice(0, 50).map(({ s, guide, repeats }) =>
        h(
          'li',
          { class: s.current ? 'current' : null },
          guide ? h('span', { class: 'guide' }, guide) : null,
          h('span', { class: 'title' }, repeats ? '' : s.title || '(no messages yet)'),
          h('span', { class: 'meta' }, ` ${shortId(s.session_id)} · ${s.entries} entries · ${String(s.updated_at || '').slice(0, 16).replace('T', ' ')}${s.forked_from ? (s.rewound ? ' · rewound' : ' · forked') : ''}`),
          s.current
            ? h('span', { class: 'meta' }, ' · current')
            : this.full
              ? h('button', { type: 'button', onclick: () => this.act({ type: 'resume_session', session_id: s.session_id }) }, 'Resume')
              : null,
        ),
      ),
    );
  }

  autosize() {
    const m = $('message');
    m.style.height = 'auto';
    m.style.height = `${Math.min(m.scrollHeight, window.innerHeight * 0.4)}px`;
  }

  paste(e) {
    const files = [...(e.clipboardData?.files || [])].filter((f) => IMAGE_TYPES.includes(f.type));
    if (files.length) {
      e.preventDefault();
      this.attachFiles(files);
      return;
    }
    const text = e.clipboardData?.getData('text/plain') || '';
    if (text.length >= PASTE_CHIP_CHARS || text.split('\n').length >= PASTE_CHIP_LINES) {
      e.preventDefault();
      this.attachments.push({ type: 'paste', id: this.nextPasteId++, text });
      this.drawAttachments();
    }
  }

  async attachFiles(files) {
    for (const file of files) {
      if (!IMAGE_TYPES.includes(file.type)) {
        this.say(`${file.name}: only PNG, JPEG, GIF and WebP images can be attached`);
        continue;
      }
      const placeholder = { type: 'uploading', name: file.name };
      this.attachments.push(placeholder);
      this.drawAttachments();
      try {
        const segment = await this.upload(file);
        const at = this.attachments.indexOf(placeholder);
        if (at >= 0) this.attachments[at] = { ...segment, preview: URL.createObjectURL(file) };
        this.say('');
      } catch (e) {
        this.attachments = this.attachments.filter((a) => a !== placeholder);
        this.say(`${file.name}: ${e.message}`);
      }
      this.drawAttachments();
    }
  }

  drawAttachments() {
    replace(
      $('attachments'),
      this.attachments.map((a, i) => {
        const label = a.type === 'paste' ? pasteLabel(a.id, a.text) : a.type === 'uploading' ? `uploading ${a.name}…` : a.name;
        return h(
          'span',
          { class: `chip ${a.type}` },
          a.preview ? h('img', { src: a.preview, alt: '' }) : null,
          label,
          h(
            'button',
            {
              type: 'button',
              class: 'remove',
              'aria-label': `Remove ${label}`,
              onclick: () => {
                if (a.preview) URL.revokeObjectURL(a.preview);
                this.attachments.splice(i, 1);
                this.drawAttachments();
              },
            },
            '✕',
          ),
        );
      }),
    );
  }

  /** The message box's text as segments: accepted completions become references. */
  segments(text) {
    const segments = [];
    let rest = text;
    const workflow = /^\/(\S+)(?:\s+([\s\S]*))?$/.exec(rest.trim());
    if (workflow && this.accepted.get(`/${workflow[1]}`) === 'workflow') {
      return [{ type: 'workflow_invoke', slug: workflow[1], args: (workflow[2] || '').trim() }];
    }
    const tokens = [...this.accepted.keys()].filter((t) => !t.startsWith('/')).sort((a, b) => b.length - a.length);
    if (tokens.length) {
      const escaped = tokens.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      const re = new RegExp(`(^|\\s)(${escaped.join('|')})(?=\\s|$)`, 'g');
      let last = 0;
      for (const m of rest.matchAll(re)) {
        const start = m.index + m[1].length;
        if (start > last) segments.push({ type: 'text', text: rest.slice(last, start) });
        const token = m[2];
        segments.push(
          this.accepted.get(token) === 'file'
            ? { type: 'file_ref', path: token.slice(1) }
            : { type: 'knowledge_ref', slug: token.slice(1) },
        );
        last = start + token.length;
      }
      rest = rest.slice(last);
    }
    if (rest) segments.push({ type: 'text', text: rest });
    return segments.filter((s) => s.type !== 'text' || s.text.length > 0);
  }

  sendMessage() {
    if (!this.full) return;
    const message = $('message');
    const text = message.value;
    if (this.attachments.some((a) => a.type === 'uploading')) {
      this.say('wait for the image to finish uploading');
      return;
    }
    const segments = text.trim() ? this.segments(text) : [];
    for (const a of this.attachments) {
      if (a.type === 'paste') segments.push({ type: 'paste', id: a.id, text: a.text });
      else segments.push({ type: 'image', blob: a.blob, media_type: a.media_type, name: a.name });
    }
    if (segments.length === 0) return;
    if (document.body.classList.contains('offline')) {
      this.say('not connected: the message was not sent');
      return;
    }
    this.request({ type: 'run', segments })
      .then(() => this.say(''))
      .catch((e) => this.say(e.message));
    message.value = '';
    for (const a of this.attachments) if (a.preview) URL.revokeObjectURL(a.preview);
    this.attachments = [];
    this.accepted.clear();
    this.drawAttachments();
    this.closeCompletions();
    this.autosize();
  }

  /** Asks the pod to complete the `@`, `#` or leading `/` word under the cursor. */
  complete() {
    const m = $('message');
    const before = m.value.slice(0, m.selectionStart);
    const word = /(^|\s)([@#][^\s]*)$/.exec(before) || (/^(\/)([^\s]*)$/.exec(before) && [null, '', before]);
    if (!word) {
      this.closeCompletions();
      return;
    }
    const token = word[2];
    const kind = SIGILS[token[0]];
    const seq = ++this.completionSeq;
    this.request({ type: 'list_completions', kind, prefix: token.slice(1) })
      .then((r) => {
        if (seq !== this.completionSeq) return;
        const items = (r.items || (r.completions || []).map((value) => ({ value }))).slice(0, 8);
        this.completions = items.map((item) => ({ ...item, sigil: token[0], token }));
        this.drawCompletions();
      })
      .catch(() => this.closeCompletions());
  }

  drawCompletions() {
    const list = $('completions');
    list.hidden = !this.completions?.length;
    replace(
      list,
      (this.completions || []).map((c) =>
        h(
          'li',
          {},
          h('button', { type: 'button', onclick: () => this.accept(c) }, `${c.sigil}${c.value}`, c.detail ? h('span', { class: 'meta' }, ` ${c.detail}`) : null),
        ),
      ),
    );
  }

  closeCompletions() {
    this.completions = null;
    $('completions').hidden = true;
  }

  accept(c) {
    const m = $('message');
    const at = m.selectionStart;
    const start = at - c.token.length;
    const value = `${c.sigil}${c.value}`;
    const directory = c.sigil === '@' && c.value.endsWith('/');
    const insert = directory ? value : `${value} `;
    m.value = m.value.slice(0, start) + insert + m.value.slice(at);
    m.selectionStart = m.selectionEnd = start + insert.length;
    if (!directory) this.accepted.set(value, SIGILS[c.sigil]);
    m.focus();
    if (directory) this.complete();
    else this.closeCompletions();
  }
}
