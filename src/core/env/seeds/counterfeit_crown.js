// @title The Counterfeit Crown
// @setting games
// @skill logical_deduction
// @difficulty hard
// @hint Split the coins into three groups and make every weighing count: a coin that moves from one pan to another
// @hint (or off the scale) between weighings tells you whether it is heavy or light by how the result changes.

// Twelve crowns, one forged (heavier or lighter): find it and its weight with three weighings of a balance.
class CounterfeitCrownEnv {
  constructor(maxTurns = 12) {
    this.maxTurns = maxTurns;
    this.maxWeighings = 3;
  }

  reset(seed) {
    this.turn = 0;
    this.done = false;
    this.weighings = 0;
    this.log = [];
    this.fake = 1 + Math.floor(Math.random() * 12);
    this.heavy = Math.random() < 0.5;
    return [
      'The royal treasury holds twelve gold crowns, numbered 1-12. Exactly one is forged: it is either slightly ' +
        'heavier or slightly lighter than the others, which all weigh the same.\n' +
        `You may use the balance scale ${this.maxWeighings} times, then name the forgery and whether it is heavy or light.\n` +
        'Commands: \\boxed{weigh 1 2 3 4 vs 5 6 7 8} (same number of coins on each pan), ' +
        '\\boxed{answer 7 heavy} or \\boxed{answer 7 light}. A wrong answer ends the game.',
      {},
    ];
  }

  out(text, reward, terminated) {
    if (terminated) this.done = true;
    const truncated = !terminated && this.turn >= this.maxTurns;
    if (truncated) {
      this.done = true;
      text += `\nOut of turns. The forgery was crown ${this.fake} (${this.heavy ? 'heavy' : 'light'}).`;
    }
    return [text, reward, terminated, truncated, { turn: this.turn, weighings: this.weighings }];
  }

  coins(text) {
    const parts = text.split(/[\s,]+/).filter(Boolean);
    const list = [];
    for (const p of parts) {
      if (!/^\d{1,2}$/.test(p)) return null;
      const n = Number(p);
      if (n < 1 || n > 12) return null;
      list.push(n);
    }
    return list;
  }

  weigh(body) {
    const sides = body.split(/\s*(?:\bvs\.?|\bversus\b|\bagainst\b|\||\bv\b)\s*/);
    const usage = 'Write it like \\boxed{weigh 1 2 3 vs 4 5 6} with coin numbers 1-12.';
    if (sides.length !== 2) return this.out('Put "vs" between the two pans. ' + usage, 0, false);
    const left = this.coins(sides[0]);
    const right = this.coins(sides[1]);
    if (!left || !right || left.length === 0) return this.out('I could not read those coins. ' + usage, 0, false);
    const all = left.concat(right);
    if (new Set(all).size !== all.length) return this.out('A coin cannot be in two places at once. ' + usage, 0, false);
    if (left.length !== right.length) return this.out('Both pans need the same number of coins. ' + usage, 0, false);
    if (this.weighings >= this.maxWeighings)
      return this.out('The scale has been used up. Give your verdict: \\boxed{answer N heavy|light}.', 0, false);
    this.weighings++;
    const w = this.heavy ? 1 : -1;
    const diff = (left.includes(this.fake) ? w : 0) - (right.includes(this.fake) ? w : 0);
    const result = diff > 0 ? 'the LEFT pan sinks' : diff < 0 ? 'the RIGHT pan sinks' : 'the pans BALANCE';
    this.log.push(`${this.weighings}. ${left.join(' ')} vs ${right.join(' ')}: ${result}`);
    const left3 = this.maxWeighings - this.weighings;
    return this.out(
      `Weighing ${this.log[this.log.length - 1]}.\nAll weighings:\n${this.log.join('\n')}\n` +
        (left3 > 0 ? `${left3} weighing(s) left.` : 'No weighings left: \\boxed{answer N heavy|light}.'),
      0,
      false,
    );
  }

  step(action) {
    if (this.done) return ['The episode is over. Reset to play again.', 0, true, false, {}];
    this.turn++;
    const cmd = extractBoxed(action);
    const help = 'Commands: \\boxed{weigh 1 2 vs 3 4}, \\boxed{answer 7 heavy}.';
    if (cmd === null) return this.out('Reply with one command inside \\boxed{...}. ' + help, 0, false);
    const c = cmd.toLowerCase().replace(/\s+/g, ' ').trim();
    if (c.length > 200) return this.out('That command is too long. ' + help, 0, false);
    let m = /^weigh\s+(.+)$/.exec(c);
    if (m) return this.weigh(m[1]);
    m = /^(?:answer|forgery|fake)\s+(?:crown\s+|coin\s+|#)?(\d{1,2})\s*(?:is\s+)?(heavy|heavier|light|lighter)$/.exec(
      c,
    );
    if (m) {
      const n = Number(m[1]);
      const heavy = m[2].startsWith('heav');
      if (n < 1 || n > 12) return this.out('The crowns are numbered 1 to 12. ' + help, 0, false);
      if (n === this.fake && heavy === this.heavy)
        return this.out(`Crown ${n} is indeed the ${heavy ? 'heavy' : 'light'} forgery. The treasurer bows!`, 1, true);
      return this.out(
        `Wrong: crown ${this.fake} was the forgery, and it was ${this.heavy ? 'heavy' : 'light'}. The game is over.`,
        0,
        true,
      );
    }
    if (/^answer\b/.test(c))
      return this.out('Name a crown 1-12 and heavy or light, e.g. \\boxed{answer 7 light}.', 0, false);
    return this.out(`Unknown command "${cmd.slice(0, 40)}". ${help}`, 0, false);
  }

  solution() {
    // A fixed plan whose three results differ for each of the 24 possibilities.
    const plan = ['6 10 11 12 vs 5 7 8 9', '5 10 11 12 vs 2 3 4 6', '2 6 7 12 vs 1 4 9 10'];
    return plan
      .map((p) => `\\boxed{weigh ${p}}`)
      .concat(`\\boxed{answer ${this.fake} ${this.heavy ? 'heavy' : 'light'}}`);
  }
}
