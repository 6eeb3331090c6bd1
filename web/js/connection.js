// The device token and the WebSocket to the pod.
//
// The token lives in localStorage for this origin and travels only as the
// WebSocket subprotocol `pod.token.<token>` or an `Authorization` header:
// never in a URL, a cookie or the page. A lost connection is retried with
// a growing delay; every new connection starts with a fresh snapshot.

const TOKEN_KEY = 'pod.token';
/**
 * Entries the snapshot carries (`/v1/ws?tail=`): a few screens. Older
 * history is paged in with `get_entries` as the reader scrolls up, so
 * opening a long session costs what opening a short one does.
 */
export const TAIL_ENTRIES = 200;
const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 5000;

export function storedToken() {
  try {
    return localStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function forgetToken() {
  try {
    localStorage.removeItem(TOKEN_KEY);
  } catch {
    // Storage refused (private mode): nothing was kept.
  }
}

/**
 * Takes a `#pair=<code>` out of the address bar at once (so it is never
 * shared, bookmarked or reused) and exchanges it at `/v1/pair` for a device
 * token. Returns null when there is no code, else `{token}` or `{error}`.
 */
export async function pairFromAddress() {
  const match = /(?:^#|&)pair=([^&]+)/.exec(location.hash);
  if (!match) return null;
  history.replaceState(null, '', location.pathname + location.search);
  const code = decodeURIComponent(match[1]);
  let response;
  try {
    response = await fetch('/v1/pair', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ code }),
      cache: 'no-store',
    });
  } catch (e) {
    return { error: `could not reach the pod to pair (${e.message})` };
  }
  if (!response.ok) {
    return {
      error:
        response.status === 401
          ? 'this pairing link was already used or has expired: make a new one with `pod url`'
          : `pairing failed (HTTP ${response.status})`,
    };
  }
  const body = await response.json().catch(() => ({}));
  if (typeof body.token !== 'string') return { error: 'the pod answered the pairing without a token' };
  try {
    localStorage.setItem(TOKEN_KEY, body.token);
  } catch {
    // Not kept: this tab still works until it is closed.
  }
  return { token: body.token };
}

/**
 * The child pod this page shows (`?agent=<full name>` in its address), or
 * null for the pod serving it. The page is the same either way: it only
 * connects to `/v1/ws?agent=…`, and the pod routes it to that child.
 */
export function shownAgent() {
  return new URLSearchParams(location.search).get('agent') || null;
}

/**
 * The address of a pod's view: the serving pod's without `agent` (its own
 * name or null), a child's with `?agent=`.
 */
export function viewAddress(agent) {
  return agent ? `${location.pathname}?agent=${encodeURIComponent(agent)}` : location.pathname;
}

/** `fetch` with the device token as a bearer token. */
export function authorizedFetch(token, url, options = {}) {
  const headers = new Headers(options.headers || {});
  headers.set('Authorization', `Bearer ${token}`);
  return fetch(url, { ...options, headers, cache: 'no-store' });
}

export class Connection {
  /**
   * `onFrame(frame)` gets every frame; `onState(state, detail)` hears
   * `connecting`, `open`, `disconnected` (detail: ms until the next try)
   * `unauthorized` (the token was refused: no more tries) and `gone` (the
   * child pod this view shows does not run: no more tries; detail: its name).
   */
  constructor(token, onFrame, onState) {
    this.token = token;
    this.onFrame = onFrame;
    this.onState = onState;
    this.ws = null;
    this.delay = FIRST_DELAY_MS;
    this.timer = null;
    this.stopped = false;
    this.nextId = 1;
    this.waiting = new Map();
  }

  start() {
    this.stopped = false;
    this.open();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close();
    this.ws = null;
  }

  open() {
    clearTimeout(this.timer);
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    this.onState('connecting');
    let ws;
    // For the bench and the curious: where a connection's time starts.
    performance.mark('pod:connect');
    try {
      const agent = shownAgent();
      const query = `tail=${TAIL_ENTRIES}${agent ? `&agent=${encodeURIComponent(agent)}` : ''}`;
      ws = new WebSocket(`${scheme}//${location.host}/v1/ws?${query}`, [
        'pod.v1',
        `pod.token.${this.token}`,
      ]);
    } catch {
      this.retryLater(false);
      return;
    }
    this.ws = ws;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      this.onState('open');
    };
    let first = true;
    ws.onmessage = (message) => {
      if (first) {
        // For the bench: the snapshot has arrived (its size: characters,
        // bytes for ASCII); parsing and drawing follow.
        performance.mark('pod:first-frame', { detail: typeof message.data === 'string' ? message.data.length : 0 });
        first = false;
      }
      if (typeof message.data !== 'string') return;
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (!frame || typeof frame !== 'object' || typeof frame.type !== 'string') return;
      if (frame.type === 'snapshot') this.delay = FIRST_DELAY_MS;
      if (frame.type === 'error' && frame.code === 'unauthorized') {
        this.stopped = true;
        this.onState('unauthorized');
      }
      this.settle(frame);
      this.onFrame(frame);
    };
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      for (const { reject } of this.waiting.values()) reject(new Error('the connection was lost'));
      this.waiting.clear();
      if (!this.stopped) this.retryLater(!opened);
    };
  }

  /**
   * Schedules the next try; one that never opened first asks why: a
   * refused token, or a child pod that no longer runs, ends the tries.
   */
  async retryLater(neverOpened) {
    const refused = neverOpened ? await this.refusal() : null;
    if (refused) {
      this.stopped = true;
      this.onState(refused, shownAgent());
      return;
    }
    if (this.stopped) return;
    const wait = this.delay;
    this.delay = Math.min(this.delay * 2, MAX_DELAY_MS);
    this.onState('disconnected', wait);
    this.timer = setTimeout(() => this.open(), wait);
  }

  /**
   * A browser cannot see why an upgrade failed, so the page asks over
   * HTTP: the same `/v1/ws` address without the upgrade on a child's view
   * (the pod answers 404 `unknown_agent` when that child does not run —
   * removed, or stopped — and 401 for a refused token), a blob on the
   * pod's own. `unauthorized`, `gone`, or null (down: try again).
   */
  async refusal() {
    const agent = shownAgent();
    const url = agent
      ? `/v1/ws?agent=${encodeURIComponent(agent)}`
      : `/v1/blobs/sha256:${'0'.repeat(64)}`;
    try {
      const probe = await authorizedFetch(this.token, url);
      if (probe.status === 401) return 'unauthorized';
      if (agent && probe.status === 404) {
        const body = await probe.json().catch(() => ({}));
        if (body.code === 'unknown_agent') return 'gone';
      }
      return null;
    } catch {
      return null;
    }
  }

  /** Reconnects at once: the view found a gap and needs a fresh snapshot. */
  resync() {
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close();
    }
    this.delay = FIRST_DELAY_MS;
    this.open();
  }

  get connected() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  send(frame) {
    if (!this.connected) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  /** Sends a method with a fresh request_id; resolves with its `response`, rejects with its `error`. */
  request(frame) {
    const request_id = `web-${this.nextId++}`;
    return new Promise((resolve, reject) => {
      if (!this.send({ ...frame, request_id })) {
        reject(new Error('not connected'));
        return;
      }
      this.waiting.set(request_id, { resolve, reject });
    });
  }

  settle(frame) {
    if (frame.type !== 'response' && frame.type !== 'error') return;
    const waiter = this.waiting.get(frame.request_id);
    if (!waiter) return;
    this.waiting.delete(frame.request_id);
    if (frame.type === 'response') waiter.resolve(frame);
    else {
      const error = new Error(frame.message || frame.code);
      error.code = frame.code;
      waiter.reject(error);
    }
  }
}
