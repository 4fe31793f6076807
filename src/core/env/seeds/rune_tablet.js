// @title The Rune Tablet
// @setting games
// @skill pattern_recognition
// @difficulty medium
// @hint Uncover several consecutive runes and compare neighbours: look at differences, differences of differences,
// @hint ratios, odd and even positions separately, and sums of earlier terms. Check your rule on one more rune before answering.

// Reveal terms of a hidden number sequence one rune at a time, find its rule, and predict a far term.
class RuneTabletEnv {
  constructor(maxTurns = 12) {
    this.maxTurns = maxTurns;
    this.visible = 8;
  }

  int(lo, hi) {
    return lo + Math.floor(Math.random() * (hi - lo + 1));
  }

  reset(seed) {
    this.turn = 0;
    this.done = false;
    this.shown = {};
    this.target = this.int(12, 15);
    this.kind = this.int(0, 6);
    const t = [0];
    const k = this.kind;
    const a = this.int(1, 9);
    const b = this.int(2, 7);
    const c = this.int(1, 6);
    const d = [this.int(-3, 9), this.int(-3, 9), this.int(1, 9)];
    for (let n = 1; n <= this.target; n++) {
      let v;
      if (k === 0)
        v = a + 5 + (n - 1) * b; // steady steps
      else if (k === 1)
        v = c * n * n + (b - 4) * n + a; // steps that grow steadily
      else if (k === 2)
        v = n % 2 ? a + ((n - 1) / 2) * b : 20 + c - (n / 2 - 1) * (c + 1); // two interleaved runs
      else if (k === 3)
        v = n === 1 ? Math.ceil(a / 2) : n === 2 ? c : t[n - 1] + t[n - 2]; // sum of the two before
      else if (k === 4)
        v = n === 1 ? 10 + a : t[n - 1] + d[(n - 2) % 3]; // steps repeat in a cycle of three
      else if (k === 5)
        v = n === 1 ? c : n % 2 === 0 ? t[n - 1] * 2 : t[n - 1] + b; // double, add, double, add
      else v = n === 1 ? Math.ceil(a / 3) : 2 * t[n - 1] + (b % 3) - 1; // double and adjust
      t.push(v);
    }
    this.terms = t;
    return [
      'A stone tablet carries a row of runes, each hiding a whole number. The numbers follow one simple hidden rule ' +
        '(built from adding, multiplying and earlier terms). The tablet is cracked: only runes 1 to ' +
        `${this.visible} can be read, one per turn.\n` +
        `Your task: name the number under rune ${this.target}. A wrong answer shatters the tablet.\n` +
        `Commands: \\boxed{reveal 3} (runes 1-${this.visible}), \\boxed{answer 57}.`,
      {},
    ];
  }

  row() {
    const cells = [];
    for (let n = 1; n <= this.visible; n++) cells.push(n in this.shown ? String(this.terms[n]) : '?');
    return `Runes 1-${this.visible}: ${cells.join(', ')}  ...  rune ${this.target}: ?`;
  }

  out(text, reward, terminated) {
    if (terminated) this.done = true;
    const truncated = !terminated && this.turn >= this.maxTurns;
    if (truncated) {
      this.done = true;
      text += `\nOut of turns. Rune ${this.target} was ${this.terms[this.target]}.`;
    }
    return [text, reward, terminated, truncated, { turn: this.turn }];
  }

  step(action) {
    if (this.done) return ['The episode is over. Reset to play again.', 0, true, false, {}];
    this.turn++;
    const cmd = extractBoxed(action);
    const help = `Commands: \\boxed{reveal N} with N from 1 to ${this.visible}, \\boxed{answer X}.`;
    if (cmd === null) return this.out('Reply with one command inside \\boxed{...}. ' + help, 0, false);
    const c = cmd.toLowerCase().replace(/\s+/g, ' ').trim();
    let m = /^(?:reveal|read|rune|term)\s+(?:rune\s+)?(-?\d{1,6})$/.exec(c);
    if (m) {
      const n = Number(m[1]);
      if (n === this.target)
        return this.out(`Rune ${n} is the one you must predict; it cannot be read. ${help}`, 0, false);
      if (n < 1 || n > this.visible)
        return this.out(`Rune ${n} lies in the cracked part. Only runes 1-${this.visible} can be read.`, 0, false);
      this.shown[n] = true;
      const left = this.maxTurns - this.turn;
      return this.out(`Rune ${n} reads ${this.terms[n]}.\n${this.row()}\n${left} turn(s) left.`, 0, false);
    }
    m = /^(?:answer|predict)\s+(-?\d{1,12})$/.exec(c);
    if (m) {
      const x = Number(m[1]);
      const want = this.terms[this.target];
      if (x === want) return this.out(`Rune ${this.target} glows: ${x} is right. The tablet is yours!`, 1, true);
      return this.out(`The tablet cracks apart. Rune ${this.target} was ${want}, not ${x}.`, 0, true);
    }
    return this.out(`Unknown command "${cmd.slice(0, 40)}". ${help}`, 0, false);
  }

  solution() {
    const acts = [];
    for (let n = 1; n <= 5; n++) acts.push(`\\boxed{reveal ${n}}`);
    acts.push(`\\boxed{answer ${this.terms[this.target]}}`);
    return acts;
  }
}
