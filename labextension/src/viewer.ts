/**
 * The stream viewer: the streams summary on top, a virtual-scrolling message table below it, a detail
 * pane for the selected message. Everything shown comes from nbkit's server extension in bounded pages;
 * every value is put into the page with textContent (never as HTML), so a payload of `<script>` is text.
 */
import { Widget } from '@lumino/widgets';
import { Message } from '@lumino/messaging';

import {
  createNotebook,
  fetchPage,
  fetchSummary,
  IRow,
  ISummary,
  locate,
  ViewerRequestError
} from './api';

/** Pixels per table row (the rows are one line each; details go to the pane below). */
const ROW_HEIGHT = 24;
/** Rows per page request. */
const PAGE_ROWS = 100;
/** Pages kept in the browser (least recently used first out): the browser never holds the whole file. */
const MAX_PAGES = 60;
/** The tallest spacer used; a longer table maps its scrollbar onto this height. */
const MAX_SPACER_PX = 8_000_000;
/** How often a followed or still-indexing file is asked for its summary (ms). */
const POLL_MS = 1000;

type PayloadMode = 'text' | 'json' | 'hex';

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  className?: string,
  text?: string
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className) {
    node.className = className;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function plural(n: number, word: string): string {
  return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
}

/** The viewer of one stream file; `path` is relative to the server's root. */
export class StreamViewer extends Widget {
  constructor(
    path: string,
    private readonly openNotebook: (path: string) => void
  ) {
    super();
    this._path = path;
    this.addClass('nbkit-StreamViewer');
    this.node.tabIndex = -1;
    this._build();
  }

  get path(): string {
    return this._path;
  }

  set path(value: string) {
    if (value !== this._path) {
      this._path = value;
      this._reset();
    }
  }

  /** The summary last received (for tests and the status line). */
  get summary(): ISummary | null {
    return this._summary;
  }

  /** Rows in the current numbering (every key, or the filter key). */
  get total(): number {
    return this._total;
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    void this._loadSummary(true);
    this._timer = window.setInterval(() => void this._poll(), POLL_MS);
  }

  protected onBeforeDetach(msg: Message): void {
    window.clearInterval(this._timer);
    super.onBeforeDetach(msg);
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    this._render();
  }

  protected onActivateRequest(msg: Message): void {
    this._scroller.focus();
  }

  dispose(): void {
    window.clearInterval(this._timer);
    super.dispose();
  }

  // -- layout -------------------------------------------------------------------------------------
  private _build(): void {
    const bar = el('div', 'nbkit-StreamViewer-toolbar');
    this._status = el('span', 'nbkit-StreamViewer-status', 'Opening…');
    this._status.setAttribute('role', 'status');

    const goKind = el('select', 'nbkit-StreamViewer-goKind');
    goKind.setAttribute('aria-label', 'Go to');
    for (const [value, label] of [
      ['seq', 'sequence number'],
      ['time', 'time (UTC)'],
      ['row', 'row']
    ]) {
      const option = el('option', undefined, label);
      option.value = value;
      goKind.appendChild(option);
    }
    this._goKind = goKind;
    this._goValue = el('input', 'nbkit-StreamViewer-goValue');
    this._goValue.type = 'text';
    this._goValue.placeholder = 'e.g. 42 or 2024-01-01T00:00:05';
    this._goValue.setAttribute('aria-label', 'Go to value');
    this._goKey = el('select', 'nbkit-StreamViewer-goKey');
    this._goKey.setAttribute('aria-label', 'Stream key of the sequence number');
    const go = el('button', 'nbkit-StreamViewer-button', 'Go');
    go.onclick = () => void this._goTo();
    this._goValue.onkeydown = (event: KeyboardEvent) => {
      if (event.key === 'Enter') {
        void this._goTo();
      }
    };
    goKind.onchange = () => {
      this._goKey.style.display = goKind.value === 'seq' ? '' : 'none';
    };

    const mode = el('select', 'nbkit-StreamViewer-mode');
    mode.setAttribute('aria-label', 'Payload shown as');
    for (const [value, label] of [
      ['text', 'payload: text'],
      ['json', 'payload: pretty JSON'],
      ['hex', 'payload: hex']
    ]) {
      const option = el('option', undefined, label);
      option.value = value;
      mode.appendChild(option);
    }
    mode.onchange = () => {
      this._mode = mode.value as PayloadMode;
      this._render();
      this._showDetail();
    };

    const followLabel = el('label', 'nbkit-StreamViewer-follow');
    this._follow = el('input');
    this._follow.type = 'checkbox';
    this._follow.onchange = () => {
      if (this._follow.checked) {
        void this._loadSummary(false).then(() => this._toEnd());
      }
    };
    followLabel.append(this._follow, document.createTextNode(' follow'));
    followLabel.title = 'Show messages appended to the file as they arrive (like nbkit watch)';

    const notebook = el('button', 'nbkit-StreamViewer-button', 'Open in a notebook');
    notebook.title = 'A new notebook with read_stream of this file, its lineage and the dashboard';
    notebook.onclick = () => void this._openNotebook();

    const gogroup = el('span', 'nbkit-StreamViewer-go');
    gogroup.append(el('span', undefined, 'Go to'), goKind, this._goValue, this._goKey, go);
    bar.append(this._status, gogroup, mode, followLabel, notebook);

    this._error = el('div', 'nbkit-StreamViewer-error');
    this._error.setAttribute('role', 'alert');
    this._error.style.display = 'none';

    this._summaryNode = el('div', 'nbkit-StreamViewer-summary');
    this._damageNode = el('div', 'nbkit-StreamViewer-damage');

    const head = el('div', 'nbkit-StreamViewer-row nbkit-StreamViewer-head');
    for (const name of ['time', 'key', 'seq', 'attempt', 'payload', 'headers']) {
      head.appendChild(el('span', `nbkit-StreamViewer-cell nbkit-StreamViewer-${name}`, name));
    }

    this._scroller = el('div', 'nbkit-StreamViewer-scroller');
    this._scroller.tabIndex = 0;
    this._scroller.setAttribute('role', 'grid');
    this._scroller.setAttribute('aria-label', 'Messages (arrow keys, Page Up/Down, Home/End)');
    this._spacer = el('div', 'nbkit-StreamViewer-spacer');
    this._rows = el('div', 'nbkit-StreamViewer-rows');
    this._scroller.append(this._spacer, this._rows);
    this._scroller.onscroll = () => this._render();
    this._scroller.onkeydown = (event: KeyboardEvent) => this._onKey(event);

    this._detail = el('div', 'nbkit-StreamViewer-detail');

    this.node.append(bar, this._error, this._summaryNode, this._damageNode, head, this._scroller, this._detail);
  }

  private _reset(): void {
    this._pages.clear();
    this._summary = null;
    this._selected = -1;
    void this._loadSummary(true);
  }

  // -- data ---------------------------------------------------------------------------------------
  private async _poll(): Promise<void> {
    const s = this._summary;
    if (this._loading || !this.isAttached) {
      return;
    }
    if (this._follow.checked || (s && !s.progress.done) || this._lastError) {
      const before = this._total;
      await this._loadSummary(false);
      if (this._follow.checked && this._total > before) {
        this._toEnd();
      }
    }
  }

  private async _loadSummary(first: boolean): Promise<void> {
    this._loading = true;
    try {
      const summary = await fetchSummary(this._path);
      this._summary = summary;
      this._lastError = null;
      this._error.style.display = 'none';
      const total = this._filter === null ? summary.message_count : this._streamCount(summary, this._filter);
      if (total !== this._total) {
        // the last page may have been partial: ask for it again
        this._dropPage(Math.floor(Math.max(0, this._total - 1) / PAGE_ROWS));
        this._total = total;
      }
      this._showSummary();
      this._render();
      if (first && this._selected < 0 && this._total > 0) {
        this._select(0);
      }
    } catch (error) {
      this._showError(error);
    } finally {
      this._loading = false;
    }
  }

  private _streamCount(summary: ISummary, key: string): number {
    return summary.streams.filter(s => s.stream_key === key).reduce((n, s) => n + s.count, 0);
  }

  private _dropPage(page: number): void {
    this._pages.delete(`${this._filter ?? ''}\u0000${page}`);
  }

  private _row(row: number): IRow | undefined {
    const page = Math.floor(row / PAGE_ROWS);
    const id = `${this._filter ?? ''}\u0000${page}`;
    const rows = this._pages.get(id);
    if (rows === undefined) {
      this._request(page, id);
      return undefined;
    }
    // most recently used last
    this._pages.delete(id);
    this._pages.set(id, rows);
    return rows[row - page * PAGE_ROWS];
  }

  private _request(page: number, id: string): void {
    if (this._inFlight.has(id)) {
      return;
    }
    this._inFlight.add(id);
    const filter = this._filter;
    fetchPage(this._path, page * PAGE_ROWS, PAGE_ROWS, filter ?? undefined)
      .then(answer => {
        if (filter !== this._filter) {
          return;
        }
        // a page cut short by the byte bound is completed by the next request
        const rows = answer.rows;
        if (rows.length > 0 || answer.total <= page * PAGE_ROWS) {
          this._pages.set(id, rows);
        }
        while (this._pages.size > MAX_PAGES) {
          const oldest = this._pages.keys().next().value as string;
          this._pages.delete(oldest);
        }
        this._render();
        this._showDetail();
      })
      .catch(error => this._showError(error))
      .finally(() => this._inFlight.delete(id));
  }

  private _showError(error: unknown): void {
    const message = error instanceof ViewerRequestError ? error.message : String(error);
    this._lastError = message;
    this._error.textContent = message;
    this._error.style.display = '';
    this._status.textContent = 'Could not read the file';
  }

  // -- summary ------------------------------------------------------------------------------------
  private _showSummary(): void {
    const s = this._summary;
    if (!s) {
      return;
    }
    const p = s.progress;
    const pct = p.size > 0 ? Math.floor((100 * p.indexed_bytes) / p.size) : 100;
    const state = p.error ? ` — indexing stopped: ${p.error}` : p.done ? '' : ` — indexing ${pct}%`;
    this._status.textContent =
      `${s.header.file_name}: ${plural(s.message_count, 'message')} in ${plural(s.streams.length, 'stream')}, ` +
      `${plural(s.size, 'byte')}${state}${s.damaged.length ? `, ${plural(s.damaged.length, 'damaged region')}` : ''}`;
    this._status.title = s.end.description;

    const keys = s.keys.filter(k => k !== 'SEA_STREAMER_INTERNAL');
    const wanted = this._goKey.value || this._filter || keys[0] || '';
    this._goKey.replaceChildren(
      ...keys.map(k => {
        const option = el('option', undefined, k);
        option.value = k;
        return option;
      })
    );
    this._goKey.value = keys.includes(wanted) ? wanted : keys[0] || '';

    const table = el('table', 'nbkit-StreamViewer-streams');
    const head = el('tr');
    for (const name of ['stream key', 'shard', 'messages', 'seq', 'first time', 'last time']) {
      head.appendChild(el('th', undefined, name));
    }
    table.appendChild(head);
    const all = el('tr', this._filter === null ? 'nbkit-mod-active' : '');
    const allButton = el('button', 'nbkit-StreamViewer-key', 'all keys');
    allButton.setAttribute('aria-pressed', String(this._filter === null));
    allButton.onclick = () => this._setFilter(null);
    const allCell = el('td');
    allCell.appendChild(allButton);
    all.append(allCell, el('td'), el('td', undefined, s.message_count.toLocaleString('en-US')), el('td'), el('td'), el('td'));
    table.appendChild(all);
    for (const st of s.streams) {
      const tr = el('tr', this._filter === st.stream_key ? 'nbkit-mod-active' : '');
      const button = el('button', 'nbkit-StreamViewer-key', st.stream_key);
      button.title = `Show only the messages of ${st.stream_key}`;
      button.setAttribute('aria-pressed', String(this._filter === st.stream_key));
      button.onclick = () => this._setFilter(st.stream_key);
      const keyCell = el('td');
      keyCell.appendChild(button);
      const seq = st.first_seq === st.last_seq ? `${st.first_seq}` : `${st.first_seq}..${st.last_seq}`;
      tr.append(
        keyCell,
        el('td', undefined, String(st.shard_id)),
        el('td', undefined, st.count.toLocaleString('en-US')),
        el('td', undefined, seq),
        el('td', undefined, st.first_timestamp),
        el('td', undefined, st.last_timestamp)
      );
      table.appendChild(tr);
    }
    this._summaryNode.replaceChildren(table);

    if (s.damaged.length === 0) {
      this._damageNode.replaceChildren();
      this._damageNode.style.display = 'none';
      return;
    }
    this._damageNode.style.display = '';
    const title = el('div', 'nbkit-StreamViewer-damageTitle', `⚠ ${plural(s.damaged.length, 'damaged region')}`);
    const list = el('ul');
    for (const region of s.damaged) {
      const item = el('li');
      const button = el('button', 'nbkit-StreamViewer-link', region.description);
      button.title = 'Show the messages around this region';
      button.onclick = () => {
        this._setFilter(null);
        this._scrollTo(Math.max(0, region.row_after - 2));
        this._select(Math.min(region.row_after, Math.max(0, this._total - 1)));
      };
      item.append(button, document.createTextNode(` — ${plural(region.recovered_after, 'message')} recovered after it`));
      list.appendChild(item);
    }
    this._damageNode.replaceChildren(title, list);
  }

  private _setFilter(key: string | null): void {
    if (key === this._filter) {
      return;
    }
    this._filter = key;
    this._pages.clear();
    this._selected = -1;
    const s = this._summary;
    this._total = s ? (key === null ? s.message_count : this._streamCount(s, key)) : 0;
    this._scroller.scrollTop = 0;
    this._showSummary();
    this._render();
    if (this._total > 0) {
      this._select(0);
    }
    this._scroller.focus();
  }

  // -- the table ----------------------------------------------------------------------------------
  private _geometry(): { spacer: number; scale: number; view: number } {
    const full = this._total * ROW_HEIGHT;
    const spacer = Math.min(full, MAX_SPACER_PX);
    const view = this._scroller.clientHeight;
    const scale = spacer > view && full > spacer ? (full - view) / (spacer - view) : 1;
    return { spacer, scale, view };
  }

  private _firstVisible(): number {
    const g = this._geometry();
    return Math.floor((this._scroller.scrollTop * g.scale) / ROW_HEIGHT);
  }

  private _render(): void {
    const g = this._geometry();
    this._spacer.style.height = `${g.spacer}px`;
    const top = this._scroller.scrollTop;
    const exact = top * g.scale;
    const first = Math.max(0, Math.floor(exact / ROW_HEIGHT));
    const visible = Math.ceil(g.view / ROW_HEIGHT) + 1;
    // unscaled: rows sit at their own place; scaled: the first visible row sits at the top of the view
    const offset = g.scale === 1 ? first * ROW_HEIGHT : top;
    this._rows.style.transform = `translateY(${offset}px)`;
    const nodes: HTMLElement[] = [];
    for (let r = first; r < Math.min(this._total, first + visible); r++) {
      nodes.push(this._rowNode(r, this._row(r)));
    }
    this._rows.replaceChildren(...nodes);
  }

  private _rowNode(r: number, row: IRow | undefined): HTMLElement {
    const node = el('div', 'nbkit-StreamViewer-row');
    node.setAttribute('role', 'row');
    node.dataset.row = String(r);
    if (r === this._selected) {
      node.classList.add('nbkit-mod-selected');
      node.setAttribute('aria-selected', 'true');
    }
    node.onclick = () => {
      this._select(r);
      this._scroller.focus();
    };
    if (row === undefined) {
      node.appendChild(el('span', 'nbkit-StreamViewer-cell nbkit-StreamViewer-loading', '…'));
      return node;
    }
    if (row.damage_before) {
      node.classList.add('nbkit-mod-afterDamage');
      node.title = `After a damaged region: bytes ${row.damage_before.start}..${row.damage_before.end} (${row.damage_before.skipped} skipped): ${row.damage_before.problem}`;
    }
    const time = el('span', 'nbkit-StreamViewer-cell nbkit-StreamViewer-time', (row.damage_before ? '⚠ ' : '') + row.time);
    const headers = Object.entries(row.headers)
      .map(([k, v]) => `${k}: ${v}`)
      .join('; ');
    node.append(
      time,
      el('span', 'nbkit-StreamViewer-cell nbkit-StreamViewer-key', row.eos ? `${row.key} (EOS)` : row.key),
      el('span', 'nbkit-StreamViewer-cell nbkit-StreamViewer-seq', String(row.seq)),
      el('span', 'nbkit-StreamViewer-cell nbkit-StreamViewer-attempt', String(row.attempt)),
      el('span', 'nbkit-StreamViewer-cell nbkit-StreamViewer-payload', this._payloadLine(row)),
      el('span', 'nbkit-StreamViewer-cell nbkit-StreamViewer-headers', headers)
    );
    return node;
  }

  private _payloadLine(row: IRow): string {
    const p = row.payload;
    if (this._mode === 'hex') {
      return p.hex;
    }
    if (this._mode === 'json' && p.json !== null) {
      return p.json.replace(/\s*\n\s*/g, ' ');
    }
    return p.text.replace(/\n/g, '⏎');
  }

  private _select(r: number): void {
    if (this._total === 0) {
      return;
    }
    this._selected = Math.max(0, Math.min(this._total - 1, r));
    this._render();
    this._showDetail();
  }

  private _showDetail(): void {
    const r = this._selected;
    if (r < 0) {
      this._detail.replaceChildren();
      return;
    }
    const row = this._row(r);
    if (row === undefined) {
      this._detail.replaceChildren(el('div', 'nbkit-StreamViewer-loading', `row ${r}: loading…`));
      return;
    }
    const p = row.payload;
    const facts = el(
      'div',
      'nbkit-StreamViewer-facts',
      `row ${row.row} · ${row.key} shard ${row.shard} seq ${row.seq} · attempt ${row.attempt} · ${row.time} ` +
        `(${row.timestamp_ms} ms) · offset ${row.offset} · payload ${plural(p.length, 'byte')}` +
        (p.truncated ? ' (preview cut)' : '') +
        (p.utf8 ? '' : ' · not UTF-8')
    );
    const parts: HTMLElement[] = [facts];
    if (row.damage_before) {
      parts.push(
        el(
          'div',
          'nbkit-StreamViewer-damageNote',
          `⚠ Before this message: bytes ${row.damage_before.start}..${row.damage_before.end} damaged ` +
            `(${row.damage_before.skipped} skipped): ${row.damage_before.problem}`
        )
      );
    }
    const names = Object.keys(row.headers);
    if (names.length) {
      const dl = el('dl', 'nbkit-StreamViewer-headerList');
      for (const name of names) {
        dl.append(el('dt', undefined, name), el('dd', undefined, row.headers[name]));
      }
      parts.push(dl);
    }
    let body = p.text;
    if (this._mode === 'hex') {
      body = p.hex;
    } else if (this._mode === 'json') {
      body = p.json ?? `(not JSON)\n${p.text}`;
    }
    parts.push(el('pre', 'nbkit-StreamViewer-body', body));
    this._detail.replaceChildren(...parts);
  }

  private _scrollTo(r: number): void {
    const g = this._geometry();
    const want = (r * ROW_HEIGHT) / g.scale;
    this._scroller.scrollTop = Math.max(0, want);
    this._render();
  }

  private _ensureVisible(r: number): void {
    const first = this._firstVisible();
    const visible = Math.max(1, Math.floor(this._scroller.clientHeight / ROW_HEIGHT));
    if (r < first) {
      this._scrollTo(r);
    } else if (r >= first + visible) {
      this._scrollTo(r - visible + 1);
    }
  }

  private _toEnd(): void {
    if (this._total > 0) {
      this._select(this._total - 1);
      this._ensureVisible(this._total - 1);
    }
  }

  private _onKey(event: KeyboardEvent): void {
    const page = Math.max(1, Math.floor(this._scroller.clientHeight / ROW_HEIGHT) - 1);
    const moves: { [key: string]: number } = {
      ArrowDown: 1,
      ArrowUp: -1,
      PageDown: page,
      PageUp: -page
    };
    let target: number | null = null;
    if (event.key in moves) {
      target = Math.max(0, this._selected) + moves[event.key];
    } else if (event.key === 'Home') {
      target = 0;
    } else if (event.key === 'End') {
      target = this._total - 1;
    }
    if (target === null) {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
    this._select(target);
    this._ensureVisible(this._selected);
  }

  // -- actions ------------------------------------------------------------------------------------
  private async _goTo(): Promise<void> {
    const raw = this._goValue.value.trim();
    if (!raw) {
      return;
    }
    const kind = this._goKind.value;
    const key = this._filter ?? undefined;
    try {
      let row: number;
      if (kind === 'row') {
        row = Number.parseInt(raw, 10);
        if (!Number.isFinite(row)) {
          throw new ViewerRequestError(`${JSON.stringify(raw)} is not a row number`, 400);
        }
      } else if (kind === 'seq') {
        const seq = Number.parseInt(raw, 10);
        if (!Number.isFinite(seq)) {
          throw new ViewerRequestError(`${JSON.stringify(raw)} is not a sequence number`, 400);
        }
        row = (await locate(this._path, { key, seq, seq_key: this._goKey.value || key })).row;
      } else {
        row = (await locate(this._path, { key, time: raw })).row;
      }
      this._error.style.display = 'none';
      this._scrollTo(Math.max(0, row - 2));
      this._select(row);
      this._ensureVisible(this._selected);
      this._scroller.focus();
    } catch (error) {
      this._showError(error);
    }
  }

  private async _openNotebook(): Promise<void> {
    try {
      const made = await createNotebook(this._path);
      this.openNotebook(made.path);
    } catch (error) {
      this._showError(error);
    }
  }

  private _path: string;
  private _summary: ISummary | null = null;
  private _total = 0;
  private _filter: string | null = null;
  private _mode: PayloadMode = 'text';
  private _selected = -1;
  private _loading = false;
  private _lastError: string | null = null;
  private _timer = 0;
  private _pages = new Map<string, IRow[]>();
  private _inFlight = new Set<string>();
  private _status!: HTMLSpanElement;
  private _error!: HTMLDivElement;
  private _summaryNode!: HTMLDivElement;
  private _damageNode!: HTMLDivElement;
  private _scroller!: HTMLDivElement;
  private _spacer!: HTMLDivElement;
  private _rows!: HTMLDivElement;
  private _detail!: HTMLDivElement;
  private _goKind!: HTMLSelectElement;
  private _goValue!: HTMLInputElement;
  private _goKey!: HTMLSelectElement;
  private _follow!: HTMLInputElement;
}
