// Keeping the reader at the end of the conversation, and paging older
// history in as they scroll up.
//
// "Following" is the reader's intent, not a measurement taken at some
// moment: the page opens following, stops only when the view moves *up*
// (a wheel, a swipe, a key, the scrollbar, a script) and away from the end,
// and follows again once the reader is back at the end or taps "Newer
// below". While following, every change of the conversation's size — a new
// entry, streamed text, history drawn above, a block laid out late
// (`content-visibility`), Markdown rendered as it nears the screen, an
// image loading, the keyboard opening — puts the view back at the end
// before the frame is painted (a ResizeObserver runs after layout, before
// paint). While not following, nothing moves the view: the block the
// reader looks at is remembered at each scroll and put back where it was
// after every change of size — the browser's own scroll anchoring misses
// blocks laid out late (`content-visibility`) above the view — content
// added below is simply below, and the "Newer below" control says so.

import { h } from './dom.js';

/** Within this many CSS pixels of the end counts as at the end. */
const AT_END_PX = 4;
/** Older history is asked for when the view is this many screens from the top. */
const NEAR_TOP_SCREENS = 1.5;

export class Follower {
  /**
   * `watched`: the elements whose size changes must keep a following
   * reader at the end; `dock`: where the "Newer below" control goes;
   * `onNearTop()`: the reader is near the top (page older history in).
   */
  constructor({ watched, dock, onNearTop }) {
    this.el = document.scrollingElement;
    this.following = true;
    this.lastTop = this.el.scrollTop;
    this.onNearTop = onNearTop;
    this.newer = h(
      'button',
      { type: 'button', id: 'newer', hidden: true, onclick: () => this.toEnd() },
      'Newer below ↓',
    );
    dock.prepend(this.newer);
    window.addEventListener('scroll', () => this.scrolled(), { passive: true });
    window.addEventListener('resize', () => this.pin());
    this.conversation = watched[0];
    // The block the reader looks at, and where it was on the screen.
    this.anchor = null;
    const sizes = new ResizeObserver(() => (this.following ? this.pin() : this.keep()));
    for (const el of watched) sizes.observe(el);
  }

  get atEnd() {
    const el = this.el;
    return el.scrollHeight - el.scrollTop - el.clientHeight <= AT_END_PX;
  }

  get nearTop() {
    return this.el.scrollTop < innerHeight * NEAR_TOP_SCREENS;
  }

  scrolled() {
    const top = this.el.scrollTop;
    const movedUp = top < this.lastTop - 1;
    this.lastTop = top;
    if (this.atEnd) this.setFollowing(true);
    else if (movedUp) this.setFollowing(false);
    // Moved down but not to the end: content above was added and
    // compensated, or content below grew before it was pinned.
    else this.pin();
    if (!this.following) this.remember();
    if (this.nearTop) this.onNearTop();
  }

  setFollowing(following) {
    this.following = following;
    if (following) this.anchor = null;
    this.newer.hidden = following;
  }

  /** Back to the end, and following again ("Newer below"). */
  toEnd() {
    this.setFollowing(true);
    this.pin();
  }

  /** Notes the block a third of the way down the screen, and where it is. */
  remember() {
    let el = document.elementFromPoint(innerWidth / 2, innerHeight / 3);
    while (el && el.parentElement && el.parentElement.id !== 'log' && !el.parentElement.classList.contains('history')) {
      el = el.parentElement;
    }
    this.anchor = el && this.conversation.contains(el) ? { el, top: el.getBoundingClientRect().top } : null;
  }

  /** Puts the remembered block back where the reader saw it. */
  keep() {
    const anchor = this.anchor;
    if (!anchor || !anchor.el.isConnected) return;
    const moved = anchor.el.getBoundingClientRect().top - anchor.top;
    if (Math.abs(moved) < 0.5) return;
    this.el.scrollTop += moved;
    this.lastTop = this.el.scrollTop;
  }

  /** A following reader's view goes to the end, at once (before paint). */
  pin() {
    if (!this.following) return;
    const el = this.el;
    const end = el.scrollHeight - el.clientHeight;
    if (el.scrollTop < end) el.scrollTop = end;
    this.lastTop = el.scrollTop;
  }
}
