// The web client: pairs this device, connects, and wires the view and the
// controls to the pod's frames. See docs/web.md.

import { Connection, authorizedFetch, forgetToken, pairFromAddress, storedToken } from './js/connection.js';
import { Conversation } from './js/view.js';
import { Controls } from './js/controls.js';
import { Follower } from './js/follow.js';
import { h, replace } from './js/dom.js';

const $ = (id) => document.getElementById(id);

/** Older entries asked for at a time as the reader scrolls up. */
const OLDER_PAGE = 200;

/** Blob ids → `blob:` URLs, fetched once with the token. */
const blobUrls = new Map();

function fetchBlob(token, blob) {
  if (typeof blob !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(blob)) {
    return Promise.reject(new Error('not a blob id'));
  }
  if (!blobUrls.has(blob)) {
    const url = authorizedFetch(token, `/v1/blobs/${blob}`).then(async (response) => {
      if (!response.ok) throw new Error(response.status === 404 ? 'image no longer stored' : `HTTP ${response.status}`);
      return URL.createObjectURL(await response.blob());
    });
    url.catch(() => blobUrls.delete(blob));
    blobUrls.set(blob, url);
  }
  return blobUrls.get(blob);
}

function notify(title, body) {
  if (!document.hidden || typeof Notification === 'undefined' || Notification.permission !== 'granted') return;
  try {
    new Notification(title, { body: String(body || '').slice(0, 200), tag: 'pod' });
  } catch {
    // Some browsers only notify through a service worker: nothing to do.
  }
}

function showWelcome(message) {
  $('app').hidden = true;
  const welcome = $('welcome');
  welcome.hidden = false;
  replace(
    $('welcome-message'),
    message ? h('p', { class: 'error', role: 'alert' }, message) : null,
  );
}

function forget(connection) {
  connection?.stop();
  forgetToken();
  for (const url of blobUrls.values()) url.then((u) => URL.revokeObjectURL(u)).catch(() => {});
  blobUrls.clear();
  showWelcome('This device is forgotten: its token is no longer kept here.');
}

async function main() {
  const paired = await pairFromAddress();
  const token = paired?.token || storedToken();
  if (!token) {
    showWelcome(paired?.error);
    return;
  }
  $('welcome').hidden = true;
  $('app').hidden = false;

  let connection;
  const view = new Conversation($('log'), $('live'), {
    fetchBlob: (blob) => fetchBlob(token, blob),
    onChange: () => controls.refresh(),
    onHistoryDrawn: () => pageOlder(),
    onLiveEntry: (entry) => {
      if (entry.kind === 'approval_request') notify(`pod: ${entry.tool} wants to run`, entry.summary);
      if (entry.kind === 'turn_end') notify(`pod: turn ${entry.reason}`, entry.error?.message || '');
    },
  });
  const controls = new Controls({
    view,
    send: (frame) => connection.send(frame),
    request: (frame) => connection.request(frame),
    upload: (file) => upload(token, file),
    forget: () => forget(connection),
  });

  // Older history, a page at a time, while the reader is near the top.
  let paging = false;
  const pageOlder = async () => {
    const before = view.olderBefore();
    if (paging || before === null || !follower.nearTop || !connection?.connected) return;
    paging = true;
    const generation = view.generation;
    let drawn = false;
    try {
      const page = await connection.request({
        type: 'get_entries',
        session_id: view.pagedSession,
        before_seq: before,
        limit: OLDER_PAGE,
      });
      drawn = view.prependOlder(page.entries, generation);
    } catch (e) {
      console.warn(`pod: older history: ${e.message}`);
    } finally {
      paging = false;
    }
    // A short page may leave the reader near the top still.
    if (drawn) pageOlder();
  };
  const follower = new Follower({
    watched: [$('conversation'), $('dock')],
    root: $('app'),
    dock: $('dock'),
    onNearTop: () => pageOlder(),
  });
  const onFrame = (frame) => {
    if (frame.type === 'snapshot') {
      if (frame.protocol_version !== 1) {
        connection.stop();
        controls.connection('incompatible', `this pod speaks protocol ${frame.protocol_version}; this page knows 1`);
        return;
      }
      // For the bench and the curious (devtools): how long a snapshot took to draw.
      performance.mark('pod:snapshot-received');
      view.loadSnapshot(frame);
      controls.snapshot(frame);
      follower.pin();
      performance.mark('pod:snapshot-drawn', { detail: frame.entries?.length ?? 0 });
      connection.send({ type: 'hello', client: 'web' });
    } else {
      const resync = view.apply(frame);
      if (resync) {
        console.warn(`pod: ${resync}; reconnecting for a fresh snapshot`);
        connection.resync();
        return;
      }
      if (frame.type === 'status') controls.status(frame);
      if (frame.type === 'shutdown') controls.connection('shutdown', frame.reason);
    }
  };
  connection = new Connection(token, onFrame, (state, detail) => controls.connection(state, detail));
  connection.start();
}

/** Stores an image at the pod (`POST /v1/blobs`); resolves with its `image` segment. */
async function upload(token, file) {
  const response = await authorizedFetch(token, '/v1/blobs', {
    method: 'POST',
    headers: { 'Content-Type': file.type || 'application/octet-stream' },
    body: file,
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || `HTTP ${response.status}`);
  return { type: 'image', blob: body.blob, media_type: body.media_type || file.type, name: file.name || 'image' };
}

main().catch((e) => showWelcome(`The page failed to start: ${e.message}`));
