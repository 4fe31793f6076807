/**
 * A minimal OpenEnv WebSocket client (Node), sending what OpenEnv's EnvClient sends: one JSON text
 * message per call ({type: "reset", data}, {type: "step", data: action}, {type: "state"},
 * {type: "close"}) and reading one reply. Used by `spade bench serve` and the tests.
 */
import WebSocket from 'ws';

export interface WsReply {
  type: string;
  data: Record<string, unknown>;
}

export class OpenEnvWsClient {
  private readonly replies: WsReply[] = [];
  private waiting: (() => void) | null = null;
  private closedWith: { code: number; reason: string } | null = null;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      this.replies.push(JSON.parse(String(data)) as WsReply);
      this.waiting?.();
    });
    ws.on('close', (code, reason) => {
      this.closedWith = { code, reason: reason.toString() };
      this.waiting?.();
    });
  }

  /** Connect to `${baseUrl}/ws` (http:// becomes ws://). */
  static connect(baseUrl: string, headers: Record<string, string> = {}): Promise<OpenEnvWsClient> {
    const ws = new WebSocket(`${baseUrl.replace(/^http/, 'ws').replace(/\/$/, '')}/ws`, { headers });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new OpenEnvWsClient(ws)));
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
  }

  /** The close code and reason once the server closed the connection, else null. */
  get closed(): { code: number; reason: string } | null {
    return this.closedWith;
  }

  /** Send a message (an object as JSON, a string or bytes as they are). */
  sendRaw(msg: unknown, binary = false): void {
    if (binary) this.ws.send(Buffer.from(String(msg)), { binary: true });
    else this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
  }

  /** The next reply; null once the connection is closed and nothing is left to read. */
  async next(): Promise<WsReply | null> {
    while (this.replies.length === 0) {
      if (this.closedWith) return null;
      await new Promise<void>((r) => (this.waiting = r));
      this.waiting = null;
    }
    return this.replies.shift()!;
  }

  async call(msg: unknown): Promise<WsReply> {
    this.sendRaw(msg);
    const r = await this.next();
    if (!r) throw new Error(`the server closed the connection (${this.closedWith?.code} ${this.closedWith?.reason})`);
    return r;
  }

  reset(data: Record<string, unknown> = {}): Promise<WsReply> {
    return this.call({ type: 'reset', data });
  }

  step(action: Record<string, unknown>): Promise<WsReply> {
    return this.call({ type: 'step', data: action });
  }

  state(): Promise<WsReply> {
    return this.call({ type: 'state' });
  }

  /** Send {type: "close"} and wait for the connection to end. */
  async close(): Promise<void> {
    if (this.closedWith) return;
    const done = new Promise<void>((r) => this.ws.once('close', () => r()));
    if (this.ws.readyState === WebSocket.OPEN) this.sendRaw({ type: 'close' });
    await done;
  }

  /** Drop the connection without a close message. */
  terminate(): void {
    this.ws.terminate();
  }
}
