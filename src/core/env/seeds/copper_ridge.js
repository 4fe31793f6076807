// @title Copper Ridge
// @setting games
// @skill optimisation
// @difficulty medium
// @hint The ore rises steadily to one richest plot and falls steadily after it, possibly at a different rate on each side.
// @hint Two surveys on the same slope reveal how fast it changes; narrow in on the summit before you commit the drill.

// Survey plots along a ridge to find the single richest seam, then drill once; the payout is graded.
class CopperRidgeEnv {
  constructor(maxTurns = 12) {
    this.maxTurns = maxTurns;
    this.plots = 40;
  }

  int(lo, hi) {
    return lo + Math.floor(Math.random() * (hi - lo + 1));
  }

  reset(seed) {
    this.turn = 0;
    this.done = false;
    this.log = {};
    this.peak = this.int(5, this.plots - 4);
    this.top = this.int(170, 220);
    this.upRate = this.int(1, 4);
    this.downRate = this.int(1, 4);
    return [
      `A mining company owns a ridge of ${this.plots} plots in a line, numbered 1-${this.plots}. The copper grade rises ` +
        'at a constant rate up to a single richest plot and then falls at a constant rate (each side may have its own rate).\n' +
        'Surveying a plot tells you its grade. Drilling is final: you earn a share of the best possible payout, ' +
        'and only the richest plot pays in full.\n' +
        `Commands: \\boxed{survey 20} (plots 1-${this.plots}), \\boxed{drill 20}.\nYou have ${this.maxTurns} turns.`,
      {},
    ];
  }

  grade(k) {
    return k <= this.peak ? this.top - this.upRate * (this.peak - k) : this.top - this.downRate * (k - this.peak);
  }

  notes() {
    const keys = Object.keys(this.log)
      .map(Number)
      .sort((a, b) => a - b);
    return keys.map((k) => `#${k}=${this.log[k]}`).join('  ');
  }

  out(text, reward, terminated) {
    if (terminated) this.done = true;
    const truncated = !terminated && this.turn >= this.maxTurns;
    if (truncated) {
      this.done = true;
      text += `\nOut of turns: the drilling permit expired. The richest plot was #${this.peak}.`;
    }
    return [text, reward, terminated, truncated, { turn: this.turn }];
  }

  step(action) {
    if (this.done) return ['The episode is over. Reset to play again.', 0, true, false, {}];
    this.turn++;
    const cmd = extractBoxed(action);
    const help = `Commands: \\boxed{survey K}, \\boxed{drill K} with K from 1 to ${this.plots}.`;
    if (cmd === null) return this.out('Reply with one command inside \\boxed{...}. ' + help, 0, false);
    const c = cmd.toLowerCase().replace(/\s+/g, ' ').trim();
    const m = /^(survey|probe|test|drill|dig)\s+(?:plot\s+)?#?(-?\d{1,6})$/.exec(c);
    if (!m) return this.out(`Unknown command "${cmd.slice(0, 40)}". ${help}`, 0, false);
    const k = Number(m[2]);
    if (k < 1 || k > this.plots) return this.out(`There is no plot ${k}. ${help}`, 0, false);
    const g = this.grade(k);
    if (m[1] === 'drill' || m[1] === 'dig') {
      if (k === this.peak)
        return this.out(`You drill plot #${k} and hit the mother lode (grade ${g}). Full payout!`, 1, true);
      const low = Math.min(this.grade(1), this.grade(this.plots));
      const share = Math.min(0.99, Math.max(0, Math.floor((100 * (g - low)) / (this.top - low)) / 100));
      return this.out(
        `You drill plot #${k} (grade ${g}). The richest plot was #${this.peak} at grade ${this.top}, ` +
          `so you earn ${Math.round(share * 100)}% of the best payout.`,
        share,
        true,
      );
    }
    this.log[k] = g;
    return this.out(
      `Plot #${k} has grade ${g}.\nSurveyed: ${this.notes()}\n${this.maxTurns - this.turn} turn(s) left.`,
      0,
      false,
    );
  }

  solution() {
    // Two points on each outer slope fix both lines; their meeting point is the summit.
    return [
      '\\boxed{survey 1}',
      '\\boxed{survey 2}',
      `\\boxed{survey ${this.plots - 1}}`,
      `\\boxed{survey ${this.plots}}`,
    ].concat(`\\boxed{drill ${this.peak}}`);
  }
}
