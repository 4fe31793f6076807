// @title The Relay Room
// @setting games
// @skill causal_reasoning
// @difficulty hard
// @hint Flip one switch at a time and note exactly which lamps change. A switch that seems dead may only work while
// @hint another switch is on, so test it again in a different setting before you trust your wiring notes.

// Discover hidden switch-to-lamp wiring (including one conditional relay) by flipping switches, then match a target.
class RelayRoomEnv {
  constructor(maxTurns = 12) {
    this.maxTurns = maxTurns;
    this.n = 6;
    this.letters = 'ABCDEF';
  }

  reset(seed) {
    this.turn = 0;
    this.done = false;
    const n = this.n;
    for (let attempt = 0; attempt < 60; attempt++) {
      this.wires = [];
      for (let i = 0; i < n; i++) {
        let mask = 0;
        const size = 1 + Math.floor(Math.random() * 3);
        while (this.bits(mask) < size) mask |= 1 << Math.floor(Math.random() * n);
        this.wires.push(mask);
      }
      this.gated = Math.floor(Math.random() * n);
      this.power = (this.gated + 1 + Math.floor(Math.random() * (n - 1))) % n;
      this.plan = [this.power, this.gated];
      for (let i = 0; i < n; i++) if (!this.plan.includes(i) && Math.random() < 0.4) this.plan.push(i);
      if (this.plan.length < 3) this.plan.push([0, 1, 2].find((i) => !this.plan.includes(i)));
      this.plan.sort((a, b) => a - b);
      this.on = new Array(n).fill(false);
      const prefixes = [];
      for (const i of this.plan) {
        this.on[i] = true;
        prefixes.push(this.lamps());
      }
      this.target = prefixes.pop();
      if (this.target !== 0 && !prefixes.includes(this.target)) break;
    }
    this.on = new Array(n).fill(false);
    return [
      'You are in a relay room with six switches (1-6, all off) and six lamps (A-F, all dark). Each switch is wired to ' +
        'some lamps and flips each of them (on becomes off, off becomes on) whenever it is flipped. But one switch is ' +
        'behind a relay: its lamps only respond while a certain other switch is on.\n' +
        'Make the lamps show exactly the target pattern.\n' +
        'Commands: \\boxed{flip 3} (one switch per turn).\n\n' +
        this.board(),
      {},
    ];
  }

  bits(mask) {
    let c = 0;
    for (let m = mask; m; m >>= 1) c += m & 1;
    return c;
  }

  lamps() {
    let mask = 0;
    for (let i = 0; i < this.n; i++) {
      if (!this.on[i]) continue;
      if (i === this.gated && !this.on[this.power]) continue;
      mask ^= this.wires[i];
    }
    return mask;
  }

  pattern(mask) {
    let s = '';
    for (let i = 0; i < this.n; i++) s += `${this.letters[i]}${mask & (1 << i) ? '*' : '.'} `;
    return s.trimEnd();
  }

  board() {
    const sw = this.on.map((v, i) => `${i + 1}:${v ? 'ON' : 'off'}`).join(' ');
    return `Switches: ${sw}\nLamps:    ${this.pattern(this.lamps())}\nTarget:   ${this.pattern(this.target)}\n(* lit, . dark)`;
  }

  out(text, reward, terminated) {
    if (terminated) this.done = true;
    const truncated = !terminated && this.turn >= this.maxTurns;
    if (truncated) {
      this.done = true;
      text += '\nOut of turns: the night shift takes over the relay room.';
    }
    return [text, reward, terminated, truncated, { turn: this.turn }];
  }

  step(action) {
    if (this.done) return ['The episode is over. Reset to play again.', 0, true, false, {}];
    this.turn++;
    const cmd = extractBoxed(action);
    const help = 'Commands: \\boxed{flip K} with K from 1 to 6.';
    if (cmd === null) return this.out('Reply with one command inside \\boxed{...}. ' + help, 0, false);
    const c = cmd.toLowerCase().replace(/\s+/g, ' ').trim();
    const m = /^(?:flip|toggle|switch|press)\s+(?:switch\s+)?#?(-?\d{1,6})$/.exec(c);
    if (!m) return this.out(`Unknown command "${cmd.slice(0, 40)}". ${help}`, 0, false);
    const k = Number(m[1]);
    if (k < 1 || k > this.n) return this.out(`There is no switch ${k}. ${help}`, 0, false);
    const before = this.lamps();
    this.on[k - 1] = !this.on[k - 1];
    const now = this.lamps();
    const changed = [];
    for (let i = 0; i < this.n; i++) if ((before ^ now) & (1 << i)) changed.push(this.letters[i]);
    const what =
      `You flip switch ${k} ${this.on[k - 1] ? 'ON' : 'off'}. ` +
      (changed.length ? `Lamps that changed: ${changed.join(', ')}.` : 'No lamp changed.');
    if (now === this.target)
      return this.out(`${what}\nThe lamps match the target pattern. The relay room hums approvingly!`, 1, true);
    return this.out(`${what} ${this.maxTurns - this.turn} turn(s) left.\n\n${this.board()}`, 0, false);
  }

  solution() {
    // Flip the switches that are ON in the hidden plan but not ON now (reset leaves them all off).
    return this.plan.filter((i) => !this.on[i]).map((i) => `\\boxed{flip ${i + 1}}`);
  }
}
