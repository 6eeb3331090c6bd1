// The conversation view: a projection of snapshot + entries, by the same
// rules as the TUI (src/tui/conversation.rs).
//
// Confirmed content comes only from a snapshot's entries and `entry`
// frames. Streaming hints only build the block in flight, which the next
// entry (or a retry, a turn start, a session change) replaces, so streamed
// text is never shown twice and never lost. A snapshot discards the whole
// view and rebuilds it, which is what makes a reconnect show nothing twice.

import { h, replace } from './dom.js';
import { renderMarkdown } from './markdown.js';
import { viewAddress } from './connection.js';
import { SUMMARY, GUESSED_KEYS } from './tools.js';

/** Output lines of a running tool shown under its call. */
const OUTPUT_TAIL_LINES = 8;
/** A result longer than this many lines (or characters) starts folded. */
const FOLD_LINES = 12;
const FOLD_CHARS = 2000;
/**
 * Entries of a snapshot drawn before the page shows it (more than a tall
 * screenful); the older history is drawn after, in chunks while the page
 * is idle. Of those, the last EAGER_MARKDOWN have their Markdown rendered
 * at once; any other waits until it scrolls near.
 */
const EAGER_ENTRIES = 40;
const EAGER_MARKDOWN = 16;
/** A chunk of history drawn while idle: at most this many ms of work. */
const CHUNK_MS = 8;

export function shortId(id) {
  return String(id || '').slice(0, 8);
}

/** `[Clipboard #1 | 1234 chars, 40 lines]`, as the TUI labels a paste. */
export function pasteLabel(id, text) {
  const chars = [...text].length;
  const lines = Math.max(1, text.split('\n').length - (text.endsWith('\n') ? 1 : 0));
  return `[Clipboard #${id} | ${chars} chars, ${lines} lines]`;
}

function countLines(n) {
  return n === 1 ? '1 line' : `${n} lines`;
}

function countItems(n) {
  return n === 1 ? '1 item' : `${n} items`;
}

function lineCount(text) {
  if (!text) return 0;
  return text.replace(/\n$/, '').split('\n').length;
}

export function shortDuration(ms) {
  const secs = Math.floor(ms / 1000);
  if (secs < 60) return `${Math.round(ms / 100) / 10}s`;
  if (secs < 3600) return `${Math.floor(secs / 60)}m ${String(secs % 60).padStart(2, '0')}s`;
  return `${Math.floor(secs / 3600)}h ${String(Math.floor((secs % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * What a call acts on, as the pod's registry says (`tools.js`, generated
 * from src/tools/registry.rs, so the TUI, `pod send` and this page agree):
 * the tool's defining argument, a search's pattern and where, or for
 * another (MCP) tool a guessed key, then its first string; else the JSON.
 */
function keyArgument(name, args) {
  if (args === null || args === undefined) return '';
  if (typeof args !== 'object' || Array.isArray(args)) return JSON.stringify(args);
  if (name === 'update_plan' && Array.isArray(args.items)) return countItems(args.items.length);
  const field = (k) => (typeof args[k] === 'string' ? args[k] : null);
  const def = Object.hasOwn(SUMMARY, name) ? SUMMARY[name] : null;
  let text = null;
  if (def?.arg) {
    text = field(def.arg);
    if (def.url && text !== null) text = shownUrl(text);
  } else if (def?.search && field('pattern') !== null) {
    const path = field('path');
    text = path && path !== '.' ? `${field('pattern')} in ${path}` : field('pattern');
  } else if (!def) {
    text = GUESSED_KEYS.map(field).find((v) => v !== null)
      ?? Object.values(args).find((v) => typeof v === 'string') ?? null;
  }
  if (text !== null) return text.split('\n')[0];
  return Object.keys(args).length === 0 ? '' : JSON.stringify(args);
}

/**
 * A URL as the fetch will request it, as the approval and the other
 * clients show it (src/tools/fetch: `as_requested`): parsed and serialised
 * by the same WHATWG standard — host in lower case or punycode, default
 * port dropped, `..` resolved, spaces and control characters
 * percent-encoded; as written when it does not parse.
 */
function shownUrl(raw) {
  try {
    return new URL(raw).href;
  } catch {
    return raw;
  }
}

/** The exit code a failed `bash` command reported on a last line. */
function exitCode(output) {
  const lines = output.split('\n').reverse().slice(0, 3);
  for (const line of lines) {
    const m = /^\[exit code: (-?\d+)\]$/.exec(line.trim());
    if (m) return m[1];
  }
  return null;
}

/**
 * The diff a file-editing call makes, from its arguments: `edit_file` as
 * the lines of `old_string` against `new_string` (common lines kept as
 * context), `write_file` as its content added. Null for other calls.
 */
export function diffOfCall(name, args) {
  if (!args || typeof args !== 'object') return null;
  if (name === 'write_file' && typeof args.content === 'string') {
    return args.content.replace(/\n$/, '').split('\n').map((l) => `+${l}`);
  }
  if (name !== 'edit_file' || typeof args.old_string !== 'string' || typeof args.new_string !== 'string') {
    return null;
  }
  const a = args.old_string.replace(/\n$/, '').split('\n');
  const b = args.new_string.replace(/\n$/, '').split('\n');
  if (a.length * b.length > 250000) {
    return [...a.map((l) => `-${l}`), ...b.map((l) => `+${l}`)];
  }
  // Longest common subsequence of lines, then walk it.
  const n = a.length;
  const m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      out.push(` ${a[i]}`);
      i++;
      j++;
    } else if (i < n && (j >= m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push(`-${a[i]}`);
      i++;
    } else {
      out.push(`+${b[j]}`);
      j++;
    }
  }
  return out;
}

function diffClass(line) {
  if (line.startsWith('+++') || line.startsWith('---')) return 'diff-head';
  if (line.startsWith('+')) return 'diff-add';
  if (line.startsWith('-')) return 'diff-del';
  if (line.startsWith('@@')) return 'diff-hunk';
  return null;
}

/** A unified diff (or a call's diff lines) as a coloured <pre>. */
export function diffPre(lines) {
  return h(
    'pre',
    { class: 'diff' },
    lines.map((line) => h('span', { class: diffClass(line) }, `${line}\n`)),
  );
}

function looksLikeDiff(tool, preview) {
  return tool === 'edit_file' || tool === 'write_file' || /^(---|@@|diff --git)/.test(preview);
}

/** An approval's preview: a coloured diff for file edits, else the text. */
export function previewPre(tool, preview) {
  const text = String(preview ?? '');
  if (looksLikeDiff(tool, text)) return diffPre(text.replace(/\n$/, '').split('\n'));
  return h('pre', { class: 'preview' }, text);
}

function sessionLabel(start, switchReason) {
  const id = shortId(start.session_id);
  const fork = start.forked_from;
  if (fork) {
    const forkId = typeof fork === 'string' ? fork : fork.session_id;
    const at = fork && typeof fork === 'object' && fork.seq !== null && fork.seq !== undefined ? ` at ${fork.seq}` : '';
    return `forked from ${shortId(forkId)}${at} · session ${id}`;
  }
  if (start.compacted_from) return `session ${id} · compacted from ${shortId(start.compacted_from)}`;
  if (switchReason === 'new') return `new session ${id}`;
  if (switchReason === 'resume') return `resumed session ${id}`;
  if (switchReason === 'rewind') return `rewound · session ${id}`;
  return `session ${id}`;
}

const TURN_END_LABELS = {
  cancelled: 'turn cancelled',
  error: 'turn ended by an error',
  max_steps: 'turn stopped: too many steps',
  interrupted: 'turn interrupted: the pod stopped mid-turn',
};

export class Conversation {
  /**
   * `log` holds the confirmed blocks, `live` the block in flight.
   * `hooks`: `fetchBlob(id) → Promise<url>`, `onChange()` (pending
   * approvals or plan changed), `onLiveEntry(entry)` (an entry that
   * arrived after the snapshot: for notifications).
   */
  constructor(log, live, hooks) {
    this.log = log;
    this.live = live;
    this.hooks = hooks;
    this.sessionId = null;
    this.lastSeq = null;
    this.inFlight = null;
    this.retry = null;
    this.tools = new Map();
    this.pending = [];
    this.plan = null;
    this.turn = null;
    this.switchReason = null;
    this.tailing = null;
    this.liveDirty = false;
    this.target = log;
    this.lazy = new IntersectionObserver((seen) => this.renderSeen(seen), { rootMargin: '800px 0px' });
    // The history not drawn yet: entries [0, end) of the last snapshot,
    // drawn from `next` on, before `marker` (see loadSnapshot).
    this.history = null;
    // A tail snapshot's session and the seq of the oldest entry drawn or
    // held: older ones are paged in with `get_entries` (olderBefore,
    // prependOlder). `generation` tells a page asked for before the last
    // snapshot from one that belongs to it.
    this.pagedSession = null;
    this.oldestSeq = 0;
    this.generation = 0;
    this.listed = new Set();
  }

  /**
   * Replaces everything with what a (re)connect's snapshot says.
   *
   * Only the newest entries are drawn now, from a point no later entry
   * reaches back across (splitHistory), so drawing the older history
   * later changes nothing drawn now. What the history holds that outlives
   * it (the plan) is read here without drawing; the approvals it leaves
   * waiting are settled when it is drawn (drawHistory); a later frame that
   * needs one of its calls draws it at once (needCall).
   */
  loadSnapshot(snapshot) {
    this.lazy.disconnect();
    this.tools.clear();
    this.pending = [];
    this.plan = null;
    this.retry = null;
    this.tailing = null;
    this.sessionId = snapshot.session_id;
    const entries = Array.isArray(snapshot.entries) ? snapshot.entries : [];
    this.generation++;
    this.pagedSession = snapshot.session_id;
    this.oldestSeq = entries.length ? entries[0].seq : 0;
    this.lastSeq = entries.length ? entries[entries.length - 1].seq : null;
    const split = splitHistory(entries);
    const listed = new Set(snapshot.status?.pending_approvals || []);
    this.listed = listed;
    const fragment = document.createDocumentFragment();
    const marker = document.createComment('history');
    fragment.append(marker);
    this.history =
      split > 0
        ? { entries, next: 0, end: split, marker, listed, calls: null, pending: [], reason: this.switchReason, scheduled: false, drawing: false }
        : null;
    this.target = fragment;
    const eagerFrom = Math.max(0, entries.length - EAGER_MARKDOWN);
    for (let i = split; i < entries.length; i++) {
      this.addEntry(entries[i].entry, { live: false, lazy: i < eagerFrom });
    }
    this.target = this.log;
    if (split === 0) relabel(fragment, this.switchReason);
    if (this.plan === null && split > 0) this.plan = latestPlan(entries, split);
    this.switchReason = null;
    replace(this.log, fragment);
    for (const p of [...this.pending]) if (!listed.has(p.call_id)) this.dropPending(p.call_id);
    // An approval still waiting whose request is in the history (rare: its
    // call has many entries after it): its buttons cannot wait.
    if (this.history && [...listed].some((id) => !this.pending.some((p) => p.call_id === id))) this.drawHistory(Infinity);
    const turn = snapshot.status?.turn;
    this.turn = turn ? { turnId: turn.turn_id, started: null, seen: false } : null;
    this.inFlight = snapshot.in_flight || null;
    this.renderLive(true);
    this.hooks.onChange();
    this.log.classList.toggle('drawing', !!this.history);
    if (this.history) this.scheduleHistory();
    else if (split === 0) performance.mark('pod:history-drawn', { detail: entries.length });
  }

  scheduleHistory() {
    const history = this.history;
    if (!history || history.scheduled) return;
    history.scheduled = true;
    const run = () => {
      history.scheduled = false;
      if (this.history !== history) return; // a newer snapshot replaced it
      this.drawHistory(performance.now() + CHUNK_MS);
      if (this.history) this.scheduleHistory();
    };
    if (typeof requestIdleCallback === 'function') requestIdleCallback(run, { timeout: 200 });
    else setTimeout(run, 0);
  }

  /**
   * Draws the history not drawn yet, oldest first, until `deadline` (a
   * performance.now() time; Infinity draws all of it), above what is
   * drawn, keeping the reader's place.
   */
  drawHistory(deadline) {
    const history = this.history;
    if (!history || history.drawing) return;
    history.drawing = true;
    // The history's own projection state: it must not touch the newer
    // entries' pending approvals, plan or turn clock.
    const saved = { pending: this.pending, plan: this.plan, turn: this.turn, target: this.target };
    this.pending = history.pending;
    this.turn = null;
    const fragment = document.createDocumentFragment();
    this.target = fragment;
    const first = history.next;
    const { entries, end } = history;
    let i = first;
    try {
      while (i < end) {
        this.addEntry(entries[i].entry, { live: false, lazy: true });
        i++;
        if ((i & 15) === 0 && performance.now() >= deadline) break;
      }
    } finally {
      history.next = i;
      history.pending = this.pending;
      history.drawing = false;
      Object.assign(this, saved);
    }
    if (first === 0) relabel(fragment, history.reason);
    // Each chunk in a box of its own: adding one lays out that chunk and
    // the log's few children, not every block drawn before it.
    const chunk = h('div', { class: 'history' });
    chunk.append(fragment);
    // Unless the reader looks at history drawn before (above this chunk),
    // what they see is below it: keep it where it is on the screen.
    const below = history.marker.nextElementSibling;
    const seen = history.marker.isConnected && below ? below.getBoundingClientRect().top : null;
    history.marker.before(chunk);
    if (seen !== null && seen < innerHeight) window.scrollBy(0, below.getBoundingClientRect().top - seen);
    if (i >= end) {
      history.marker.remove();
      this.history = null;
      this.log.classList.remove('drawing');
      // Approvals the history left waiting: the snapshot's status says
      // which still wait (the newer entries ended their turn otherwise).
      // They are older than any the newer entries asked for: first.
      const waiting = history.pending.filter((p) => history.listed.has(p.call_id));
      for (const p of history.pending) if (!history.listed.has(p.call_id)) this.setAwaiting(p.call_id, false);
      if (waiting.length) {
        this.pending = [...waiting, ...this.pending];
        this.hooks.onChange();
      }
      performance.mark('pod:history-drawn', { detail: entries.length });
      this.hooks.onHistoryDrawn?.();
    }
  }

  /**
   * The `before_seq` to page older history with, or null: the session is
   * shown from its start, or the snapshot's own history is still being
   * drawn (a page must go above it).
   */
  olderBefore() {
    if (this.history || this.oldestSeq <= 0) return null;
    return this.oldestSeq;
  }

  /**
   * Draws a page of older entries (a `get_entries` answer for
   * `olderBefore()`) above everything, keeping the reader's place. A page
   * that does not end just before the oldest entry shown is dropped: it
   * was asked for before a newer snapshot, or the log is not what the
   * view holds.
   */
  prependOlder(lines, generation) {
    if (generation !== this.generation || !Array.isArray(lines)) return false;
    if (lines.length === 0) {
      this.oldestSeq = 0;
      return true;
    }
    if (lines[lines.length - 1]?.seq !== this.oldestSeq - 1) return false;
    // The page's own projection state, as for the snapshot's history.
    const saved = { pending: this.pending, plan: this.plan, turn: this.turn, target: this.target };
    this.pending = [];
    this.turn = null;
    this.plan = null;
    const fragment = document.createDocumentFragment();
    this.target = fragment;
    let plan = null;
    try {
      for (const line of lines) this.addEntry(line.entry, { live: false, lazy: true });
      for (const p of this.pending) if (!this.listed.has(p.call_id)) this.setAwaiting(p.call_id, false);
      plan = this.plan;
    } finally {
      Object.assign(this, saved);
    }
    this.oldestSeq = lines[0].seq;
    const chunk = h('div', { class: 'history' });
    chunk.append(fragment);
    const anchor = this.log.firstElementChild;
    const before = anchor ? anchor.getBoundingClientRect().top : null;
    this.log.prepend(chunk);
    if (anchor) {
      const moved = anchor.getBoundingClientRect().top - before;
      if (moved !== 0) window.scrollBy(0, moved);
    }
    if (this.plan === null && plan !== null) {
      this.plan = plan;
      this.hooks.onChange();
    }
    return true;
  }

  /** A call of the history not drawn yet is about to be used: draw it all now. */
  needCall(callId) {
    const history = this.history;
    if (!history || history.drawing || this.tools.has(callId)) return;
    if (history.calls === null) {
      history.calls = new Set();
      for (const call of callsOf(history.entries, history.next, history.end)) history.calls.add(call.call_id);
    }
    if (history.calls.has(callId)) this.drawHistory(Infinity);
  }

  /**
   * Applies one frame other than a snapshot. Returns null, or a reason to
   * resync (the entry stream has a gap: reconnect for a fresh snapshot).
   */
  apply(frame) {
    const before = this.inFlight;
    this.foldInFlight(frame);
    let resync = null;
    switch (frame.type) {
      case 'entry':
        resync = this.applyEntry(frame);
        break;
      case 'turn_start':
        this.turn = { turnId: frame.turn_id, started: performance.now(), seen: true };
        break;
      case 'notification':
        this.notice(frame.level, `[${frame.source}] ${frame.message}`);
        break;
      case 'error':
        this.notice('error', `[error ${frame.code || 'error'}] ${frame.message || ''}`);
        break;
      case 'compact_start':
        this.notice('info', '[compact] starting');
        break;
      case 'compact_done': {
        let text = `[compact] done (new session ${shortId(frame.new_session_id)})`;
        if (frame.tokens_before > 0) text += ` · context ${frame.tokens_before} → ${frame.tokens_after} tokens`;
        this.notice('info', text);
        this.sessionId = frame.new_session_id;
        this.lastSeq = null;
        break;
      }
      case 'compact_failed':
        this.notice('error', `[compact error] ${frame.error}`);
        break;
      case 'session_switched':
        this.switchReason = frame.reason;
        break;
      case 'retry':
        this.retry = frame;
        break;
      default:
        break;
    }
    if (['text_delta', 'reasoning_delta', 'tool_call_start', 'entry', 'turn_start'].includes(frame.type)) {
      this.retry = null;
    }
    if (before !== this.inFlight || frame.type === 'retry' || frame.type.endsWith('_delta')) {
      this.renderLive(false);
    }
    return resync;
  }

  /** The pod's rule for the block in flight (crates/protocol/src/in_flight.rs). */
  foldInFlight(frame) {
    const cur = this.inFlight;
    switch (frame.type) {
      case 'text_delta':
        this.inFlight = cur?.type === 'text' ? { ...cur, text: cur.text + frame.text } : { type: 'text', text: frame.text };
        break;
      case 'reasoning_delta':
        this.inFlight =
          cur?.type === 'reasoning' ? { ...cur, text: cur.text + frame.text } : { type: 'reasoning', text: frame.text };
        break;
      case 'tool_call_start':
        this.inFlight = { type: 'tool_call', call_id: frame.call_id, name: frame.name, arguments_so_far: '' };
        break;
      case 'tool_call_args_delta':
        if (cur?.type === 'tool_call' && cur.call_id === frame.call_id) {
          this.inFlight = { ...cur, arguments_so_far: cur.arguments_so_far + frame.delta };
        }
        break;
      case 'tool_output_delta': {
        const so_far = cur?.type === 'tool_output' && cur.call_id === frame.call_id ? cur.text : '';
        // Only the tail is drawn; keep a bounded amount of it.
        this.inFlight = { type: 'tool_output', call_id: frame.call_id, text: (so_far + frame.text).slice(-16384) };
        break;
      }
      case 'entry':
      case 'turn_start':
      case 'retry':
      case 'compact_done':
      case 'session_switched':
        this.inFlight = null;
        break;
      default:
        break;
    }
  }

  applyEntry({ session_id, seq, entry }) {
    if (this.sessionId === session_id) {
      if (this.lastSeq !== null && seq <= this.lastSeq) return null;
      if (this.lastSeq !== null && seq !== this.lastSeq + 1) return `entry ${seq} after ${this.lastSeq}: a gap`;
      if (this.lastSeq === null && seq !== 0) return `session starts at entry ${seq}`;
    } else if (seq !== 0) {
      return `entry ${seq} of an unexpected session`;
    }
    this.sessionId = session_id;
    this.lastSeq = seq;
    this.addEntry(entry, { live: true, lazy: false });
    this.hooks.onLiveEntry(entry);
    return null;
  }

  notice(level, text) {
    this.push(h('div', { class: `notice ${level || 'info'}`, role: level === 'error' ? 'alert' : null }, text));
  }

  push(el) {
    this.target.append(el);
    return el;
  }

  markdown(text, lazy) {
    const el = h('div', { class: 'md' });
    if (lazy) {
      el.classList.add('pending');
      el.textContent = text;
      el.mdSource = text;
      this.lazy.observe(el);
    } else {
      el.append(renderMarkdown(text));
    }
    return el;
  }

  renderSeen(seen) {
    for (const { target, isIntersecting } of seen) {
      if (!isIntersecting || target.mdSource === undefined) continue;
      this.lazy.unobserve(target);
      target.classList.remove('pending');
      replace(target, renderMarkdown(target.mdSource));
      delete target.mdSource;
    }
  }

  addEntry(entry, { live, lazy }) {
    if (!entry || typeof entry !== 'object') return;
    switch (entry.kind) {
      case 'session_start': {
        const el = h('div', { class: 'divider', role: 'separator' }, sessionLabel(entry, null));
        el.sessionStart = entry;
        this.push(el);
        break;
      }
      case 'user_input':
        this.push(this.userBlock(entry));
        break;
      case 'assistant_items':
        for (const item of entry.items || []) this.assistantItem(item, live, lazy);
        break;
      case 'tool_results':
        for (const r of entry.results || []) this.toolResult(r);
        break;
      case 'approval_request':
        this.pending.push(entry);
        this.setAwaiting(entry.call_id, entry.reason || true);
        if (live) this.hooks.onChange();
        break;
      case 'approval_decision':
        this.dropPending(entry.call_id);
        this.decision(entry);
        if (live) this.hooks.onChange();
        break;
      case 'model_change':
        this.push(h('div', { class: 'meta' }, `model: ${entry.provider}/${entry.model}`));
        break;
      case 'hook_injected_items':
        for (const item of entry.items || []) this.injected(item);
        break;
      case 'turn_end':
        this.turnEnd(entry, live);
        break;
      case 'checkpoint':
        if (entry.checkpoint === null && entry.error) {
          this.push(h('div', { class: 'meta warn' }, `checkpoint not taken: ${entry.error}`));
        }
        break;
      case 'rewind':
        this.push(h('div', { class: 'meta' }, `rewound: ${(entry.files_restored || []).length} files restored`));
        break;
      case 'agent_started':
        this.push(
          h(
            'div',
            { class: 'agent-entry' },
            h('div', { class: 'agent-head' }, '⎇ agent ', agentLink(entry.name), ' started'),
            h('div', { class: 'agent-text' }, String(entry.task ?? '')),
          ),
        );
        break;
      case 'agent_turn_end': {
        const u = entry.usage;
        const usage = u ? ` · ${u.input_tokens ?? 0} in · ${u.output_tokens ?? 0} out` : '';
        this.push(
          h(
            'div',
            { class: 'agent-entry' },
            h('div', { class: 'agent-head' }, '⎇ agent ', agentLink(entry.name), `: turn ${entry.reason}${usage}`),
            entry.text ? h('div', { class: 'agent-text dim' }, String(entry.text)) : null,
          ),
        );
        break;
      }
      case 'rule_revoked':
        this.push(h('div', { class: 'meta' }, `rule revoked: ${entry.rule}`));
        break;
      default:
        this.push(h('div', { class: 'meta' }, '[an entry of a kind this version cannot show]'));
        break;
    }
  }

  userBlock(entry) {
    const el = h('div', { class: 'user' });
    const segments = Array.isArray(entry.segments) ? entry.segments : [];
    for (const seg of segments) el.append(this.segment(seg));
    return el;
  }

  segment(seg) {
    switch (seg?.type) {
      case 'text':
        return h('span', { class: 'text' }, String(seg.text ?? ''));
      case 'paste':
        return h(
          'details',
          { class: 'chip paste' },
          h('summary', {}, pasteLabel(seg.id, String(seg.text ?? ''))),
          h('pre', {}, String(seg.text ?? '')),
        );
      case 'file_ref':
        return h('span', { class: 'chip file' }, `@${seg.path}`);
      case 'knowledge_ref':
        return h('span', { class: 'chip knowledge' }, `#${seg.slug}`);
      case 'workflow_invoke':
        return h('span', { class: 'chip workflow' }, seg.args ? `/${seg.slug} ${seg.args}` : `/${seg.slug}`);
      case 'image': {
        const name = seg.name || seg.blob || 'image';
        const fig = h('figure', { class: 'chip image' }, h('figcaption', {}, name));
        this.hooks
          .fetchBlob(seg.blob)
          .then((url) => fig.prepend(h('img', { src: url, alt: name })))
          .catch((e) => fig.append(h('span', { class: 'error' }, ` (${e.message})`)));
        return fig;
      }
      default:
        return h('span', { class: 'chip unknown' }, `[${seg?.type ?? 'unknown'} input]`);
    }
  }

  assistantItem(item, live, lazy) {
    switch (item?.type) {
      case 'text':
        this.push(h('div', { class: 'assistant' }, this.markdown(String(item.text ?? ''), lazy)));
        break;
      case 'reasoning':
        this.push(this.reasoning(String(item.text ?? ''), false, lazy));
        break;
      case 'tool_call':
        this.toolCall(item, live);
        break;
      default:
        this.push(h('div', { class: 'meta' }, '[a block of a kind this version cannot show]'));
    }
  }

  reasoning(text, open, lazy) {
    return h(
      'details',
      { class: 'reasoning', open },
      h('summary', {}, open ? 'reasoning…' : `reasoning · ${countLines(lineCount(text))}`),
      this.markdown(text, lazy),
    );
  }

  toolCall(item, live) {
    const { call_id, name } = item;
    const args = item.arguments;
    const el = h('div', { class: 'tool', 'data-call': call_id });
    // A background job outlives its call: the call says so.
    const job = name === 'bash' && args?.background === true ? h('span', { class: 'job-mark' }, 'background job') : null;
    el.append(h('div', { class: 'tool-head' }, h('span', { class: 'tool-name' }, `⚙ ${name}`), ' ', job, job ? ' ' : null, h('span', { class: 'tool-arg' }, keyArgument(name, args))));
    const diff = diffOfCall(name, args);
    if (diff) el.append(fold(diff.length > FOLD_LINES, `diff · ${countLines(diff.length)}`, diffPre(diff)));
    const body = h('div', { class: 'tool-body' });
    const tail = h('pre', { class: 'tail', hidden: true });
    const state = h('div', { class: 'tool-state' }, 'running…');
    const decisions = h('div', { class: 'decisions' });
    el.append(decisions, tail, state, body);
    const tool = { el, name, args, diff, body, tail, state, decisions, started: live ? performance.now() : null, done: false };
    this.tools.set(call_id, tool);
    if (name === 'update_plan' && Array.isArray(args?.items)) {
      this.plan = args.items;
      if (live) this.hooks.onChange();
    }
    this.push(el);
  }

  toolResult(r) {
    this.needCall(r.call_id);
    let tool = this.tools.get(r.call_id);
    if (!tool) {
      this.toolCall({ call_id: r.call_id, name: '(unknown call)', arguments: null }, false);
      tool = this.tools.get(r.call_id);
    }
    tool.done = true;
    tool.el.classList.toggle('failed', !!r.is_error);
    tool.state.remove();
    tool.tail.remove();
    if (this.tailing === r.call_id) this.tailing = null;
    const output = String(r.output ?? '');
    const lines = lineCount(output);
    const first = output.split('\n')[0];
    let head = first;
    if (r.is_error) {
      const code = exitCode(output);
      head = code !== null ? `error: exit code ${code}` : `error: ${first}`;
    }
    if (lines > 1) head += ` (${countLines(lines)})`;
    const pre = h('pre', { class: r.is_error ? 'output error' : 'output' }, output);
    const long = lines > FOLD_LINES || output.length > FOLD_CHARS;
    if (!tool.diff && tool.args && typeof tool.args === 'object' && Object.keys(tool.args).length > 1) {
      tool.body.append(fold(true, 'arguments', h('pre', { class: 'args' }, JSON.stringify(tool.args, null, 2))));
    }
    if (long) tool.body.append(fold(true, head, pre));
    else if (output) tool.body.append(pre);
    else tool.body.append(h('div', { class: 'tool-state' }, '(no output)'));
  }

  setAwaiting(callId, reason) {
    this.needCall(callId);
    const tool = this.tools.get(callId);
    if (!tool || tool.done) return;
    tool.el.classList.toggle('awaiting', !!reason);
    tool.state.textContent = reason ? `waiting for approval (${reason === true ? 'asked' : reason})` : 'running…';
  }

  dropPending(callId) {
    this.pending = this.pending.filter((p) => p.call_id !== callId);
    this.setAwaiting(callId, false);
  }

  decision(d) {
    const verb = d.decision === 'allow' ? 'allowed' : d.decision === 'deny' ? 'denied' : 'decided';
    const mark = d.decision === 'allow' ? '✓' : d.decision === 'deny' ? '✗' : '·';
    let text;
    if (d.by === 'cancel') text = 'cancelled';
    else if (d.by === 'policy') text = `${verb} by policy`;
    else if (d.by === 'hook') text = `${verb} by a hook${d.client ? ` (${d.client})` : ''}`;
    else text = `${verb} by ${d.client || 'a client'}`;
    if (d.remote) text += ` from ${d.remote}`;
    if (d.rule && (d.scope === 'session' || d.scope === 'always')) text += ` (${d.scope}: ${d.rule})`;
    else if (d.rule && d.by === 'policy') text += ` (${d.rule})`;
    if (d.message) text += `: ${d.message}`;
    const el = h('div', { class: `decision ${d.decision}` }, `${mark} ${text}`);
    this.needCall(d.call_id);
    const tool = this.tools.get(d.call_id);
    if (tool) tool.decisions.append(el);
    else this.push(el);
  }

  injected(item) {
    const source = String(item?.source ?? '');
    const text = String(item?.text ?? '');
    if (source === 'project_instructions') {
      const nl = text.indexOf('\n');
      const file = (nl >= 0 ? text.slice(0, nl) : text).trim();
      const body = nl >= 0 ? text.slice(nl + 1) : '';
      this.push(fold(true, `project instructions · ${file} · ${countLines(lineCount(body))}`, this.markdown(body, true), 'injected'));
    } else if (source === 'compact_summary') {
      this.push(fold(true, 'compaction summary', this.markdown(text, true), 'injected'));
    } else if (source === 'environment') {
      this.push(fold(true, 'environment', h('pre', {}, text), 'injected'));
    } else {
      this.push(h('div', { class: 'injected' }, `[${source}] ${text}`));
    }
  }

  turnEnd(entry, live) {
    for (const p of this.pending) this.setAwaiting(p.call_id, false);
    this.pending = [];
    const clock = this.turn;
    this.turn = null;
    const same = clock && (!entry.turn_id || clock.turnId === entry.turn_id);
    const duration = live && same && clock.seen ? performance.now() - clock.started : null;
    if (entry.reason === 'completed') {
      if (duration !== null) this.push(h('div', { class: 'meta turn-end' }, `done in ${shortDuration(duration)}`));
      return;
    }
    const label = TURN_END_LABELS[entry.reason] || `turn ended (${entry.reason})`;
    let text = duration !== null ? `[${label} after ${shortDuration(duration)}]` : `[${label}]`;
    if (entry.error) text += ` ${entry.error.code || 'error'}: ${entry.error.message || ''}`;
    this.push(h('div', { class: `turn-end ${entry.reason === 'error' ? 'error' : 'warn'}` }, text));
  }

  /** Draws the block in flight (batched to one draw per frame). */
  renderLive(now) {
    if (now) {
      this.drawLive();
      return;
    }
    if (this.liveDirty) return;
    this.liveDirty = true;
    const draw = () => {
      this.liveDirty = false;
      this.drawLive();
    };
    if (document.hidden) setTimeout(draw, 100);
    else requestAnimationFrame(draw);
  }

  drawLive() {
    const f = this.inFlight;
    const shown = [];
    if (f?.type === 'text') shown.push(h('div', { class: 'assistant streaming' }, h('div', { class: 'md' }, renderMarkdown(f.text))));
    else if (f?.type === 'reasoning') shown.push(this.reasoning(f.text, true));
    else if (f?.type === 'tool_call') {
      shown.push(
        h('div', { class: 'tool streaming' }, h('div', { class: 'tool-head' }, h('span', { class: 'tool-name' }, `⚙ ${f.name}`), ' ', h('span', { class: 'tool-arg' }, f.arguments_so_far.slice(0, 400)))),
      );
    }
    if (this.retry) {
      const r = this.retry;
      const error = String(r.error || '').split('\n')[0];
      shown.push(h('div', { class: 'retry warn' }, `↻ ${error} · retrying in ${shortDuration(r.delay_ms || 0)} (${r.attempt}/${r.max_attempts})`));
    }
    replace(this.live, ...shown);
    this.drawTail();
  }

  /** A running tool's output tail goes under its call. */
  drawTail() {
    const f = this.inFlight;
    const callId = f?.type === 'tool_output' ? f.call_id : null;
    if (this.tailing && this.tailing !== callId) {
      const old = this.tools.get(this.tailing);
      if (old) old.tail.hidden = true;
    }
    this.tailing = callId;
    if (callId) this.needCall(callId);
    const tool = callId ? this.tools.get(callId) : null;
    if (!tool || tool.done) return;
    const lines = f.text.replace(/\n$/, '').split('\n');
    tool.tail.textContent = lines.slice(-OUTPUT_TAIL_LINES).join('\n');
    tool.tail.hidden = false;
  }
}

/**
 * Where a snapshot's history ends and the entries drawn at once begin: the
 * latest point at least EAGER_ENTRIES from the end that no later entry
 * reaches across (a result, an approval request or a decision of a call
 * made before it), so drawing the history later changes nothing drawn
 * now; 0 if there is none. Reads only the entries after that point.
 */
function splitHistory(entries) {
  const limit = entries.length - EAGER_ENTRIES;
  if (limit <= 0) return 0;
  const unmade = new Set();
  for (let i = entries.length; i > 0; i--) {
    if (i <= limit && unmade.size === 0) return i;
    const entry = entries[i - 1]?.entry;
    switch (entry?.kind) {
      case 'assistant_items':
        for (const item of entry.items || []) if (item?.type === 'tool_call') unmade.delete(item.call_id);
        break;
      case 'tool_results':
        for (const r of entry.results || []) unmade.add(r?.call_id);
        break;
      case 'approval_request':
      case 'approval_decision':
        unmade.add(entry.call_id);
        break;
      default:
        break;
    }
  }
  return 0;
}

/** The tool calls of `entries[from..to)`, newest first. */
function* callsOf(entries, from, to) {
  for (let i = to - 1; i >= from; i--) {
    const entry = entries[i]?.entry;
    if (entry?.kind !== 'assistant_items' || !Array.isArray(entry.items)) continue;
    for (let j = entry.items.length - 1; j >= 0; j--) {
      if (entry.items[j]?.type === 'tool_call') yield entry.items[j];
    }
  }
}

/** The items of the latest `update_plan` call of `entries[0..to)`, or null. */
function latestPlan(entries, to) {
  for (let i = to - 1; i >= 0; i--) {
    const entry = entries[i].entry;
    if (entry?.kind !== 'assistant_items' || !Array.isArray(entry.items)) continue;
    for (let j = entry.items.length - 1; j >= 0; j--) {
      const item = entry.items[j];
      if (item?.type === 'tool_call' && item.name === 'update_plan' && Array.isArray(item.arguments?.items)) {
        return item.arguments.items;
      }
    }
  }
  return null;
}

/** A snapshot's first divider names how the session was reached. */
function relabel(fragment, reason) {
  const first = fragment.firstElementChild;
  if (first && first.classList.contains('divider') && reason) {
    first.textContent = sessionLabel(first.sessionStart, reason);
  }
}

/** A <details> whose summary says what it hides; open when not `folded`. */
function fold(folded, summary, body, cls) {
  return h('details', { class: cls || 'fold', open: !folded }, h('summary', {}, summary), body);
}

/** A child pod's name as a link to its own view (`?agent=`). */
function agentLink(name) {
  const text = String(name ?? '?');
  return h('a', { href: viewAddress(text) }, text);
}

