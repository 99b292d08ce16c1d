// Calls to the unirag server: JSON in and out, the key from sessionStorage as a Bearer
// header, one-line errors from the server's {"error": {"message"}} body, and the
// server-sent events of POST /query/stream read from a fetch stream (EventSource cannot POST).

const KEY_ITEM = "unirag.apiKey";

export function apiKey() {
  return sessionStorage.getItem(KEY_ITEM) || "";
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_ITEM, key);
  else sessionStorage.removeItem(KEY_ITEM);
}

/** An error the page shows as one line; `status` is the HTTP status (0: no answer). */
export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

function headers(extra = {}) {
  const key = apiKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function failure(response) {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (_) {
    // not JSON: the status line is the message
  }
  return new ApiError(message, response.status);
}

async function send(path, options = {}) {
  let response;
  try {
    response = await fetch(path, { ...options, headers: headers(options.headers) });
  } catch (error) {
    throw new ApiError(`the server did not answer (${error.message})`, 0);
  }
  if (!response.ok) throw await failure(response);
  return response;
}

export async function getJSON(path, params = {}) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const url = query.toString() ? `${path}?${query}` : path;
  return (await send(url)).json();
}

export async function postJSON(path, body) {
  return (await send(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })).json();
}

export async function postForm(path, form) {
  return (await send(path, { method: "POST", body: form })).json();
}

export async function remove(path) {
  return (await send(path, { method: "DELETE" })).json();
}

/** A path segment for an id (ids are opaque: never let one add a segment). */
export const segment = (id) => encodeURIComponent(id);

/** POST `body` to an SSE route; `onEvent(name, data)` per event. Resolves with the `done` data. */
export async function stream(path, body, onEvent, signal) {
  const response = await send(path, {
    method: "POST", headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(body), signal,
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let done = null;
  const handle = (frame) => {
    let name = "message";
    const data = [];
    for (const line of frame.split("\n")) {
      if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (!data.length) return;
    const parsed = JSON.parse(data.join("\n"));
    if (name === "error") throw new ApiError(parsed.error ? parsed.error.message : "the stream failed", 500);
    if (name === "done") done = parsed;
    onEvent(name, parsed);
  };
  for (;;) {
    const { value, done: finished } = await reader.read();
    if (value) buffer += decoder.decode(value, { stream: true });
    buffer = buffer.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      handle(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
    }
    if (finished) break;
  }
  if (buffer.trim()) handle(buffer);
  if (!done) throw new ApiError("the stream ended without a result", 500);
  return done;
}
