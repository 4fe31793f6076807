// @title Frozen Pond
// @setting games
// @skill spatial
// @difficulty medium
// @hint You cannot stop on open ice, only against a rock or the shore. Look for a rock next to the flag that could
// @hint halt you there, then work backwards; every stop also lifts the mist around you.

// Slide across a misty frozen pond, stopping only at rocks or the shore, until you halt exactly on the flag.
class FrozenPondEnv {
  constructor(maxTurns = 12) {
    this.maxTurns = maxTurns;
    this.n = 7;
    this.dirs = { up: [-1, 0], down: [1, 0], left: [0, -1], right: [0, 1] };
    this.alias = { u: 'up', n: 'up', north: 'up', d: 'down', s: 'down', south: 'down' };
    Object.assign(this.alias, { l: 'left', w: 'left', west: 'left', r: 'right', e: 'right', east: 'right' });
  }

  reset(seed) {
    this.turn = 0;
    this.done = false;
    const n = this.n;
    this.goal = undefined;
    for (let attempt = 0; attempt < 400; attempt++) {
      this.rock = [];
      for (let i = 0; i < n * n; i++) this.rock.push(Math.random() < 0.22);
      const start = Math.floor(Math.random() * n * n);
      if (this.rock[start]) continue;
      const { dist } = this.search(start);
      const far = [];
      for (let i = 0; i < n * n; i++) if (dist[i] >= 3 && dist[i] <= 7) far.push(i);
      if (far.length === 0) continue;
      this.start = start;
      this.goal = far[Math.floor(Math.random() * far.length)];
      break;
    }
    if (this.goal === undefined || this.rock[this.goal]) {
      // A fixed fallback layout (solvable in 5 slides) in case every random attempt failed.
      this.rock = Array.from({ length: n * n }, (_, i) => [3, 15, 20, 29, 37, 43].includes(i));
      this.start = 0;
      this.goal = 21;
    }
    this.pos = this.start;
    this.seen = new Array(n * n).fill(false);
    this.reveal(this.pos, 2);
    return [
      'You stand on a frozen pond (a 7x7 grid) wrapped in mist. Push off in a direction and you slide until a rock (#) ' +
        'or the shore stops you; you cannot stop on open ice, and sliding over the flag does not count.\n' +
        'Halt exactly on the flag (F) to win. You see 2 cells around each place you stop; ? is still hidden.\n' +
        'Commands: \\boxed{up}, \\boxed{down}, \\boxed{left}, \\boxed{right}.\n\n' +
        this.map(),
      {},
    ];
  }

  slide(p, d) {
    const n = this.n;
    let r = Math.floor(p / n);
    let c = p % n;
    const path = [];
    for (;;) {
      const nr = r + d[0];
      const nc = c + d[1];
      if (nr < 0 || nc < 0 || nr >= n || nc >= n || this.rock[nr * n + nc]) break;
      r = nr;
      c = nc;
      path.push(r * n + c);
    }
    return { to: r * n + c, path };
  }

  search(start) {
    const dist = new Array(this.n * this.n).fill(-1);
    const prev = {};
    const queue = [start];
    dist[start] = 0;
    while (queue.length) {
      const p = queue.shift();
      for (const name in this.dirs) {
        const { to } = this.slide(p, this.dirs[name]);
        if (dist[to] < 0) {
          dist[to] = dist[p] + 1;
          prev[to] = [p, name];
          queue.push(to);
        }
      }
    }
    return { dist, prev };
  }

  reveal(p, radius) {
    const n = this.n;
    const r0 = Math.floor(p / n);
    const c0 = p % n;
    for (let r = r0 - radius; r <= r0 + radius; r++)
      for (let c = c0 - radius; c <= c0 + radius; c++)
        if (r >= 0 && c >= 0 && r < n && c < n) this.seen[r * n + c] = true;
  }

  map() {
    const n = this.n;
    const rows = [];
    for (let r = 0; r < n; r++) {
      let line = '';
      for (let c = 0; c < n; c++) {
        const i = r * n + c;
        line += i === this.pos ? '@' : i === this.goal ? 'F' : !this.seen[i] ? '?' : this.rock[i] ? '#' : '.';
        line += ' ';
      }
      rows.push(line.trimEnd());
    }
    return rows.join('\n') + '\n(@ you, F flag, # rock, . ice, ? mist)';
  }

  out(text, reward, terminated) {
    if (terminated) this.done = true;
    const truncated = !terminated && this.turn >= this.maxTurns;
    if (truncated) {
      this.done = true;
      text += '\nOut of turns: the ice starts to creak and you head for the shore.';
    }
    return [text, reward, terminated, truncated, { turn: this.turn }];
  }

  step(action) {
    if (this.done) return ['The episode is over. Reset to play again.', 0, true, false, {}];
    this.turn++;
    const cmd = extractBoxed(action);
    const help = 'Commands: \\boxed{up}, \\boxed{down}, \\boxed{left}, \\boxed{right}.';
    if (cmd === null) return this.out('Reply with one command inside \\boxed{...}. ' + help, 0, false);
    let word = cmd.toLowerCase().replace(/\s+/g, ' ').trim();
    word = word.replace(/^(?:slide|move|go|push)\s+/, '');
    word = this.alias[word] || word;
    if (!Object.prototype.hasOwnProperty.call(this.dirs, word))
      return this.out(`Unknown command "${cmd.slice(0, 40)}". ${help}`, 0, false);
    const { to, path } = this.slide(this.pos, this.dirs[word]);
    for (const p of path) this.reveal(p, 1);
    this.reveal(to, 2);
    const moved = path.length;
    this.pos = to;
    if (to === this.goal)
      return this.out(`You slide ${word} and come to rest right on the flag. Well steered!`, 1, true);
    const what =
      moved === 0
        ? `You push ${word} but you are already against a rock or the shore.`
        : `You slide ${word} ${moved} cell(s).`;
    return this.out(`${what} ${this.maxTurns - this.turn} turn(s) left.\n\n${this.map()}`, 0, false);
  }

  solution() {
    const { prev } = this.search(this.pos);
    const moves = [];
    for (let p = this.goal; p !== this.pos && prev[p]; p = prev[p][0]) moves.unshift(`\\boxed{${prev[p][1]}}`);
    return moves;
  }
}
