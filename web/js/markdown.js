// Markdown from the model, made safe to put in the page.
//
// Model text is hostile input and this page holds the keys to the pod, so
// two independent layers stand between it and the DOM:
//  1. marked's renderer is told to show raw HTML as text, to make links
//     only of http(s)/mailto destinations, and to turn images into links
//     (nothing remote is ever loaded);
//  2. DOMPurify then keeps only a short list of tags and attributes and
//     the same URL schemes, whatever the first layer let through.
// The result is a DocumentFragment, never a string handed to innerHTML.

import { Marked } from '../vendor/marked.esm.js';
import DOMPurify from '../vendor/purify.es.mjs';

const SAFE_URL = /^(?:https?:|mailto:)/i;

export function escapeHtml(text) {
  return String(text)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

function safeHref(href) {
  const trimmed = String(href || '').trim();
  return SAFE_URL.test(trimmed) ? trimmed : null;
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    // Raw HTML (block or inline) is shown as the text it is.
    html({ text }) {
      return escapeHtml(text);
    },
    link({ href, title, tokens }) {
      const inner = this.parser.parseInline(tokens);
      const url = safeHref(href);
      if (!url) return inner;
      const t = title ? ` title="${escapeHtml(title)}"` : '';
      return `<a href="${escapeHtml(url)}"${t} rel="noopener noreferrer" target="_blank">${inner}</a>`;
    },
    // An image becomes a link to it: the page never loads a remote resource.
    image({ href, text }) {
      const label = `image: ${text || href || ''}`;
      const url = safeHref(href);
      if (!url) return escapeHtml(`[${label}]`);
      return `<a href="${escapeHtml(url)}" rel="noopener noreferrer" target="_blank">[${escapeHtml(label)}]</a>`;
    },
  },
});

const ALLOWED_TAGS = [
  'a', 'p', 'br', 'hr', 'em', 'strong', 'del', 's', 'code', 'pre', 'blockquote',
  'ul', 'ol', 'li', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
  'table', 'thead', 'tbody', 'tr', 'th', 'td', 'input',
];
const ALLOWED_ATTR = ['href', 'title', 'rel', 'target', 'class', 'start', 'align', 'type', 'checked', 'disabled'];

DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    if (!safeHref(node.getAttribute('href'))) node.removeAttribute('href');
    node.setAttribute('rel', 'noopener noreferrer');
    node.setAttribute('target', '_blank');
  }
  if (node.tagName === 'INPUT') {
    // Only the disabled checkboxes of GFM task lists.
    if (node.getAttribute('type') !== 'checkbox') node.remove();
    else node.setAttribute('disabled', '');
  }
  if (node.hasAttribute('class') && !/^language-[\w+-]+$/.test(node.getAttribute('class'))) {
    node.removeAttribute('class');
  }
});

/** The Markdown `text` as a sanitised DocumentFragment. */
export function renderMarkdown(text) {
  let html;
  try {
    html = marked.parse(String(text ?? ''));
  } catch {
    html = `<pre>${escapeHtml(text)}</pre>`;
  }
  return DOMPurify.sanitize(html, {
    ALLOWED_TAGS,
    ALLOWED_ATTR,
    ALLOWED_URI_REGEXP: SAFE_URL,
    ALLOW_DATA_ATTR: false,
    RETURN_DOM_FRAGMENT: true,
  });
}
