// @title The Sunken Bell
// @setting games
// @skill spatial
// @difficulty easy
// @hint An echo gives a grid distance (steps along rows plus steps along columns). Pings from two different corners
// @hint leave very few cells that fit both distances.

// Locate a bell lost on an 8x8 sea floor using sonar pings that report grid distances, then dive for it.
class SunkenBellEnv {
  constructor(maxTurns = 12) {
    this.maxTurns = maxTurns;
    this.cols = 'ABCDEFGH';
  }

  reset(seed) {
    this.turn = 0;
    this.done = false;
    this.pings = [];
    this.misses = [];
    this.col = Math.floor(Math.random() * 8);
    this.row = Math.floor(Math.random() * 8);
    return [
      "A ship's bell lies somewhere on the harbour floor, an 8x8 grid of cells with columns A-H and rows 1-8 " +
        '(A1 is one corner, H8 the opposite one).\n' +
        'Ping a cell with sonar and the echo tells you the distance from that cell to the bell, counted in grid steps ' +
        '(columns apart + rows apart). Dive on a cell to search it.\n' +
        'Commands: \\boxed{ping C4}, \\boxed{dive C4}.\n' +
        `You have ${this.maxTurns} turns.\n` +
        this.chart(),
      {},
    ];
  }

  name(c, r) {
    return this.cols[c] + (r + 1);
  }

  chart() {
    // Rows 8 down to 1; p = pinged, x = dived with no luck.
    const lines = ['   A B C D E F G H'];
    for (let r = 7; r >= 0; r--) {
      let line = ` ${r + 1} `;
      for (let c = 0; c < 8; c++) {
        const key = this.name(c, r);
        line += this.misses.includes(key) ? 'x ' : this.pings.some((p) => p.key === key) ? 'p ' : '. ';
      }
      lines.push(line.trimEnd());
    }
    return lines.join('\n');
  }

  out(text, reward, terminated) {
    if (terminated) this.done = true;
    const truncated = !terminated && this.turn >= this.maxTurns;
    if (truncated) {
      this.done = true;
      text += `\nOut of turns. The bell was at ${this.name(this.col, this.row)}.`;
    }
    return [text, reward, terminated, truncated, { turn: this.turn }];
  }

  step(action) {
    if (this.done) return ['The episode is over. Reset to play again.', 0, true, false, {}];
    this.turn++;
    const cmd = extractBoxed(action);
    const help = 'Commands: \\boxed{ping C4}, \\boxed{dive C4} (columns A-H, rows 1-8).';
    if (cmd === null) return this.out('Reply with one command inside \\boxed{...}. ' + help, 0, false);
    const c = cmd.toLowerCase().replace(/\s+/g, ' ').trim();
    const m = /^(ping|sonar|dive|search)\s+([a-z])\s*,?\s*(\d{1,2})$/.exec(c);
    if (!m) return this.out(`Unknown command "${cmd.slice(0, 40)}". ${help}`, 0, false);
    const col = this.cols.toLowerCase().indexOf(m[2]);
    const row = Number(m[3]) - 1;
    if (col < 0 || row < 0 || row > 7) return this.out('That cell is off the chart. ' + help, 0, false);
    const key = this.name(col, row);
    const left = `${this.maxTurns - this.turn} turn(s) left.`;
    if (m[1] === 'dive' || m[1] === 'search') {
      if (col === this.col && row === this.row)
        return this.out(`You dive at ${key} and your hands close on the bronze bell. Found it!`, 1, true);
      if (!this.misses.includes(key)) this.misses.push(key);
      return this.out(`You dive at ${key} but find only sand and seaweed. ${left}\n${this.chart()}`, 0, false);
    }
    const d = Math.abs(col - this.col) + Math.abs(row - this.row);
    this.pings.push({ key, d });
    const log = this.pings.map((p) => `${p.key}: ${p.d}`).join(', ');
    return this.out(
      `Ping at ${key}: the echo says the bell is ${d} step(s) away.\nPings so far: ${log}. ${left}\n${this.chart()}`,
      0,
      false,
    );
  }

  solution() {
    return ['\\boxed{ping A1}', '\\boxed{ping H1}', `\\boxed{dive ${this.name(this.col, this.row)}}`];
  }
}
