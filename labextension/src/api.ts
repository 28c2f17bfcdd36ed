/**
 * The viewer's requests to nbkit's server extension (nbkit/lab/handlers.py): JSON pages under
 * `{baseUrl}nbkit/viewer/`. ServerConnection adds the token and the XSRF header, as for every Jupyter API.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface IStream {
  stream_key: string;
  shard_id: number;
  count: number;
  first_seq: number;
  last_seq: number;
  first_timestamp: string;
  last_timestamp: string;
}

export interface IDamagedRegion {
  start: number;
  end: number;
  problem: string;
  skipped: number;
  row_after: number;
  recovered_after: number;
  description: string;
}

export interface IProgress {
  indexed_bytes: number;
  size: number;
  busy: boolean;
  done: boolean;
  error: string | null;
}

export interface ISummary {
  path: string;
  header: {
    file_name: string;
    created_at: string;
    beacon_interval: number;
  };
  size: number;
  message_count: number;
  streams: IStream[];
  beacon_count: number;
  has_eos: boolean;
  end: { reason: string; description: string };
  damaged: IDamagedRegion[];
  keys: string[];
  text: string;
  progress: IProgress;
}

export interface IPayload {
  length: number;
  stored_length: number;
  text: string;
  utf8: boolean;
  json: string | null;
  hex: string;
  truncated: boolean;
}

export interface IRow {
  row: number;
  offset: number;
  key: string;
  shard: number;
  seq: number;
  timestamp_ms: number;
  time: string;
  attempt: number;
  headers: { [name: string]: string };
  eos: boolean;
  payload: IPayload;
  damage_before?: { start: number; end: number; problem: string; skipped: number };
}

export interface IPage {
  start: number;
  rows: IRow[];
  total: number;
  limited: boolean;
  progress: IProgress;
}

/** An answer other than 2xx, with the server's message (it says what was wrong and where). */
export class ViewerRequestError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
  }
}

async function request<T>(
  route: string,
  params: { [name: string]: string | number | undefined },
  init: RequestInit = {}
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  const query = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join('&');
  const url = URLExt.join(settings.baseUrl, 'nbkit/viewer', route) + (query ? `?${query}` : '');
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ViewerRequestError(`the server did not answer: ${String(error)}`, 0);
  }
  const text = await response.text();
  let body: any = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!response.ok) {
    const message = body && body.message ? String(body.message) : `${response.status} ${response.statusText}`;
    throw new ViewerRequestError(message, response.status);
  }
  return body as T;
}

export function fetchSummary(path: string): Promise<ISummary> {
  return request<ISummary>('summary', { path });
}

export function fetchPage(path: string, start: number, count: number, key?: string): Promise<IPage> {
  return request<IPage>('messages', { path, start, count, key });
}

export function locate(
  path: string,
  where: { key?: string; seq?: number; seq_key?: string; time?: string; offset?: number }
): Promise<{ row: number }> {
  return request<{ row: number }>('locate', { path, ...where });
}

export function createNotebook(path: string): Promise<{ path: string }> {
  return request<{ path: string }>('notebook', {}, { method: 'POST', body: JSON.stringify({ path }) });
}
