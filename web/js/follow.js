// Keeping the reader at the end of the conversation, and paging older
// history in as they scroll up.
//
// "Following" is the reader's intent, not a measurement taken at some
// moment: the page opens following, stops only when the *reader* moves
// the view up and away from the end, and follows again once the reader is
// back at the end or taps "Newer below". While following, every change of
// the conversation's size — a new entry, streamed text, history drawn
// above, a block laid out late (`content-visibility`), Markdown rendered as
// it nears the screen, an image loading, the keyboard opening — puts the
// view back at the end before the frame is painted (a ResizeObserver runs
// after layout, before paint). While not following, nothing moves the
// view: the block the reader looks at is remembered at each scroll and put
// back where it was after every change of size — the browser's own scroll
// anchoring misses blocks laid out late (`content-visibility`) above the
// view — content added below is simply below, and the "Newer below"
// control says so.
//
// Which scrolls are the reader's: a scroll event says only that the offset
// changed, not why. Layout moves it too — the approval panel closing or the
// header losing a line clamps the offset, a focused box is scrolled into
// view — and the browser reports that a frame later, when the entry that
// arrived meanwhile has made the page longer: such a scroll looks exactly
// like the reader moving up short of the end (#36: the page left 122 px
// short after "Deny with a message"). So a scroll up ends following only
// when it comes with the reader's input (a wheel or a finger moving the
// page down, an up key outside a text box, the scrollbar held), or when
// the page has not changed for two frames — a scroll no layout can explain
// (a script's, the browser's find in page). Any other scroll while
// following goes back to the end.

import { h } from './dom.js';

/** Within this many CSS pixels of the end counts as at the end. */
const AT_END_PX = 4;
/** A scroll this soon after the reader's input is the reader's (a smooth scroll's first step comes sooner). */
const READER_MS = 1000;
/** Frames without a change of the page after which a scroll is no layout's doing. */
const SETTLE_FRAMES = 2;
/** Keys that scroll the page up when no text box has the focus. */
const UP_KEYS = new Set(['ArrowUp', 'PageUp', 'Home']);
/** Older history is asked for when the view is this many screens from the top. */
const NEAR_TOP_SCREENS = 1.5;

export class Follower {
  /**
   * `watched`: the elements whose size changes must keep a following
   * reader at the end; `dock`: where the "Newer below" control goes;
   * `root`: the page, whose every change may move the view;
   * `onNearTop()`: the reader is near the top (page older history in).
   */
  constructor({ watched, dock, root, onNearTop }) {
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
    window.addEventListener('resize', () => {
      this.changed();
      this.pin();
    });
    this.conversation = watched[0];
    // The block the reader looks at, and where it was on the screen.
    this.anchor = null;
    const sizes = new ResizeObserver(() => {
      this.changed();
      if (this.following) this.pin();
      else this.keep();
    });
    for (const el of watched) sizes.observe(el);
    this.watchReader();
    this.watchChanges(root);
  }

  /** Notes the reader's input that scrolls the page up (see the top of this file). */
  watchReader() {
    this.readerAt = -Infinity;
    this.dragging = false;
    this.touchY = null;
    const reader = () => (this.readerAt = performance.now());
    const passive = { passive: true };
    window.addEventListener('wheel', (e) => e.deltaY < 0 && reader(), passive);
    window.addEventListener('touchstart', (e) => (this.touchY = e.touches[0]?.clientY ?? null), passive);
    window.addEventListener(
      'touchmove',
      (e) => {
        const y = e.touches[0]?.clientY ?? null;
        // A finger moving down the screen moves the page up.
        if (y !== null && this.touchY !== null && y > this.touchY) reader();
        this.touchY = y;
      },
      passive,
    );
    window.addEventListener('keydown', (e) => {
      const typing = e.target instanceof Element && e.target.closest('textarea, input, select, [contenteditable]');
      if (!typing && (UP_KEYS.has(e.key) || (e.key === ' ' && e.shiftKey))) reader();
    });
    // The page's scrollbar: a press on the root element beside its content.
    window.addEventListener('pointerdown', (e) => {
      if (e.target === document.documentElement && e.clientX >= document.documentElement.clientWidth) {
        this.dragging = true;
        reader();
      }
    });
    const release = () => {
      if (this.dragging) reader();
      this.dragging = false;
    };
    window.addEventListener('pointerup', release);
    window.addEventListener('pointercancel', release);
  }

  /** Whether the last scroll came with the reader's input. */
  get byReader() {
    return this.dragging || performance.now() - this.readerAt < READER_MS;
  }

  /**
   * Counts frames since the page last changed: any change under `root`
   * (entries, streamed text, the panel, the header), a size the
   * ResizeObserver saw, the window's size, the focus moving (a focused box
   * is scrolled into view). A scroll the browser reports within
   * `SETTLE_FRAMES` of one may be that change's doing.
   */
  watchChanges(root) {
    this.calmFrames = 0;
    this.counting = false;
    new MutationObserver(() => this.changed()).observe(root, {
      subtree: true,
      childList: true,
      characterData: true,
      attributes: true,
    });
    window.addEventListener('focusin', () => this.changed());
    // The page is being drawn as this starts.
    this.changed();
  }

  changed() {
    this.calmFrames = 0;
    if (this.counting) return;
    this.counting = true;
    const frame = () => {
      this.calmFrames++;
      if (this.calmFrames < SETTLE_FRAMES) requestAnimationFrame(frame);
      else this.counting = false;
    };
    requestAnimationFrame(frame);
  }

  get settled() {
    return this.calmFrames >= SETTLE_FRAMES;
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
    else if (movedUp && (this.byReader || this.settled)) this.setFollowing(false);
    // Moved down but not to the end (content above was added and
    // compensated, or content below grew before it was pinned), or up by a
    // change of layout: a following view goes back to the end.
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
