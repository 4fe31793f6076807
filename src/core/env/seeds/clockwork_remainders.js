// @title Clockwork Remainders
// @setting games
// @skill mathematical
// @difficulty medium
// @hint A gear with k teeth shows the hidden count modulo k. Choose gears whose tooth counts share no common factor,
// @hint so that together they pin down every number in the range, then combine the remainders.

// A hidden count between 100 and 999 is revealed only as remainders on gears you choose to inspect.
class ClockworkRemaindersEnv {
  constructor(maxTurns = 12) {
    this.maxTurns = maxTurns;
    this.minGear = 2;
    this.maxGear = 16;
  }

  reset(seed) {
    this.turn = 0;
    this.done = false;
    this.seen = {};
    this.count = 100 + Math.floor(Math.random() * 900);
    return [
      'An old tower clock has ticked a secret number of times, somewhere from 100 to 999. Its drive shaft turns ' +
        `a set of gears with ${this.minGear} to ${this.maxGear} teeth, all starting at tooth 0 and advancing one tooth per tick.\n` +
        'Inspect a gear to see which tooth it rests on (the count divided by its size leaves that remainder). ' +
        'Then name the exact count to unlock the clock face. A wrong answer jams the clock for good.\n' +
        'Commands: \\boxed{gear 7} to inspect the 7-tooth gear, \\boxed{answer 123}.',
      {},
    ];
  }

  out(text, reward, terminated) {
    if (terminated) this.done = true;
    const truncated = !terminated && this.turn >= this.maxTurns;
    if (truncated) {
      this.done = true;
      text += `\nOut of turns. The clock had ticked ${this.count} times.`;
    }
    return [text, reward, terminated, truncated, { turn: this.turn }];
  }

  notes() {
    const keys = Object.keys(this.seen)
      .map(Number)
      .sort((a, b) => a - b);
    return keys.map((k) => `gear ${k} rests on tooth ${this.seen[k]}`).join('; ');
  }

  step(action) {
    if (this.done) return ['The episode is over. Reset to play again.', 0, true, false, {}];
    this.turn++;
    const cmd = extractBoxed(action);
    const help = `Commands: \\boxed{gear K} with K from ${this.minGear} to ${this.maxGear}, \\boxed{answer N}.`;
    if (cmd === null) return this.out('Reply with one command inside \\boxed{...}. ' + help, 0, false);
    const c = cmd.toLowerCase().replace(/\s+/g, ' ').trim();
    let m = /^(?:gear|inspect|mod|check)\s+(?:gear\s+)?(-?\d{1,6})$/.exec(c);
    if (m) {
      const k = Number(m[1]);
      if (k < this.minGear || k > this.maxGear)
        return this.out(
          `There is no ${k}-tooth gear. The gears have ${this.minGear} to ${this.maxGear} teeth.`,
          0,
          false,
        );
      this.seen[k] = this.count % k;
      return this.out(
        `The ${k}-tooth gear rests on tooth ${this.seen[k]}.\nYour notes: ${this.notes()}.\n` +
          `${this.maxTurns - this.turn} turn(s) left.`,
        0,
        false,
      );
    }
    m = /^(?:answer|count|unlock)\s+(-?\d{1,12})$/.exec(c);
    if (m) {
      const n = Number(m[1]);
      if (n < 100 || n > 999) return this.out('The count is between 100 and 999. ' + help, 0, false);
      if (n === this.count) return this.out(`${n} it is! The clock face swings open and the chimes ring.`, 1, true);
      return this.out(`The clock grinds and jams: it had ticked ${this.count} times, not ${n}.`, 0, true);
    }
    return this.out(`Unknown command "${cmd.slice(0, 40)}". ${help}`, 0, false);
  }

  solution() {
    // 13, 14 and 15 are pairwise coprime and 13 * 14 * 15 = 2730 > 999, so their remainders fix the count.
    return ['\\boxed{gear 13}', '\\boxed{gear 14}', '\\boxed{gear 15}', `\\boxed{answer ${this.count}}`];
  }
}
